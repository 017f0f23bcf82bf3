package jsruntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/dop251/goja"
)

// Reducer reduces the rows of one view. Values, keys and results are JSON
// text. A Reducer is safe for concurrent use: built-ins run in Go, and a
// JavaScript reduce borrows a worker of the pool for each call.
type Reducer interface {
	// Reduce folds map rows: keys[i], ids[i] and values[i] are row i's key
	// (JSON), document id and value (JSON). Built-ins read only values;
	// a JavaScript reduce gets keys as [[key, id], ...] and needs
	// len(keys) == len(ids) == len(values).
	Reduce(ctx context.Context, keys [][]byte, ids []string, values [][]byte) ([]byte, error)
	// Rereduce folds earlier results of Reduce or Rereduce; a JavaScript
	// reduce gets keys = null and rereduce = true.
	Rereduce(ctx context.Context, values [][]byte) ([]byte, error)
}

// Reducer returns the reducer of the named view, or nil, nil when the view
// has no reduce. An unknown view is ErrNoView.
//
// The built-ins follow Couchbase: _count counts rows and its rereduce sums
// counts; _sum adds numbers; _stats gives {"sum","count","min","max",
// "sumsqr"} of numbers, and its rereduce merges them (zero rows give {}).
// Integer sums stay exact while they fit in 64 bits. A map value that is not
// a JSON number (null, a string, an array, an object) is a
// *BuiltinReduceError naming the view, the row's key and document; other bad
// rereduce input is an error wrapping ErrReduceInput. A result over
// MaxReductionSize bytes is ErrReductionTooLarge.
func (pr *Program) Reducer(view string) (Reducer, error) {
	i, ok := pr.byName[view]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoView, view)
	}
	switch pr.views[i].reduceKind {
	case reduceCount:
		return &builtinReducer{pr: pr, view: view, kind: reduceCount}, nil
	case reduceSum:
		return &builtinReducer{pr: pr, view: view, kind: reduceSum}, nil
	case reduceStats:
		return &builtinReducer{pr: pr, view: view, kind: reduceStats}, nil
	case reduceJS:
		return &jsReducer{pr: pr, idx: i}, nil
	}
	return nil, nil
}

// checkSize enforces MaxReductionSize.
func checkSize(view string, out []byte) ([]byte, error) {
	if len(out) > MaxReductionSize {
		return nil, &ScriptError{
			View: view, Func: funcReduce,
			Msg: fmt.Sprintf("reduction too large (%d bytes)", len(out)),
			Err: ErrReductionTooLarge,
		}
	}
	return out, nil
}

// jsReducer runs a view's JavaScript reduce function.
type jsReducer struct {
	pr  *Program
	idx int
}

// Reduce calls the function with keys [[key, id], ...], the values and
// rereduce false.
func (r *jsReducer) Reduce(ctx context.Context, keys [][]byte, ids []string, values [][]byte) ([]byte, error) {
	if len(keys) != len(values) || len(ids) != len(values) {
		return nil, fmt.Errorf("jsruntime: view %s: reduce needs as many keys (%d) and ids (%d) as values (%d)",
			r.pr.views[r.idx].name, len(keys), len(ids), len(values))
	}
	return r.run(ctx, keys, ids, values, false)
}

// Rereduce calls the function with keys null, the values and rereduce true.
func (r *jsReducer) Rereduce(ctx context.Context, values [][]byte) ([]byte, error) {
	return r.run(ctx, nil, nil, values, true)
}

func (r *jsReducer) run(ctx context.Context, keys [][]byte, ids []string, values [][]byte, rereduce bool) ([]byte, error) {
	pr := r.pr
	view := pr.views[r.idx].name
	if err := pr.check(); err != nil {
		return nil, err
	}
	w, err := pr.pool.borrow(ctx, pr, nil)
	if err != nil {
		return nil, err
	}
	// The call runs on a goroutine of its own, so that a call stuck in a
	// built-in past its time limit can be abandoned (see mapJob.run).
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := r.runOn(ctx, w, keys, ids, values, rereduce)
		done <- result{out, err}
	}()
	select {
	case res := <-done:
		pr.pool.release(w, pr)
		return res.out, res.err
	case <-w.stuck:
		pr.pool.release(pr.pool.replace(w), pr)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &ScriptError{View: view, Func: funcReduce,
			Msg: "timeout (stuck in a built-in function; runtime abandoned)", Err: ErrTimeout}
	}
}

// runOn runs the reduce on w, which the caller borrowed.
func (r *jsReducer) runOn(ctx context.Context, w *worker, keys [][]byte, ids []string, values [][]byte, rereduce bool) ([]byte, error) {
	pr := r.pr
	view := pr.views[r.idx].name
	stop := context.AfterFunc(ctx, func() { w.interruptFor(ctx) })
	defer stop()
	rt, err := w.runtimeFor(pr)
	if err != nil {
		return nil, err
	}
	// The arguments, built again for a run again (see worker.callRetrying):
	// the interrupted run may have changed them.
	args := func() ([]goja.Value, error) {
		vm := rt.vm
		vals := make([]any, len(values))
		for i, v := range values {
			var err error
			if vals[i], err = rt.dec.decode(v); err != nil {
				return nil, fmt.Errorf("jsruntime: view %s: reduce value %d: %w", view, i, err)
			}
		}
		keysArg := goja.Null()
		if !rereduce && !pr.views[r.idx].reduceKeys {
			keysArg = goja.Undefined() // unobservable: the function never reads it
		} else if !rereduce {
			pairs := make([]any, len(keys))
			for i, k := range keys {
				kv, err := rt.dec.decode(k)
				if err != nil {
					return nil, fmt.Errorf("jsruntime: view %s: reduce key %d: %w", view, i, err)
				}
				pairs[i] = vm.NewArray(kv, ids[i])
			}
			keysArg = vm.NewArray(pairs...)
		}
		return []goja.Value{keysArg, vm.NewArray(vals...), vm.ToValue(rereduce)}, nil
	}
	first, err := args()
	if err != nil {
		return nil, err
	}
	rt.view, rt.docID = view, ""
	rt.redOut = rt.redOut[:0]
	_, err = w.callRetrying(ctx, rt, func() ([]goja.Value, error) {
		rt.redOut = rt.redOut[:0]
		return args()
	}, rt.reduces[r.idx], first...)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, ErrClosed) {
			return nil, ErrClosed
		}
		return nil, scriptError(view, funcReduce, err)
	}
	return checkSize(view, bytes.Clone(rt.redOut))
}
