//go:build !linux

package main

import "syscall"

// serverProcAttr: no parent-death signal outside Linux; the test's
// cleanup stops its servers.
func serverProcAttr() *syscall.SysProcAttr { return nil }
