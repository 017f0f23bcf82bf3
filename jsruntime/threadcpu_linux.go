package jsruntime

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadClock returns the CPU-time clock of the calling goroutine's OS
// thread, which another thread can read (see threadCPU); the goroutine
// must be locked to its thread (runtime.LockOSThread) for as long as the
// clock is used. ok is false where there is none.
func threadClock() (clock int32, ok bool) {
	// Linux's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED): the thread's
	// scheduler run time, as pthread_getcpuclockid gives it.
	tid := int32(unix.Gettid())
	clock = ^tid<<3 | 6
	_, ok = threadCPU(clock)
	return clock, ok
}

// threadCPU reads clock, a thread's CPU-time clock from threadClock: the
// CPU time the thread has used.
func threadCPU(clock int32) (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// processCPU is the CPU time the process has used, all threads together.
func processCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
