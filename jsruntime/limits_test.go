package jsruntime_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/jsruntime"
)

// numbersDoc is a document holding n pseudo-random numbers.
func numbersDoc(n int) jsruntime.Doc {
	b := make([]byte, 0, n*8)
	b = append(b, '[')
	x := uint32(1)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		x = x*1664525 + 1013904223
		b = strconv.AppendUint(b, uint64(x>>8), 10)
	}
	b = append(b, ']')
	return jsruntime.Doc{Value: b, Meta: jsruntime.Meta{ID: "numbers", Type: jsruntime.TypeJSON}}
}

// heapWatch samples the heap while a test runs and reports its peak.
func heapWatch(t *testing.T) (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	wg.Go(func() {
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// Memory bombs are interrupted by the watchdog, well before they hurt.
func TestMemoryBombs(t *testing.T) {
	for _, c := range []struct{ name, src string }{
		{"string doubling", `function (doc) { var s = "x"; while (1) s = s + s; }`},
		{"array pile", `function (doc) { var a = []; while (1) a.push(new Array(1e6).fill(1)); }`},
		{"string pile", `function (doc) { var a = []; for (var i = 0; ; i++) a.push({i: i, s: "abc".repeat(1000) + i}); }`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPool(t, &jsruntime.Options{Workers: 1, Timeout: 30 * time.Second})
			pr := load(t, p, jsruntime.ViewSource{Name: "v", Map: c.src}, jsruntime.ViewSource{Name: "w", Map: `function (doc) { emit(1, 2); }`})
			runtime.GC() // what earlier tests left is not the bomb's
			stop := heapWatch(t)
			start := time.Now()
			res, err := pr.Map(context.Background(), []jsruntime.Doc{jsonDoc("a", `{}`)})
			took := time.Since(start)
			peak := stop()
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(res[0][0].Err, jsruntime.ErrMemoryLimit) {
				t.Errorf("bomb: %s, want the memory limit", rows(res[0][0]))
			}
			if got := rows(res[0][1]); got != "1=2" {
				t.Errorf("other view: %s", got)
			}
			t.Logf("stopped after %v; heap peak %d MiB", took, peak>>20)
			if peak > 512<<20 {
				t.Errorf("heap peaked at %d MiB", peak>>20)
			}
		})
	}
}

// Sources over MaxSourceSize are refused before they are parsed: the
// oversized sources here do not parse (an unterminated string), so a parser
// that saw them would answer a syntax error instead.
func TestSourceTooLarge(t *testing.T) {
	big := "function (doc) { var s = '" + strings.Repeat("x", jsruntime.MaxSourceSize)
	for _, vs := range []jsruntime.ViewSource{{Name: "v", Map: big}, {Name: "v", Map: "function (doc) {}", Reduce: big}} {
		err := jsruntime.Compile([]jsruntime.ViewSource{vs})
		if !errors.Is(err, jsruntime.ErrSourceTooLarge) {
			t.Errorf("Compile: %v, want ErrSourceTooLarge", err)
		}
		var ce *jsruntime.CompileError
		if !errors.As(err, &ce) || ce.View != "v" {
			t.Errorf("Compile: %#v, want a *CompileError for view v", err)
		}
	}
	// Many functions under the limit, too much together.
	var many []jsruntime.ViewSource
	for i := range 5 {
		many = append(many, jsruntime.ViewSource{Name: strconv.Itoa(i), Map: big[:jsruntime.MaxSourceSize-1]})
	}
	if err := jsruntime.Compile(many); !errors.Is(err, jsruntime.ErrSourceTooLarge) {
		t.Errorf("Compile of 5 MiB in 5 functions: %v, want ErrSourceTooLarge", err)
	}
	// Just under the limit compiles.
	ok := "function (doc) { var s = '" + strings.Repeat("x", jsruntime.MaxSourceSize-100) + "'; }"
	if err := jsruntime.Compile([]jsruntime.ViewSource{{Name: "v", Map: ok}}); err != nil {
		t.Errorf("Compile of %d bytes: %v", len(ok), err)
	}
}

// A compilation that outlives MaxCompileTime fails with ErrCompileTimeout,
// without waiting for the parser to end.
func TestCompileTimeLimit(t *testing.T) {
	old := jsruntime.MaxCompileTime
	jsruntime.MaxCompileTime = time.Millisecond
	defer func() { jsruntime.MaxCompileTime = old }()
	src := "function (doc) {" + strings.Repeat("emit(doc.a + doc.b * 2, [1, 2, 3]);\n", 20000) + "}"
	// ErrCompileTimeout comes only from the timer's side of Compile, which
	// returns without waiting for the parser: the error is the proof.
	err := jsruntime.Compile([]jsruntime.ViewSource{{Name: "v", Map: src}})
	if !errors.Is(err, jsruntime.ErrCompileTimeout) {
		t.Errorf("Compile: %v, want ErrCompileTimeout", err)
	}
}

// log(...) is limited per design document: 4 documents × 200 lines of 100
// KB write LogBurst lines of at most MaxLogLine bytes (plus the mark), and
// the rest are counted as dropped; a second later (on the limit's clock)
// LogRate more lines get through.
func TestLogLimited(t *testing.T) {
	h := &recordHandler{}
	p := newPool(t, &jsruntime.Options{Logger: slog.New(h)})
	var clockMu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	jsruntime.SetLogClock(p, func() time.Time {
		clockMu.Lock()
		defer clockMu.Unlock()
		return now
	})
	pr := load(t, p, jsruntime.ViewSource{Name: "v", Map: `function (doc, meta) {
		var big = "é".repeat(50000);
		for (var i = 0; i < 200; i++) log(big, i);
		emit(meta.id, null);
	}`})
	var docs []jsruntime.Doc
	for _, id := range []string{"a", "b", "c", "d"} {
		docs = append(docs, jsonDoc(id, `{}`))
	}
	got := mapAll(t, pr, docs)
	if strings.Join(got, " ") != `"a"=null "b"=null "c"=null "d"=null` {
		t.Errorf("rows: %s", got)
	}
	lines := func() (n, total int) {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, r := range h.records {
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "msg" {
					total += len(a.Value.String())
					if n := len(a.Value.String()); n > jsruntime.MaxLogLine+20 {
						t.Errorf("a line of %d bytes", n)
					}
				}
				return true
			})
		}
		return len(h.records), total
	}
	n, total := lines()
	if n != jsruntime.LogBurst {
		t.Errorf("%d lines logged, want the burst of %d", n, jsruntime.LogBurst)
	}
	if d := pr.LogDropped(); d != int64(800-n) {
		t.Errorf("LogDropped() = %d, want %d", d, 800-n)
	}
	t.Logf("%d lines, %d bytes logged, %d dropped", n, total, pr.LogDropped())

	clockMu.Lock()
	now = now.Add(time.Second)
	clockMu.Unlock()
	mapAll(t, pr, docs[:1])
	if n2, _ := lines(); n2-n != jsruntime.LogRate {
		t.Errorf("a second later: %d more lines, want %d", n2-n, jsruntime.LogRate)
	}
}
