package views

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/jsruntime"
)

// TestReduceErrorIsTheReduceFunctionsFailureOnly: a failure of the reduce
// step is a *ReduceError (the client's reduce error, counted in the view's
// _info, failing a cluster's whole query) only when the reduce function or
// built-in failed on the view's data; an index page that cannot be read or
// a runtime closed under the query is returned as it is, a node's failure
// (500 internal_error on one node, the node named in "errors" on a
// cluster); a review found every unrecognised error labelled reduce_error.
func TestReduceErrorIsTheReduceFunctionsFailureOnly(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("index: reading page 7: %w", index.ErrCorrupt),
		fmt.Errorf("index: reading page 7: %w", io.ErrUnexpectedEOF),
		jsruntime.ErrClosed,
		fmt.Errorf("views: rereduce: %w", jsruntime.ErrClosed),
		fmt.Errorf("%w: %q", index.ErrNoReducer, "v"),
	} {
		got := reduceError("v", err, false)
		var re *ReduceError
		if errors.As(got, &re) || errors.Is(got, ErrReduce) || !errors.Is(got, err) {
			t.Errorf("reduceError(%v) = %#v, want the error itself, not a reduce error", err, got)
		}
	}
	for _, tc := range []struct {
		err  error
		code string
	}{
		{&jsruntime.BuiltinReduceError{View: "v", Builtin: "_sum", Value: `"x"`, Key: `"k"`}, "error"},
		{fmt.Errorf("%w: 70000 bytes", index.ErrReductionTooLarge), "error"},
		{&jsruntime.ScriptError{View: "v", Func: "reduce", Msg: "reduction too large (70000 bytes)", Err: jsruntime.ErrReductionTooLarge}, "error"},
		{&jsruntime.ScriptError{View: "v", Func: "reduce", Msg: "TypeError: boom"}, "reduce_error"},
		{&jsruntime.ScriptError{View: "v", Func: "reduce", Msg: "RangeError: Maximum call stack size exceeded", Err: jsruntime.ErrStackOverflow}, "reduce_error"},
		{&jsruntime.ScriptError{View: "v", Func: "reduce", Msg: "timeout", Err: jsruntime.ErrTimeout}, "timeout"},
		{&jsruntime.ScriptError{View: "v", Func: "reduce", Msg: "memory limit exceeded", Err: jsruntime.ErrMemoryLimit}, "memory_limit"},
	} {
		var re *ReduceError
		if got := reduceError("v", tc.err, false); !errors.As(got, &re) || re.Code != tc.code {
			t.Errorf("reduceError(%v) = %#v, want a reduce error coded %q", tc.err, got, tc.code)
		}
	}
}
