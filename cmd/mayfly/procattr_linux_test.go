package main

import "syscall"

// serverProcAttr makes the kernel kill a test's server process when the
// test process dies first (a timeout's panic runs no cleanup), so no
// cluster node outlives its test and loads the machine for the packages
// still testing.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
