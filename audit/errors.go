package audit

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by Record on a closed Log.
	ErrClosed = errors.New("audit: closed")
	// ErrBroken is wrapped by Record's error once a write or sync failed:
	// the Log accepts nothing more until it is opened again.
	ErrBroken = errors.New("audit: log broken by an earlier write error")
	// ErrCorrupt is wrapped by Open's error when the file's last whole line
	// is not a record, so the chain cannot be continued.
	ErrCorrupt = errors.New("audit: corrupt log")
)

// ChainError is Verify's error for a log whose chain is broken: Line is the
// 1-based line at which it breaks.
type ChainError struct {
	Line   int
	Reason string
}

func (e *ChainError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }
