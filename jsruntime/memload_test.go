package jsruntime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/internal/racebuild"
	"github.com/mayflydb/mayfly/jsruntime"
)

// allocLoad runs goroutines that allocate garbage at about rate bytes a
// second in all (as fast as they can with rate 0), as a server does beside a view build (a bulk load, the
// storage engine, the build's own batches), until the test ends.
func allocLoad(t *testing.T, goroutines int, rate int) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	const chunk = 64 << 10
	var sink [][]byte
	var sinkMu sync.Mutex
	for range goroutines {
		wg.Go(func() {
			per := rate / goroutines
			start := time.Now()
			var made int
			for {
				select {
				case <-done:
					return
				default:
				}
				if want := int(time.Since(start).Seconds() * float64(per)); rate > 0 && made >= want {
					time.Sleep(time.Millisecond)
					continue
				}
				b := make([]byte, chunk)
				b[0] = 1
				made += chunk
				sinkMu.Lock()
				sink = append(sink[:0], b) // garbage once replaced
				sinkMu.Unlock()
			}
		})
	}
	t.Cleanup(func() { close(done); wg.Wait() })
}

// A legitimate map function is not failed for what the rest of the process
// allocates while it runs, even on a busy machine where its goroutine waits
// for a CPU between instructions: a document must not silently drop out of
// its views.
func TestMemoryLimitNotChargedOthersAllocation(t *testing.T) {
	// One P: the calls wait for it behind the allocating goroutines and one
	// another, as on a machine with more work than CPUs.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := newPool(t, &jsruntime.Options{Workers: 4, MaxMemory: 4 << 20, Timeout: 30 * time.Second})
	pr := load(t, p, jsruntime.ViewSource{Name: "v", Map: `function (doc, meta) { var s = 0; for (var i = 0; i < 300; i++) s += i % 7; emit(meta.id, doc.n * 2 + s); }`})
	allocLoad(t, 4, 256<<20)
	docs := make([]jsruntime.Doc, 300)
	for i := range docs {
		docs[i] = jsonDoc(fmt.Sprint("d", i), fmt.Sprintf(`{"n": %d, "pad": "%0200d"}`, i, i))
	}
	failed := 0
	rounds := racebuild.Scale(8) // the pool's and the load's goroutines: two rounds under -race, eight without
	for round := range rounds {
		res, err := pr.Map(context.Background(), docs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r[0].Err != nil {
				failed++
				if failed <= 3 {
					t.Errorf("round %d: document %d failed: %v", round, i, r[0].Err)
				}
			} else if len(r[0].Emits) != 1 {
				t.Errorf("round %d: document %d: %d rows", round, i, len(r[0].Emits))
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d map calls failed", failed, rounds*len(docs))
	}
	t.Logf("calls run again after the memory limit: %d", p.MemoryRetries())
}

// A real bomb is still stopped under the same load.
func TestMemoryBombUnderLoad(t *testing.T) {
	p := newPool(t, &jsruntime.Options{Workers: 4, MaxMemory: 4 << 20, Timeout: 30 * time.Second})
	pr := load(t, p,
		jsruntime.ViewSource{Name: "bomb", Map: `function (doc) { var a = []; while (1) a.push("abc".repeat(1000) + a.length); }`},
		jsruntime.ViewSource{Name: "ok", Map: `function (doc) { emit(1, 2); }`})
	allocLoad(t, 4, 256<<20)
	res, err := pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("a", `{}`), jsonDoc("b", `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !errors.Is(r[0].Err, jsruntime.ErrMemoryLimit) {
			t.Errorf("document %d: bomb: %s, want the memory limit", i, rows(r[0]))
		}
		if got := rows(r[1]); got != "1=2" {
			t.Errorf("document %d: other view: %s", i, got)
		}
	}
}

// A run again gets fresh arguments: a bomb that marks its document before
// blowing up does not find the mark when run again (which would let it
// pass), fails with the memory limit, and says it was run again; the runs
// again are counted.
func TestMemoryLimitRunAgain(t *testing.T) {
	p := newPool(t, &jsruntime.Options{Workers: 1, MaxMemory: 4 << 20, Timeout: 30 * time.Second})
	pr := load(t, p,
		jsruntime.ViewSource{Name: "bomb", Map: `function (doc) {
			if (doc.seen) { emit("passed", null); return; }
			doc.seen = true;
			var a = []; while (1) a.push("abc".repeat(1000) + a.length);
		}`},
		jsruntime.ViewSource{Name: "ok", Map: `function (doc) { emit(doc.seen || false, null); }`})
	res, err := pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("a", `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0][0].Err, jsruntime.ErrMemoryLimit) {
		t.Fatalf("bomb: %s, want the memory limit", rows(res[0][0]))
	}
	if !strings.Contains(res[0][0].Err.Error(), "also when run again") {
		t.Errorf("error %q does not say the call was run again", res[0][0].Err)
	}
	if got := rows(res[0][1]); got != "true=null" { // the views share the document, as in Couchbase
		t.Errorf("other view: %s", got)
	}
	if n := pr.MemoryRetries(); n != 1 {
		t.Errorf("program's runs again: %d, want 1", n)
	}
	if n := p.MemoryRetries(); n != 1 {
		t.Errorf("pool's runs again: %d, want 1", n)
	}
}

// A reduce that blows up fails with the memory limit after its run again.
func TestReduceMemoryBomb(t *testing.T) {
	p := newPool(t, &jsruntime.Options{Workers: 1, MaxMemory: 4 << 20, Timeout: 30 * time.Second})
	r := reducer(t, p, `function (keys, values) {
		if (values.length > 2) return 0;
		values.push(0);
		var a = []; while (1) a.push("abc".repeat(1000) + a.length);
	}`)
	_, err := reduceAll(r, raw("1", "2"))
	if !errors.Is(err, jsruntime.ErrMemoryLimit) {
		t.Fatalf("reduce: %v, want the memory limit", err)
	}
	if n := p.MemoryRetries(); n != 1 {
		t.Errorf("runs again: %d, want 1", n)
	}
}

// A call run again after the memory limit repeats its log(...) lines; they
// are written once, not once per run.
func TestMemoryLimitRunAgainLogsOnce(t *testing.T) {
	h := &recordHandler{}
	p := newPool(t, &jsruntime.Options{Workers: 1, MaxMemory: 4 << 20, Timeout: 30 * time.Second, Logger: slog.New(h)})
	pr := load(t, p, jsruntime.ViewSource{Name: "bomb", Map: `function (doc, meta) {
		log("start", meta.id);
		log("second", meta.id);
		var a = []; while (1) a.push("abc".repeat(1000) + a.length);
	}`})
	res, err := pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("a", `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(res[0][0].Err), "also when run again") {
		t.Fatalf("bomb: %v, want the memory limit after a run again", res[0][0].Err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var msgs []string
	for _, r := range h.records {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "msg" {
				msgs = append(msgs, a.Value.String())
			}
			return true
		})
	}
	if got := strings.Join(msgs, "|"); got != "start a|second a" {
		t.Errorf("log lines %q, want each once", got)
	}
}
