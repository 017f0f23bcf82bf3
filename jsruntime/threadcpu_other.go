//go:build !linux

package jsruntime

import "time"

// threadClock has no per-thread CPU clock to offer outside Linux: a retried
// call is then charged as the first attempt was (see memWatch).
func threadClock() (clock int32, ok bool) { return 0, false }

func threadCPU(clock int32) (time.Duration, bool) { return 0, false }

func processCPU() (time.Duration, bool) { return 0, false }
