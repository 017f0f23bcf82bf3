package audit

import "errors"

// ErrClosed is returned by Record on a closed Log.
var ErrClosed = errors.New("audit: closed")
