package jsruntime_test

// These tests run last in the package (files run in name order): the
// goroutines they abandon go on sorting, and allocating, in the background
// for seconds (tens of them under -race), which would disturb tests that
// measure time or memory.

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/jsruntime"
)

// A built-in that runs past the time limit (a native sort of 1,000,000
// numbers took 9 s without the race detector on a 2-core machine, seven
// times the limit and its grace, and goja notices interrupts only between
// instructions) is abandoned: Map returns without waiting for the sort, the
// document fails with ErrTimeout, and the pool goes on with a fresh
// runtime. Abandoned() counts only calls given up while they still ran, so
// it is the proof of the order; the times are logged, not asserted (a busy
// machine stretches them; BENCHMARKS.md is for speed).
func TestStuckBuiltinAbandoned(t *testing.T) {
	// A second: the sort takes several, and the small document after
	// it, on a fresh runtime beside the abandoned sort, has room on a busy
	// machine (within 200 ms it could time out too).
	const timeout = time.Second
	doc := numbersDoc(1_000_000)
	// log marks when the sort starts: the handler's timestamp.
	var sortStart atomic.Pointer[time.Time]
	p := newPool(t, &jsruntime.Options{Workers: 1, Timeout: timeout, MaxMemory: -1,
		Logger: slog.New(&funcHandler{func() { now := time.Now(); sortStart.CompareAndSwap(nil, &now) }})})
	sorter := load(t, p, jsruntime.ViewSource{Name: "v", Map: `function (doc) { log("sorting"); doc.sort(); emit(doc[0], null); }`},
		jsruntime.ViewSource{Name: "w", Map: `function (doc) { emit("w", null); }`})
	start := time.Now()
	res, err := sorter.Map(context.Background(), []jsruntime.Doc{doc, jsonDoc("small", `[2, 1]`)})
	returned := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0][0].Err, jsruntime.ErrTimeout) {
		t.Errorf("sort: %s, want a timeout", rows(res[0][0]))
	}
	if got := rows(res[1][0]); got != "1=null" {
		t.Errorf("the next document, on a fresh runtime: %s", got)
	}
	if st := sortStart.Load(); st == nil {
		t.Error("the sort did not start")
	} else {
		t.Logf("Map took %v; it returned %v after the sort started (time limit %v, grace 250ms)", returned.Sub(start), returned.Sub(*st), timeout)
	}
	if p.Abandoned() != 1 {
		t.Errorf("Abandoned() = %d, want 1: Map waited for the sort", p.Abandoned())
	}
	// The pool still works, with its single worker.
	length := load(t, p, jsruntime.ViewSource{Name: "v", Map: `function (doc) { emit(doc.length, null); }`})
	res, err = length.Map(context.Background(), []jsruntime.Doc{jsonDoc("a", `[1]`)})
	if err != nil || rows(res[0][0]) != "1=null" {
		t.Errorf("after: %v %s", err, rows(res[0][0]))
	}
}

// A JavaScript reduce stuck in a built-in is abandoned too: Rereduce
// returns ErrTimeout without waiting for the sort (Abandoned counts it),
// and the reducer works after.
func TestStuckReduceAbandoned(t *testing.T) {
	const timeout = 200 * time.Millisecond
	p := newPool(t, &jsruntime.Options{Workers: 1, Timeout: timeout, MaxMemory: -1})
	pr := load(t, p, jsruntime.ViewSource{Name: "v", Map: `function (doc) {}`,
		Reduce: `function (keys, values) { values[0].sort(); return values[0].length; }`})
	red, err := pr.Reducer("v")
	if err != nil {
		t.Fatal(err)
	}
	doc := numbersDoc(300_000) // sorts for seconds, and converts faster
	start := time.Now()
	_, err = red.Rereduce(context.Background(), [][]byte{doc.Value})
	t.Logf("reduce returned after %v", time.Since(start))
	if !errors.Is(err, jsruntime.ErrTimeout) {
		t.Errorf("reduce: %v, want a timeout", err)
	}
	if p.Abandoned() != 1 {
		t.Errorf("Abandoned() = %d, want 1: Rereduce waited for the sort", p.Abandoned())
	}
	if out, err := red.Rereduce(context.Background(), [][]byte{[]byte("[3,1]")}); err != nil || string(out) != "2" {
		t.Errorf("after: %s %v", out, err)
	}
}

// funcHandler is a slog handler that calls f for each record.
type funcHandler struct{ f func() }

func (h *funcHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h *funcHandler) Handle(context.Context, slog.Record) error { h.f(); return nil }
func (h *funcHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h *funcHandler) WithGroup(string) slog.Handler             { return h }
