package search

import (
	"errors"
	"fmt"
)

// The errors of this package say what went wrong; the front doors decide
// what to answer (httpapi maps them to HTTP statuses and the FTS service's
// error bodies).
var (
	// ErrNotFound is returned for a missing index (or a bucket that has none
	// yet).
	ErrNotFound = errors.New("search: not found")
	// ErrClosed is returned after Close, and for an index or bucket closed
	// (replaced, deleted, detached) while a call was using it.
	ErrClosed = errors.New("search: closed")
	// ErrNoSearch is returned for a bucket that cannot have search indexes
	// (a memcached bucket).
	ErrNoSearch = errors.New("search: this bucket type has no search indexes")
	// ErrLoadFailed is returned for a stored index definition that could
	// not be loaded (its index does not open, its collection is gone); the
	// error says why. It can be replaced or deleted.
	ErrLoadFailed = errors.New("search: index could not be loaded")
	// ErrInvalidOptions is returned by New for invalid Options.
	ErrInvalidOptions = errors.New("search: invalid options")
	// ErrCheck is wrapped by every error Check returns: an index does not
	// hold what the bucket's documents give.
	ErrCheck = errors.New("search: check failed")
)

// DefError is an index definition refused (by PutIndex, ParseIndexDef,
// SourceBucket): the client's definition is wrong, and Reason says how.
type DefError struct {
	// Reason says what is wrong with the definition.
	Reason string
	// Err is the underlying error, if any (a bleve mapping error).
	Err error
}

func (e *DefError) Error() string { return "search: invalid index definition: " + e.Reason }

// Unwrap returns the underlying error.
func (e *DefError) Unwrap() error { return e.Err }

func defErr(format string, args ...any) error {
	return &DefError{Reason: fmt.Sprintf(format, args...)}
}

// QueryError is a search request refused before it runs (it does not parse,
// names an unknown query type, asks for too many hits): the client's
// request is wrong, and Reason says how.
type QueryError struct {
	// Reason says what is wrong with the request.
	Reason string
	// Err is the underlying error, if any (bleve's).
	Err error
}

func (e *QueryError) Error() string { return "search: invalid search request: " + e.Reason }

// Unwrap returns the underlying error.
func (e *QueryError) Unwrap() error { return e.Err }

func queryErr(err error, format string, args ...any) error {
	return &QueryError{Reason: fmt.Sprintf(format, args...), Err: err}
}
