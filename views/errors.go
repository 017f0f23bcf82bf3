package views

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound is returned for a missing design document or view.
	ErrNotFound = errors.New("views: not found")
	// ErrNoViews is returned for a bucket that cannot have views (memcached).
	ErrNoViews = errors.New("views: this bucket type has no views")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("views: closed")
)

// QueryError is a bad query parameter: HTTP 400 {"error": Code, "reason": Reason}.
type QueryError struct {
	// Param names the offending parameter.
	Param string
	// Code is "query_parse_error" or "bad_request", as Couchbase answers.
	Code string
	// Reason is the message for the client.
	Reason string
}

func (e *QueryError) Error() string { return fmt.Sprintf("views: %s: %s", e.Param, e.Reason) }

func parseErr(param, format string, args ...any) error {
	return &QueryError{Param: param, Code: "query_parse_error", Reason: fmt.Sprintf(format, args...)}
}

func badRequest(param, format string, args ...any) error {
	return &QueryError{Param: param, Code: "bad_request", Reason: fmt.Sprintf(format, args...)}
}

// DesignDocError is a design document refused on save: HTTP 400
// {"error": "invalid_design_document", "reason": Reason}.
type DesignDocError struct {
	// Reason says what is wrong, naming the view (and line) where it can.
	Reason string
	// Err is the underlying error, if any (a *jsruntime.CompileError).
	Err error
}

func (e *DesignDocError) Error() string { return "views: invalid design document: " + e.Reason }

// Unwrap returns the underlying error.
func (e *DesignDocError) Unwrap() error { return e.Err }
