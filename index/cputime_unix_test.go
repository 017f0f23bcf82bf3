//go:build unix

package index_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
