// Package jsruntime compiles and runs the JavaScript map and reduce functions
// of Couchbase-style design documents on a pool of goja runtimes, with a
// time limit on every call.
//
// # Basics
//
// Compile checks a design document's functions (a syntax error is a
// *CompileError naming view, function and line). A Pool holds a fixed number
// of workers; Pool.Load compiles a design document once into a Program.
// Program.Map runs all the views' map functions over a batch of documents,
// in one pass per document, spreading documents over the workers in
// parallel; Program.Reducer gives a view's reduce: the built-ins _count,
// _sum and _stats run in Go, a JavaScript reduce borrows a worker.
//
//	pool := jsruntime.NewPool(nil)
//	defer pool.Close()
//	prog, err := pool.Load([]jsruntime.ViewSource{{
//		Name: "by_type", Map: `function (doc, meta) { emit(doc.type, null); }`, Reduce: "_count",
//	}})
//	res, err := prog.Map(ctx, docs) // res[doc][view].Emits, .Err
//
// # What map functions see
//
// A map function is called as function (doc, meta). doc is the document
// parsed as JSON.parse would (property order kept), or, for a binary
// document (Meta.Type "base64"), the base64 string of its bytes. meta is
// {id, rev, seq, vb, expiration, flags, type, ts, created} with seq and vb as strings, as
// in Couchbase. All the views of a design document get the same doc and meta
// objects, one after the other, as in Couchbase. The globals are emit(key,
// value), sum(array), dateToArray(date) ([year, month, day, hour, minute,
// second] in UTC, or null), decodeBase64(string) (an array of byte values,
// as Couchbase's implementation returns, not a string) and log(...) (to
// Options.Logger). There is no require, no process, no timers, no file
// system or network: goja has none and none is added (source maps are off,
// so not even the parser reads files).
//
// emit converts its key and value to JSON at once, in Go, with
// JSON.stringify's rules (toJSON, NaN and infinities as null, undefined
// properties left out); an undefined or missing key or value is null, a
// function is an error. Rows over Couchbase's limits (MaxKeySize,
// MaxEmitSize) fail the view for that document.
//
// # Failures and time limits
//
// Every JavaScript call runs under Options.Timeout: a timer interrupts the
// runtime (goja's Runtime.Interrupt), and so does the cancellation of the
// caller's context and Pool.Close. The interrupt is cleared before the
// runtime is used again, and rows emitted before a failure are dropped. A
// map function that throws, times out, recurses too deep or emits too much
// fails for its view and that document only (ViewResult.Err, a
// *ScriptError wrapping ErrTimeout and the like); the other views' results
// for the same document come back, and the runtime stays usable.
//
// # Runtimes and isolation
//
// Each worker keeps a goja runtime per design document it has run recently;
// Options.CachedPrograms bounds how many a worker keeps. Before a runtime
// runs its first document, everything scripts can reach is frozen: the
// global object, the built-in constructors, their prototypes and whatever
// hangs off them, the helpers (emit, log, sum, dateToArray, decodeBase64)
// and the map and reduce function objects themselves. So no call can leave
// state behind for the next: a global counter cannot be created (assigning
// an undeclared name silently fails in the non-strict code map functions
// are; reading it then throws a ReferenceError, every time), and
// Object.prototype.x = 1, Array.prototype.push = null or emit = function
// (){} change nothing, so results do not depend on the order in which
// documents are indexed. Variables and objects a function creates itself
// behave as usual. Assigning a property that a frozen prototype already has
// would silently fail too (the "override mistake"), so the usual victims
// (toString, valueOf, toLocaleString and constructor of Object.prototype,
// toString and constructor of Function.prototype, name, message, toString
// and constructor of the Error prototypes) are accessors whose setter
// defines the property on the object assigned to, as SES does: o.toString =
// f, F.prototype.toString = f and e.name = "MyError" work. For other
// inherited properties (an array's push, say) defining the property
// (Object.defineProperty, an object literal) works where assigning does not.
// Creating a runtime costs a few milliseconds, most of it the freeze (60 µs
// without), whose walk over the reachable objects runs in Go: written in
// JavaScript it made a runtime cost twice the CPU (four times under the
// race detector).
//
// # Speed
//
// Documents are turned into JavaScript values by a JSON parser of this
// package that builds goja objects directly (two to three times faster than
// calling JSON.parse in the runtime, which goes through encoding/json's
// tokenizer), and emitted values are encoded in Go without a JavaScript
// JSON.stringify call. A document is parsed only when some map function of
// the design document mentions its doc parameter, and meta is built only
// when one mentions meta; the check is textual and errs on the side of
// building (see the benchmarks in bench_test.go).
//
// # Limits
//
// A call stuck inside a built-in that goja cannot interrupt (it notices
// interrupts between instructions only: a native sort of millions of
// elements, a giant string operation) is abandoned once it has run
// Options.Timeout plus a grace (a quarter of the limit, between 250ms and
// 1s): the caller returns, the document fails with ErrTimeout for its views,
// the worker is replaced by a fresh one (Pool.Abandoned counts them), and the
// abandoned goroutine, already interrupted, stops as soon as the built-in
// returns; until then it still burns CPU and holds its memory.
//
// Options.MaxMemory (64 MiB by default) bounds what a call allocates: a
// watchdog samples the process's heap allocation every millisecond while
// calls run and charges it to the running calls in equal shares (Go cannot
// tell which goroutine allocated what), interrupting a call over its budget
// with ErrMemoryLimit. It is an approximation: garbage counts, and so does
// allocation by the rest of the process meanwhile; a single built-in that
// allocates a huge block in one step is seen only after.
//
// The rest of the process's allocation can fail a legitimate call: on a
// busy machine a call's goroutine may wait for a CPU for tens of
// milliseconds between two instructions while the server allocates
// (a bulk load, the storage engine, a view build's batches), and all of it
// is charged to the call. So a map or reduce call interrupted for memory is
// run once more, with fresh arguments, and that run is timed: its goroutine
// is locked to its OS thread, and each sample charges it only the part of
// the process's allocation that its thread's share of the process's CPU
// time stands for (Linux thread CPU clocks; elsewhere the run again is
// charged as the first). A call waiting for a CPU uses none and is charged
// nothing; a bomb does most of the process's work while it runs, is
// charged most of what it allocates, and fails the run again too, so its
// ErrMemoryLimit stands (it has cost two runs, and the dead memory of the
// first may still be uncollected while the second runs). Each run again
// counts in Pool.MemoryRetries. Timing every call instead would cost a
// thread lock and two clock reads per call for what happens rarely; what
// stays approximate is that a timed call is charged in proportion to CPU
// time, so a long-running call beside a server allocating fast is still
// charged some of the server's allocation.
//
// Workers are shared fairly between design documents (Programs): one holds
// at most Options.MaxWorkersPerProgram workers (half of them by default),
// and a returning worker goes to the waiting program holding the fewest. So
// a hostile or slow design document delays mostly itself.
//
// A function source over MaxSourceSize (1 MiB) is refused, and so are
// functions over MaxTotalSourceSize (4 MiB) together; compiling a design
// document that takes longer than MaxCompileTime (5 s) fails.
package jsruntime
