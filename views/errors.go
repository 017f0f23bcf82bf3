package views

import (
	"context"
	"errors"
	"fmt"

	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/jsruntime"
)

var (
	// ErrNotFound is returned for a missing design document or view.
	ErrNotFound = errors.New("views: not found")
	// ErrNoViews is returned for a bucket that cannot have views (memcached).
	ErrNoViews = errors.New("views: this bucket type has no views")
	// ErrClosed is returned after Close, and for a design document or bucket
	// closed (replaced, deleted, detached) while a call was using it.
	ErrClosed = errors.New("views: closed")
	// ErrLoadFailed is returned for a stored design document that could not
	// be loaded (it does not parse or compile, or its index does not open);
	// the error says why. It can be replaced or deleted.
	ErrLoadFailed = errors.New("views: design document could not be loaded")
	// ErrSkipped is why a stored design document named by
	// Options.SkipDesignDocs was not loaded (see LoadErrors).
	ErrSkipped = errors.New("views: skipped by configuration (SkipDesignDocs)")
	// ErrInvalidOptions is returned by New for invalid Options.
	ErrInvalidOptions = errors.New("views: invalid options")
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

// ReduceError is a reduction that failed while answering a query: a built-in
// given values it cannot reduce, a JavaScript reduce that threw or ran too
// long, or a reduction over the size limit. The view's data or functions are
// at fault, not the query. The service counts it in the view's _info
// (reduce_errors, recent_reduce_errors) and logs it.
type ReduceError struct {
	// Code is "builtin_reduce_error", "reduction_too_large", "timeout",
	// "memory_limit" or "reduce_error".
	Code string
	// Reason is the message for the client. For a built-in given a value
	// that is not a number it names the view, Couchbase's reason, the row's
	// key and its document, e.g. "Error in the reduce of view `score`:
	// Builtin _stats function requires map values to be numbers (key:
	// "bo", document id: "g2", value: null)".
	Reason string
	// Err is the underlying error.
	Err error
}

func (e *ReduceError) Error() string { return "views: " + e.Code + ": " + e.Reason }

// Unwrap returns Err.
func (e *ReduceError) Unwrap() error { return e.Err }

// reduceError classifies an error from a reduce query of view.
func reduceError(view string, err error) error {
	var code string
	switch {
	case errors.Is(err, index.ErrStop), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, index.ErrClosed), errors.Is(err, index.ErrUnknownView):
		return err
	case errors.Is(err, jsruntime.ErrReduceInput):
		code = "builtin_reduce_error"
	case errors.Is(err, jsruntime.ErrReductionTooLarge), errors.Is(err, index.ErrReductionTooLarge):
		code = "reduction_too_large"
	case errors.Is(err, jsruntime.ErrTimeout):
		code = "timeout"
	case errors.Is(err, jsruntime.ErrMemoryLimit):
		code = "memory_limit"
	default:
		code = "reduce_error"
	}
	reason := err.Error()
	var be *jsruntime.BuiltinReduceError
	if errors.As(err, &be) {
		reason = fmt.Sprintf("Error in the reduce of view `%s`: %s (key: %s, document id: %q, value: %s)",
			view, be.Reason(), be.Key, be.DocID, be.Value)
	}
	return &ReduceError{Code: code, Reason: reason, Err: err}
}
