package search

import (
	"errors"
	"fmt"
)

// Every error this package makes that the HTTP layer should answer with a
// particular status has a method HTTPStatus() int (the HTTP layer need not
// import this package, nor bleve, to map them).
var (
	// ErrNotFound is returned for a missing index (or a bucket that has none
	// yet). HTTP 404.
	ErrNotFound error = &statusError{"search: not found", 404}
	// ErrClosed is returned after Close, and for an index or bucket closed
	// (replaced, deleted, detached) while a call was using it. HTTP 503.
	ErrClosed error = &statusError{"search: closed", 503}
	// ErrNoSearch is returned for a bucket that cannot have search indexes
	// (a memcached bucket). HTTP 400.
	ErrNoSearch error = &statusError{"search: this bucket type has no search indexes", 400}
	// ErrLoadFailed is returned for a stored index definition that could
	// not be loaded (its index does not open, its collection is gone); the
	// error says why. It can be replaced or deleted. HTTP 500.
	ErrLoadFailed error = &statusError{"search: index could not be loaded", 500}
	// ErrInvalidOptions is returned by New for invalid Options.
	ErrInvalidOptions = errors.New("search: invalid options")
	// ErrCheck is wrapped by every error Check returns: an index does not
	// hold what the bucket's documents give.
	ErrCheck = errors.New("search: check failed")
)

// statusError is a sentinel error with its HTTP status.
type statusError struct {
	msg    string
	status int
}

func (e *statusError) Error() string { return e.msg }

// HTTPStatus is the status the HTTP layer answers.
func (e *statusError) HTTPStatus() int { return e.status }

// DefError is an index definition refused on PutIndex: the HTTP layer answers
// 400 with Reason.
type DefError struct {
	// Reason says what is wrong with the definition.
	Reason string
	// Err is the underlying error, if any (a bleve mapping error).
	Err error
}

func (e *DefError) Error() string { return "search: invalid index definition: " + e.Reason }

// HTTPStatus is 400.
func (e *DefError) HTTPStatus() int { return 400 }

// Unwrap returns the underlying error.
func (e *DefError) Unwrap() error { return e.Err }

func defErr(format string, args ...any) error {
	return &DefError{Reason: fmt.Sprintf(format, args...)}
}

// QueryError is a search request refused before it runs (it does not parse,
// names an unknown query type, asks for too many hits): the HTTP layer
// answers 400 with Reason.
type QueryError struct {
	// Reason says what is wrong with the request.
	Reason string
	// Err is the underlying error, if any (bleve's).
	Err error
}

func (e *QueryError) Error() string { return "search: invalid search request: " + e.Reason }

// HTTPStatus is 400.
func (e *QueryError) HTTPStatus() int { return 400 }

// Unwrap returns the underlying error.
func (e *QueryError) Unwrap() error { return e.Err }

func queryErr(err error, format string, args ...any) error {
	return &QueryError{Reason: fmt.Sprintf(format, args...), Err: err}
}
