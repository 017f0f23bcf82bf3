package crashtest

import (
	"os"
	"syscall"
)

// childProcAttr makes the kernel kill the server if the test process dies
// first, so no server outlives the test.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// quitSignal makes a Go process print every goroutine's stack and exit.
var quitSignal os.Signal = syscall.SIGQUIT
