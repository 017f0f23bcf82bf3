//go:build unix

package memcache

import (
	"fmt"
	"syscall"
)

// processCPU returns the process's user and system CPU time as memcached's
// rusage_user and rusage_system print them: seconds, a point, six digits of
// microseconds.
func processCPU() (user, system string) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return "0.000000", "0.000000"
	}
	f := func(tv syscall.Timeval) string { return fmt.Sprintf("%d.%06d", tv.Sec, tv.Usec) }
	return f(ru.Utime), f(ru.Stime)
}
