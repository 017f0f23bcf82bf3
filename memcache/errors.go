package memcache

import "errors"

var (
	// ErrServerClosed is returned by Serve and ListenAndServe once Close has
	// been called.
	ErrServerClosed = errors.New("memcache: server closed")
	// ErrInvalidOptions is returned by New for an option out of range; the
	// wrapping error names the option.
	ErrInvalidOptions = errors.New("memcache: invalid options")
	// ErrLineTooLong is the reason a connection is closed when a client sends
	// a command line longer than the limit (memcached closes it silently too).
	ErrLineTooLong = errors.New("memcache: command line too long")
	// ErrTooManyConnections is the reason a connection is refused when
	// MaxConns connections are already open.
	ErrTooManyConnections = errors.New("memcache: too many open connections")
)
