//go:build !linux

package chaostest

import "syscall"

// childProcAttr sets nothing where the kernel has no parent-death signal.
func childProcAttr() *syscall.SysProcAttr { return nil }
