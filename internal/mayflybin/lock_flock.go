//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package mayflybin

import (
	"errors"
	"os"
	"syscall"
)

// lock takes an exclusive flock of path (created if missing), waiting for
// it; unlock releases it. The system releases it too if the process dies.
func lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
