package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestApplyAll: a batch's writes each get their own result, in the order
// given; writes to one key apply in that order (the last one wins, a CAS
// taken from an earlier one's result is not needed); a bad operation fails
// only itself.
func TestApplyAll(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, engine.Couchbase)
	c := b.DefaultCollection()
	var ops []engine.Op
	for i := range 200 {
		ops = append(ops, engine.Op{Kind: engine.OpUpsert, Key: fmt.Sprint("k", i%10), Value: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	ops = append(ops,
		engine.Op{Kind: engine.OpInsert, Key: "k0", Value: []byte(`{}`)},  // exists
		engine.Op{Kind: engine.OpDelete, Key: "k1"},                       // deletes k1
		engine.Op{Kind: engine.OpReplace, Key: "k1", Value: []byte(`{}`)}, // k1 gone now
		engine.Op{Kind: "merge", Key: "k2"},                               // no such kind
		engine.Op{Kind: engine.OpUpsert, Key: "k3"},                       // no value
		engine.Op{Kind: engine.OpTouch, Key: "k4", Opts: engine.WriteOptions{Expiry: 60}},
		engine.Op{Kind: engine.OpUpsert, Key: "", Value: []byte(`{}`)}, // bad key
	)
	res := c.ApplyAll(ctx, ops)
	if len(res) != len(ops) {
		t.Fatalf("%d results for %d ops", len(res), len(ops))
	}
	for i := range 200 {
		if res[i].Err != nil || res[i].Doc == nil || string(res[i].Doc.Value) != string(ops[i].Value) {
			t.Fatalf("result %d: %+v", i, res[i])
		}
		if i >= 10 && res[i].Doc.Seq <= res[i-10].Doc.Seq {
			t.Fatalf("write %d to %s got seq %d, not after write %d's %d", i, ops[i].Key, res[i].Doc.Seq, i-10, res[i-10].Doc.Seq)
		}
	}
	wantErr := []error{engine.ErrKeyExists, nil, engine.ErrNotFound, engine.ErrInvalidOp, engine.ErrInvalidOp, nil, engine.ErrInvalidKey}
	for j, want := range wantErr {
		r := res[200+j]
		if (want == nil) != (r.Err == nil) || (want != nil && !errors.Is(r.Err, want)) {
			t.Errorf("op %d (%s %q): err %v, want %v", 200+j, ops[200+j].Kind, ops[200+j].Key, r.Err, want)
		}
	}
	for i := range 10 {
		d, err := c.Get(ctx, fmt.Sprint("k", i))
		if i == 1 {
			if !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("k1 after its delete: %v", err)
			}
			continue
		}
		if err != nil || string(d.Value) != fmt.Sprintf(`{"n":%d}`, 190+i) {
			t.Fatalf("k%d = %s, %v; want the last write, n %d", i, d.Value, err, 190+i)
		}
	}
}

// TestPipelineOrderAndBounds: tasks on one key never overlap and run in
// submission order; no more than Window tasks are in flight; the byte budget
// holds except for a task alone; Wait returns after every task.
func TestPipelineOrderAndBounds(t *testing.T) {
	const window, maxBytes = 8, 100
	p := engine.NewPipeline(context.Background(), &engine.PipelineOptions{Window: window, MaxBytes: maxBytes})
	var inFlight, maxInFlight, bytes, maxBytesSeen atomic.Int64
	var mu sync.Mutex
	order := make(map[string][]int)
	running := make(map[string]bool)
	var overlap atomic.Bool
	var tasks []*engine.Task
	for i := range 500 {
		key := fmt.Sprint("k", i%7)
		size := 10
		if i == 250 {
			size = 1000 // over the whole budget: runs alone
		}
		tasks = append(tasks, p.Go(key, size, func(ctx context.Context) {
			n := inFlight.Add(1)
			by := bytes.Add(int64(size))
			for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
			}
			if size <= maxBytes {
				for m := maxBytesSeen.Load(); by > m && !maxBytesSeen.CompareAndSwap(m, by); m = maxBytesSeen.Load() {
				}
			} else if by != int64(size) {
				t.Errorf("the oversized task ran beside others (%d bytes in flight)", by)
			}
			mu.Lock()
			if running[key] {
				overlap.Store(true)
			}
			running[key] = true
			order[key] = append(order[key], i)
			mu.Unlock()
			mu.Lock()
			running[key] = false
			mu.Unlock()
			bytes.Add(-int64(size))
			inFlight.Add(-1)
		}))
	}
	p.Wait()
	for i, tk := range tasks {
		select {
		case <-tk.Done():
		default:
			t.Fatalf("task %d not done after Wait", i)
		}
	}
	if overlap.Load() {
		t.Error("two tasks on one key ran at once")
	}
	for key, got := range order {
		for j := 1; j < len(got); j++ {
			if got[j] <= got[j-1] {
				t.Fatalf("key %s ran %v: out of submission order", key, got)
			}
		}
	}
	if n := maxInFlight.Load(); n > window {
		t.Errorf("%d tasks in flight, window %d", n, window)
	}
	if n := maxBytesSeen.Load(); n > maxBytes {
		t.Errorf("%d bytes in flight, budget %d", n, maxBytes)
	}
}
