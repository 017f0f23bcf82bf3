package views_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/jsruntime"
	"github.com/mayflydb/mayfly/views"
)

// A design document whose map spins in one bucket leaves the other
// workers to other design documents (each takes at most its fair share of
// the pool): a stale=false query of another bucket's design document
// answers while the spinning call still runs, instead of waiting for its
// time limit. (BENCHMARKS.md has the speed figures: about 2× an idle
// machine's time; a test asserts only the order.)
func TestHostileDesignDocDoesNotSlowOthers(t *testing.T) {
	logs := newJSLog()
	e := newEnv(t, views.Options{JS: &jsruntime.Options{Workers: 2, Timeout: stuckTimeout, Logger: slog.New(logs)}})
	ctx := context.Background()
	if _, err := e.eng.CreateBucket(ctx, engine.DefaultBucketSettings("other")); err != nil {
		t.Fatal(err)
	}
	ob, _ := e.eng.Bucket("other")
	loadInto(t, ob.DefaultCollection(), 200)
	for i := range 10 {
		e.put(fmt.Sprintf("spin%d", i), `{}`)
	}
	if _, err := e.svc.PutDesignDoc(ctx, "default", "hostile", []byte(`{"views":{"v":{"map":"function (doc, meta) { log('spinning'); while (true) {} }"}}}`)); err != nil {
		t.Fatal(err)
	}
	logs.wait(t, "spinning") // the hostile indexer holds a worker
	healthy := `{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`
	if _, err := e.svc.PutDesignDoc(ctx, "other", "healthy", []byte(healthy)); err != nil {
		t.Fatal(err)
	}
	// Without the fair share the query would wait for the spinning call's
	// time limit (stuckTimeout), far past hangDeadline.
	returns(t, "a stale=false build beside a spinning design document", func() error {
		got, err := queryRows(ctx, e.svc, "other", "healthy", "v", "stale=false&limit=1")
		if err == nil && !strings.Contains(got, `"total_rows":200`) {
			err = fmt.Errorf("answer %.100s", got)
		}
		return err
	})
	inf, err := e.svc.Info(ctx, "default", "hostile")
	if err != nil {
		t.Fatal(err)
	}
	if n := inf.Views["v"].MapErrors; n != 0 {
		t.Fatalf("the spinning call ended (%d map errors) before the other query answered", n)
	}
	// Deleting it interrupts it (and Check at the end would wait for it).
	returns(t, "deleting the spinning design document", func() error {
		return e.svc.DeleteDesignDoc(ctx, "default", "hostile")
	})
}

// Function sources over jsruntime.MaxSourceSize are refused with a reason.
func TestDesignDocSourceTooLarge(t *testing.T) {
	e := newEnv(t, views.Options{})
	big := `function (doc) { var s = '` + strings.Repeat("x", jsruntime.MaxSourceSize) + `'; }`
	_, err := e.svc.PutDesignDoc(context.Background(), "default", "big", []byte(`{"views":{"v":{"map":"`+big+`"}}}`))
	var de *views.DesignDocError
	if !errors.As(err, &de) || !errors.Is(err, jsruntime.ErrSourceTooLarge) || !strings.Contains(de.Reason, "more than the limit") {
		t.Errorf("PutDesignDoc: %v, want a *DesignDocError for the size", err)
	}
}

// log(...) lines over the rate limit are counted in _info.
func TestLogDroppedInInfo(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function (doc, meta) { for (var i = 0; i < 200; i++) log(meta.id, i); emit(meta.id, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	e.put("a", `{}`)
	e.put("b", `{}`)
	if got := e.query("d", "v", "stale=false"); !strings.Contains(got, `"total_rows":2`) {
		t.Fatalf("query: %s", got)
	}
	inf, err := e.svc.Info(ctx, "default", "d")
	if err != nil {
		t.Fatal(err)
	}
	if inf.LogDropped < 400-jsruntime.LogBurst-2*jsruntime.LogRate || inf.LogDropped > 400-jsruntime.LogBurst {
		t.Errorf("log_dropped = %d, want about %d", inf.LogDropped, 400-jsruntime.LogBurst)
	}
}

// A stored design document named in SkipDesignDocs is not loaded; it is
// reported by LoadErrors and can be deleted.
func TestSkipDesignDocs(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	for _, name := range []string{"good", "bad", "bad2"} {
		if _, err := e.svc.PutDesignDoc(ctx, "default", name, []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`)); err != nil {
			t.Fatal(err)
		}
	}
	e.put("a", `{}`)
	e.close()
	e.opts.SkipDesignDocs = []string{"default/_design/bad", "default/bad2", "other/good"}
	e.open()
	if got := e.query("good", "v", "stale=false"); got != `{"total_rows":1,"rows":[{"id":"a","key":"a","value":null}]}` {
		t.Fatalf("good: %s", got)
	}
	loadErrs, err := e.svc.LoadErrors(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bad", "bad2"} {
		if !errors.Is(loadErrs[views.DesignDocPrefix+name], views.ErrSkipped) {
			t.Errorf("LoadErrors[%s] = %v, want ErrSkipped", name, loadErrs[views.DesignDocPrefix+name])
		}
		if _, err := e.svc.DesignDoc(ctx, "default", name); !errors.Is(err, views.ErrLoadFailed) || !errors.Is(err, views.ErrSkipped) {
			t.Errorf("DesignDoc(%s): %v", name, err)
		}
		// Its stored source can still be read, to be fixed.
		if d, err := e.svc.StoredDesignDoc(ctx, "default", name); err != nil || string(d.Body) != `{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}` || d.Version() != 1 {
			t.Errorf("StoredDesignDoc(%s): %+v, %v", name, d, err)
		}
	}
	if err := e.svc.DeleteDesignDoc(ctx, "default", "bad"); err != nil {
		t.Errorf("DeleteDesignDoc: %v", err)
	}
	if _, err := e.svc.DesignDoc(ctx, "default", "bad"); !errors.Is(err, views.ErrNotFound) {
		t.Errorf("DesignDoc after delete: %v", err)
	}
	if _, err := e.svc.StoredDesignDoc(ctx, "default", "bad"); !errors.Is(err, views.ErrNotFound) {
		t.Errorf("StoredDesignDoc after delete: %v", err)
	}
	// Replacing a skipped one loads it.
	if _, err := e.svc.PutDesignDoc(ctx, "default", "bad2", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(1, null); }"}}}`)); err != nil {
		t.Errorf("PutDesignDoc: %v", err)
	}
	if got := e.query("bad2", "v", "stale=false"); got != `{"total_rows":1,"rows":[{"id":"a","key":1,"value":null}]}` {
		t.Errorf("bad2 replaced: %s", got)
	}
}

// A document that emits more than 65535 rows into a view has no rows in it;
// the error is counted in _info with Couchbase's text, and logged.
func TestTooManyEmitsIsAMapError(t *testing.T) {
	var logged bytes.Buffer
	var mu sync.Mutex
	e := newEnv(t, views.Options{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))})
	ctx := context.Background()
	e.put("doc1", `{"n":70000}`)
	e.put("doc2", `{"n":2}`)
	if _, err := e.svc.PutDesignDoc(ctx, "default", "many", []byte(`{"views":{"v":{"map":"function (doc) { for (var i = 0; i < doc.n; i++) emit(i, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	if got := e.query("many", "v", "stale=false"); !strings.Contains(got, `"total_rows":2,`) {
		t.Fatalf("query: %.200s", got)
	}
	inf, err := e.svc.Info(ctx, "default", "many")
	if err != nil {
		t.Fatal(err)
	}
	vi := inf.Views["v"]
	want := "Too many (70000) keys emitted for document `doc1` (maximum allowed is 65535"
	if vi.MapErrors != 1 || len(vi.RecentErrors) != 1 || vi.RecentErrors[0].DocID != "doc1" || !strings.Contains(vi.RecentErrors[0].Reason, want) {
		t.Errorf("_info: %+v", vi)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), "Too many (70000) keys emitted") {
		t.Errorf("not logged: %q", logged.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// runQuery runs a query of view and returns its error.
func (e *env) runQuery(t *testing.T, ddoc, view, query string) error {
	t.Helper()
	ctx := context.Background()
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	p, err := views.ParseParams(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	prep, err := e.svc.Prepare(ctx, "default", ddoc, view, p)
	if err != nil {
		t.Fatal(err)
	}
	return prep.Run(ctx, io.Discard)
}

// A document whose value _stats cannot take (here: no score, so null) fails
// the reduce queries over it with Couchbase's error and reason (its view
// engine's "Value is not a number (key ...)"), counted in _info with the
// document and logged. Before the view has ever reduced, the reason says
// "building", as Couchbase's initial build does; a bad value that comes
// after a good reduce says "updating".
func TestBuiltinReduceErrorIsRecorded(t *testing.T) {
	for _, reduce := range []string{"_sum", "_stats"} {
		t.Run(reduce, func(t *testing.T) {
			var logged bytes.Buffer
			var mu sync.Mutex
			e := newEnv(t, views.Options{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))})
			ctx := context.Background()
			e.put("g1", `{"player":"ann","score":3}`)
			e.put("g2", `{"player":"bo"}`)
			if _, err := e.svc.PutDesignDoc(ctx, "default", "game", []byte(`{"views":{"score":{"map":"function (doc) { emit(doc.player, doc.score); }","reduce":"`+reduce+`"}}}`)); err != nil {
				t.Fatal(err)
			}
			err := e.runQuery(t, "game", "score", "stale=false&group=true")
			var re *views.ReduceError
			want := "Reducer: Error building index for view `score`, reason: Value is not a number (key \"bo\")"
			if !errors.As(err, &re) || re.Code != "error" || re.Reason != want {
				t.Fatalf("got %v, want error %q", err, want)
			}
			inf, err := e.svc.Info(ctx, "default", "game")
			if err != nil {
				t.Fatal(err)
			}
			vi := inf.Views["score"]
			if vi.ReduceErrors != 1 || len(vi.RecentReduceErrors) != 1 || vi.RecentReduceErrors[0].Reason != want || vi.RecentReduceErrors[0].DocID != "g2" {
				t.Errorf("_info: %+v", vi)
			}
			mu.Lock()
			if !strings.Contains(logged.String(), "Value is not a number") {
				t.Errorf("not logged: %q", logged.String())
			}
			mu.Unlock()
			// Once the document has a score, the view reduces again.
			e.put("g2", `{"player":"bo","score":5}`)
			got := e.query("game", "score", "stale=false&group=true")
			if wantRow := map[string]string{"_sum": `{"key":"bo","value":5}`, "_stats": `{"key":"bo","value":{"sum":5,"count":1,"min":5,"max":5,"sumsqr":25}}`}[reduce]; !strings.Contains(got, wantRow) {
				t.Errorf("after the fix: %s", got)
			}
			// A bad value in an update of a view that has reduced is Couchbase's
			// "Error updating index", with the key of the row at fault.
			e.put("g3", `{"player":["cy",1],"score":"ten"}`)
			err = e.runQuery(t, "game", "score", "stale=false")
			want = "Reducer: Error updating index for view `score`, reason: Value is not a number (key [\"cy\",1])"
			if !errors.As(err, &re) || re.Code != "error" || re.Reason != want {
				t.Fatalf("after an update: got %v, want error %q", err, want)
			}
		})
	}
}

// A JavaScript reduce whose reduction, or re-reduction, is over 64 KB fails
// the query with Couchbase's error and reason, "reduction too large".
func TestReductionTooLarge(t *testing.T) {
	for name, cond := range map[string]string{"reduce": "rereduce", "rereduce": "!rereduce"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, views.Options{})
			ctx := context.Background()
			for i := range 300 {
				e.put(fmt.Sprintf("d%03d", i), `{}`)
			}
			red := `function (keys, values, rereduce) { if (` + cond + `) return 'foo'; var r = 'qwerty'; while (r.length < 65536) { r = r.concat(r); } return r; }`
			ddoc, _ := json.Marshal(map[string]any{"views": map[string]any{"v": map[string]string{"map": "function (doc, meta) { emit(meta.id, 'foobar'); }", "reduce": red}}})
			if _, err := e.svc.PutDesignDoc(ctx, "default", "big", ddoc); err != nil {
				t.Fatal(err)
			}
			err := e.runQuery(t, "big", "v", "stale=false")
			var re *views.ReduceError
			if !errors.As(err, &re) || re.Code != "error" || re.Reason != "reduction too large" {
				t.Fatalf("got %v, want error \"reduction too large\"", err)
			}
		})
	}
}

// A map function stopped by the memory limit is run again before its
// document is left out of the view: _info counts the runs again, and the
// view's error says the run again failed too.
func TestMemoryRetriesInInfo(t *testing.T) {
	e := newEnv(t, views.Options{JS: &jsruntime.Options{MaxMemory: 4 << 20}})
	ctx := context.Background()
	bomb := `function (doc, meta) { if (doc.bomb) { var a = []; while (1) a.push('abc'.repeat(1000) + a.length); } emit(meta.id, null); }`
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"`+bomb+`"}}}`)); err != nil {
		t.Fatal(err)
	}
	e.put("a", `{}`)
	e.put("b", `{"bomb": true}`)
	if got := e.query("d", "v", "stale=false"); !strings.Contains(got, `"total_rows":1`) {
		t.Fatalf("query: %s", got)
	}
	inf, err := e.svc.Info(ctx, "default", "d")
	if err != nil {
		t.Fatal(err)
	}
	if inf.MemoryRetries != 1 {
		t.Errorf("memory_retries = %d, want 1", inf.MemoryRetries)
	}
	vi := inf.Views["v"]
	if vi.MapErrors != 1 || len(vi.RecentErrors) != 1 || vi.RecentErrors[0].DocID != "b" ||
		!strings.Contains(vi.RecentErrors[0].Reason, "memory limit exceeded, also when run again") {
		t.Errorf("map errors %d, %+v", vi.MapErrors, vi.RecentErrors)
	}
}
