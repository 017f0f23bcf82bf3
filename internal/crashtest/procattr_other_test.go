//go:build !linux

package crashtest

import (
	"os"
	"syscall"
)

// childProcAttr: no parent-death signal outside Linux; the test's cleanup
// kills the server.
func childProcAttr() *syscall.SysProcAttr { return nil }

// quitSignal: none outside Linux here; a hang is simply killed.
var quitSignal os.Signal
