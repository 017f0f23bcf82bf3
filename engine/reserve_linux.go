package engine

import (
	"os"
	"syscall"
)

// allocate takes size bytes of disk for f at once (the pebble store's
// reserve), without writing them.
func allocate(f *os.File, size int64) error {
	return syscall.Fallocate(int(f.Fd()), 0, 0, size)
}
