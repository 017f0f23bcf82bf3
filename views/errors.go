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
	// ErrTimeout is wrapped by the error of a stale=false share of a query
	// across nodes (Query.Partial) whose index did not catch up within
	// connection_timeout: the share is missing, listed among the answer's
	// errors with Couchbase's reason, "timeout".
	ErrTimeout = errors.New("views: timeout")
	// ErrInvalidOptions is returned by New for invalid Options.
	ErrInvalidOptions = errors.New("views: invalid options")
	// ErrReduce is matched (errors.Is) by every *ReduceError: a reduction
	// that failed because of the view's data or functions. On a cluster it
	// fails the whole query, whichever node's share met it, as it fails a
	// query on one node: it is an error of the data, not of a node.
	ErrReduce = errors.New("views: reduce failed")
	// ErrNameNotUTF8 is returned by PutDesignDoc and CheckDesignDoc for a
	// design document name that is not valid UTF-8 (sent percent-encoded
	// as other bytes): names are shown in JSON answers and as /metrics
	// labels, which must be UTF-8. One stored before the check stays
	// readable and deletable.
	ErrNameNotUTF8 = errors.New("views: design document name is not valid UTF-8")
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
	// Code is the error code a client is shown: "error" (Couchbase's, for a
	// built-in given a value that is not a number and for a reduction
	// too large), "timeout", "memory_limit" or "reduce_error".
	Code string
	// Reason is the message for the client. For a built-in given a value
	// that is not a number and for a reduction too large it is Couchbase's
	// text, e.g. "Reducer: Error building index for view `score`, reason:
	// Value is not a number (key "bo")" and "reduction too large".
	Reason string
	// Err is the underlying error.
	Err error
}

func (e *ReduceError) Error() string { return "views: " + e.Code + ": " + e.Reason }

// Unwrap returns Err.
func (e *ReduceError) Unwrap() error { return e.Err }

// Is reports whether target is ErrReduce, which every ReduceError matches.
func (e *ReduceError) Is(target error) bool { return target == ErrReduce } // lint:allow error-compare an Is method compares its own sentinel

// reduceError classifies an error from a reduce query of view: the
// reduce function's or built-in's failure on the view's data (a value a
// built-in cannot reduce, a reduction too large, a JavaScript reduce that
// threw, overflowed its stack, ran too long or out of memory) is a
// *ReduceError; any other error (an index page that cannot be read, a
// runtime closed under the query, the query's context ending) is returned
// as it is, a failure of the node rather than of the view: a client on one
// node is answered 500 internal_error, and on a cluster the node is named
// in the answer's "errors" while the other nodes' rows stand. updating
// says whether the view has reduced without error before (see
// reduceHistory): Couchbase's reason for a value that is not a number says
// "Error updating index" then, "Error building index" before.
func reduceError(view string, err error, updating bool) error {
	var code string
	var se *jsruntime.ScriptError
	switch {
	case errors.Is(err, index.ErrStop), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, index.ErrClosed), errors.Is(err, index.ErrUnknownView), errors.Is(err, jsruntime.ErrClosed):
		return err
	case errors.Is(err, jsruntime.ErrReduceInput), errors.Is(err, jsruntime.ErrReductionTooLarge), errors.Is(err, index.ErrReductionTooLarge):
		// Couchbase's view engine answers {error, Reason}, which its HTTP
		// layer shows as {"error": "error", "reason": Reason}.
		code = "error"
	case errors.Is(err, jsruntime.ErrTimeout):
		code = "timeout"
	case errors.Is(err, jsruntime.ErrMemoryLimit):
		code = "memory_limit"
	case errors.As(err, &se):
		code = "reduce_error" // a JavaScript reduce that threw or overflowed its stack
	default:
		return err
	}
	reason := err.Error()
	phase := "building"
	if updating {
		phase = "updating"
	}
	var be *jsruntime.BuiltinReduceError
	switch {
	case errors.As(err, &be):
		// Couchbase's index builder and updater (couchstore's view
		// reducers): "Value is not a number (key <key as JSON>)".
		reason = fmt.Sprintf("Reducer: Error %s index for view `%s`, reason: Value is not a number", phase, view)
		if be.Key != "" {
			reason += " (key " + be.Key + ")"
		}
	case errors.Is(err, jsruntime.ErrReduceInput):
		// A bad value met on a rereduce: Couchbase names no key then.
		reason = fmt.Sprintf("Reducer: Error %s index for view `%s`, reason: Value is not a number", phase, view)
	case errors.Is(err, jsruntime.ErrReductionTooLarge), errors.Is(err, index.ErrReductionTooLarge):
		reason = "reduction too large"
	}
	return &ReduceError{Code: code, Reason: reason, Err: err}
}
