//go:build !linux

package engine

import (
	"errors"
	"os"
)

// allocate is not available here: the reserve is written instead.
func allocate(*os.File, int64) error { return errors.ErrUnsupported }
