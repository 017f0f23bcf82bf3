package jsruntime

import (
	"errors"
	"fmt"
)

// ErrTimeout is the error of a JavaScript call that ran longer than
// Options.Timeout and was interrupted. It reaches callers wrapped in a
// *ScriptError naming the view; test with errors.Is.
var ErrTimeout = errors.New("jsruntime: timeout")

// ErrMemoryLimit is the error of a JavaScript call that allocated more than
// Options.MaxMemory (as the memory watchdog estimates it) and was
// interrupted. It reaches callers wrapped in a *ScriptError.
var ErrMemoryLimit = errors.New("jsruntime: memory limit exceeded")

// ErrStackOverflow is the error of a JavaScript call that nested deeper than
// the runtime's call-stack limit (runaway recursion). It reaches callers
// wrapped in a *ScriptError.
var ErrStackOverflow = errors.New("jsruntime: maximum call stack size exceeded")

// ErrClosed is returned by every call on a Pool, or on a Program or
// Reducer of a Pool, after Close, and by calls on a Program after its own
// Close. Calls running when the pool closes are interrupted with it.
var ErrClosed = errors.New("jsruntime: closed")

// ErrInvalidJSON is the error for a document whose Meta.Type is "json" but
// whose value is not one JSON value, and for reduce input that is not JSON.
var ErrInvalidJSON = errors.New("jsruntime: invalid JSON")

// ErrKeyTooLong is the error of a map function that emitted a key whose JSON
// is MaxKeySize bytes or longer (Couchbase: "too long key emitted"). The
// document contributes no rows to that view.
var ErrKeyTooLong = errors.New("jsruntime: too long key emitted")

// ErrEmitTooLarge is the error of a map function whose emitted keys and
// values for one document add up to more than MaxEmitSize bytes (Couchbase:
// "too much data emitted"). The document contributes no rows to that view.
var ErrEmitTooLarge = errors.New("jsruntime: too much data emitted")

// ErrTooManyEmits is the error of a map function that emitted more than
// MaxEmitsPerDoc rows for one document. The ScriptError's message is
// Couchbase's: "Too many (70000) keys emitted for document `doc1` (maximum
// allowed is 65535" (sic: no closing parenthesis). The document contributes
// no rows to that view.
var ErrTooManyEmits = errors.New("jsruntime: too many keys emitted")

// ErrReductionTooLarge is the error of a reduce or rereduce whose result is
// more than MaxReductionSize bytes of JSON (Couchbase: "reduction too large").
var ErrReductionTooLarge = errors.New("jsruntime: reduction too large")

// ErrReduceInput is the error of a built-in reduce given a value it cannot
// fold: _sum and _stats take numbers only, as Couchbase's do (a map value
// that is not one is a *BuiltinReduceError), and, on rereduce, their own
// earlier results; _count's rereduce takes numbers.
var ErrReduceInput = errors.New("jsruntime: invalid input for built-in reduce")

// BuiltinReduceError is the error of _sum or _stats given a map value
// that is not a number. It wraps ErrReduceInput; Reason is Couchbase's text.
type BuiltinReduceError struct {
	View    string // the view's name
	Builtin string // "_sum" or "_stats"
	Key     string // the row's key as JSON ("" if unknown)
	DocID   string // the row's document ID ("" if unknown)
	Value   string // the offending value as JSON, perhaps cut short
}

// Reason is Couchbase's message, e.g. "Builtin _stats function requires map
// values to be numbers".
func (e *BuiltinReduceError) Reason() string {
	return "Builtin " + e.Builtin + " function requires map values to be numbers"
}

// Error returns e.g. "jsruntime: view score: Builtin _stats function
// requires map values to be numbers (key "bo", document "doc7", value null)".
func (e *BuiltinReduceError) Error() string {
	return fmt.Sprintf("jsruntime: view %s: %s (key %s, document %q, value %s)", e.View, e.Reason(), e.Key, e.DocID, e.Value)
}

// Unwrap returns ErrReduceInput.
func (e *BuiltinReduceError) Unwrap() error { return ErrReduceInput }

// ErrUnknownBuiltin is wrapped by the *CompileError for a reduce that names
// a built-in other than _count, _sum and _stats.
var ErrUnknownBuiltin = errors.New("jsruntime: invalid built-in reduce function")

// ErrNotFunction is wrapped by the *CompileError for a map or reduce source
// that parses but is not a single function expression.
var ErrNotFunction = errors.New("jsruntime: not a function expression")

// ErrSourceTooLarge is wrapped by the *CompileError for a map or reduce
// function longer than MaxSourceSize bytes.
var ErrSourceTooLarge = errors.New("jsruntime: function source too large")

// ErrCompileTimeout is wrapped by the *CompileError for a design document
// whose functions took longer than MaxCompileTime to compile.
var ErrCompileTimeout = errors.New("jsruntime: compilation took too long")

// ErrNoView is returned by Program.Reducer for a view name the program does
// not have.
var ErrNoView = errors.New("jsruntime: no such view")

// errAbort is the interrupt value a native helper uses to stop the running
// function for good (an emit over the limits); the reason is kept in
// vmState.abortErr. Never returned to callers.
var errAbort = errors.New("jsruntime: aborted")

// CompileError describes a map or reduce function that cannot be compiled:
// a syntax error, a source that is not a function expression, or an unknown
// built-in reduce. Callers turn it into Couchbase's 400 reasons, e.g.
// "Syntax error in the map function of the view `V': ..." or
// "Invalid built-in reduce function for view `V': _median".
type CompileError struct {
	View string // the view's name
	Func string // "map" or "reduce"
	Line int    // 1-based line in the function source; 0 if unknown
	Msg  string // e.g. "SyntaxError: Unexpected token )"
	Err  error  // ErrNotFunction, ErrUnknownBuiltin or nil for syntax errors
}

// Error returns e.g. "jsruntime: view by_type: map: SyntaxError: Unexpected
// token ) (line 3)".
func (e *CompileError) Error() string {
	s := fmt.Sprintf("jsruntime: view %s: %s: %s", e.View, e.Func, e.Msg)
	if e.Line > 0 {
		s += fmt.Sprintf(" (line %d)", e.Line)
	}
	return s
}

// Unwrap returns the sentinel the error wraps, if any.
func (e *CompileError) Unwrap() error { return e.Err }

// ScriptError is the failure of one JavaScript call for one view: an
// exception thrown by the function (Err is nil, Msg is the thrown value as a
// string, e.g. "TypeError: Cannot read property 'x' of undefined"), a time
// out (Err is ErrTimeout), a stack overflow (ErrStackOverflow), or an emit
// over Couchbase's limits (ErrKeyTooLong, ErrEmitTooLarge, ErrTooManyEmits).
type ScriptError struct {
	View string // the view's name
	Func string // "map" or "reduce"
	Msg  string // what went wrong, for people
	Err  error  // the sentinel, or nil for a thrown exception
}

// Error returns e.g. "jsruntime: view by_type: map: TypeError: ...".
func (e *ScriptError) Error() string {
	return fmt.Sprintf("jsruntime: view %s: %s: %s", e.View, e.Func, e.Msg)
}

// Unwrap returns the sentinel the error wraps, if any.
func (e *ScriptError) Unwrap() error { return e.Err }
