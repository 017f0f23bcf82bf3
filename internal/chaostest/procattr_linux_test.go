package chaostest

import "syscall"

// childProcAttr makes the kernel kill a server if the test process dies
// first, so no server outlives the test.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
