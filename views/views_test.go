package views_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/jsruntime"
	"github.com/mayflydb/mayfly/views"
)

// env is an engine with a "default" couchbase bucket and a views service.
type env struct {
	t    *testing.T
	dir  string
	clk  *engine.FakeClock
	eng  *engine.Engine
	svc  *views.Service
	opts views.Options
	sync bool // fsync on commit, engine and indexes (persistence tests)
}

func newEnv(t *testing.T, opts views.Options) *env {
	return newEnvSync(t, opts, false)
}

// newEnvSync is newEnv with fsync on commit (sync true), as a server without
// --no-sync runs.
func newEnvSync(t *testing.T, opts views.Options, sync bool) *env {
	e := &env{t: t, dir: t.TempDir(), clk: engine.NewFakeClock(t0), opts: opts, sync: sync}
	e.open()
	t.Cleanup(e.close)
	return e
}

func (e *env) open() {
	var err error
	if e.eng, err = engine.Open(e.dir, &engine.Options{Clock: e.clk, NumPartitions: 16, NoSync: !e.sync}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.eng.Bucket("default"); err != nil {
		if _, err := e.eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default")); err != nil {
			e.t.Fatal(err)
		}
	}
	opts := e.opts
	opts.NoSync = !e.sync
	if e.svc, err = views.New(context.Background(), e.eng, &opts); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) close() {
	if e.svc != nil {
		if err := e.svc.Check(context.Background()); err != nil {
			e.t.Errorf("views.Check: %v", err)
		}
		if err := e.eng.Check(context.Background()); err != nil {
			e.t.Errorf("engine.Check: %v", err)
		}
		e.svc.Close()
		e.eng.Close()
		e.svc = nil
	}
}

func (e *env) coll() *engine.Collection {
	b, _ := e.eng.Bucket("default")
	return b.DefaultCollection()
}

func (e *env) put(key, value string) {
	if _, err := e.coll().Upsert(context.Background(), key, []byte(value), nil); err != nil {
		e.t.Fatal(err)
	}
}

// query runs a view query and returns the answer with line breaks removed.
func (e *env) query(ddoc, view, params string) string {
	e.t.Helper()
	q, _ := url.ParseQuery(params)
	p, err := views.ParseParams(q, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	prep, err := e.svc.Prepare(context.Background(), "default", ddoc, view, p)
	if err != nil {
		e.t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := prep.Run(context.Background(), &buf); err != nil {
		e.t.Fatal(err)
	}
	return strings.NewReplacer("\r\n", "", "\n", "").Replace(buf.String())
}

func (e *env) mapped(ddoc string) int64 {
	inf, err := e.svc.Info(context.Background(), "default", ddoc)
	if err != nil {
		e.t.Fatal(err)
	}
	return inf.MappedSinceStart
}

// TestResumeAfterRestart: an index survives a restart and the indexer resumes
// from its sequence numbers: unchanged documents are not mapped again.
func TestResumeAfterRestart(t *testing.T) {
	t.Run("in memory", func(t *testing.T) { testResumeAfterRestart(t, views.Options{}) })
	// A paged index under a cache of one page: every read goes to its file.
	t.Run("paged", func(t *testing.T) { testResumeAfterRestart(t, views.Options{IndexCache: index.NewPageCache(1)}) })
}

func testResumeAfterRestart(t *testing.T, opts views.Options) {
	e := newEnvSync(t, opts, true)
	ctx := context.Background()
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"n":{"map":"function (doc, meta) { emit(doc.n, null); }","reduce":"_count"}}}`)); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		e.put(fmt.Sprint("k", i), fmt.Sprintf(`{"n":%d}`, i))
	}
	if got := e.query("d", "n", "stale=false"); got != `{"rows":[{"key":null,"value":100}]}` {
		t.Fatalf("before restart: %s", got)
	}
	if n := e.mapped("d"); n != 100 {
		t.Fatalf("mapped %d documents, want 100", n)
	}
	e.close()
	e.open()
	if got := e.query("d", "n", "stale=ok"); got != `{"rows":[{"key":null,"value":100}]}` {
		t.Fatalf("after restart, before any update: %s", got)
	}
	if got := e.query("d", "n", "stale=false"); got != `{"rows":[{"key":null,"value":100}]}` {
		t.Fatalf("after restart: %s", got)
	}
	if n := e.mapped("d"); n != 0 {
		t.Fatalf("after restart the indexer mapped %d unchanged documents again", n)
	}
	e.put("k5", `{"n":1000}`)
	e.put("k100", `{"n":100}`)
	if got := e.query("d", "n", "stale=false&startkey=999"); got != `{"rows":[{"key":null,"value":1}]}` {
		t.Fatalf("after an update: %s", got)
	}
	if n := e.mapped("d"); n != 2 {
		t.Fatalf("mapped %d documents after two changes, want 2", n)
	}
	// _info's documents_mapped describes the index: it survives restarts.
	inf, err := e.svc.Info(ctx, "default", "d")
	if err != nil || inf.Mapped != 102 || inf.Views["n"].TotalRows != 101 {
		t.Fatalf("_info before a restart: %v %+v", err, inf)
	}
	e.close()
	e.open()
	inf, err = e.svc.Info(ctx, "default", "d")
	if err != nil || inf.Mapped != 102 || inf.MappedSinceStart != 0 || inf.Views["n"].TotalRows != 101 {
		t.Errorf("_info after a restart: %v documents_mapped %d (since start %d), total_rows %d; want 102, 0, 101",
			err, inf.Mapped, inf.MappedSinceStart, inf.Views["n"].TotalRows)
	}
}

// TestReplaceDesignDoc: unchanged functions keep the index; changed ones
// rebuild it.
func TestReplaceDesignDoc(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	ddoc := `{"views":{"v":{"map":"function (doc, meta) { emit(doc.n, null); }"}},"note":"%s"}`
	e.svc.PutDesignDoc(ctx, "default", "d", []byte(fmt.Sprintf(ddoc, "one")))
	e.put("a", `{"n":1}`)
	e.put("b", `{"n":2}`)
	e.query("d", "v", "stale=false")
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(fmt.Sprintf(ddoc, "two"))); err != nil {
		t.Fatal(err)
	}
	e.query("d", "v", "stale=false")
	if n := e.mapped("d"); n != 2 {
		t.Fatalf("an unchanged design document re-mapped: %d", n)
	}
	got, _ := e.svc.DesignDoc(ctx, "default", "d")
	if !strings.Contains(string(got.Body), `"two"`) {
		t.Fatalf("stored body not replaced: %s", got.Body)
	}
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(-doc.n, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	if got := e.query("d", "v", "stale=false"); got != `{"total_rows":2,"rows":[{"id":"b","key":-2,"value":null},{"id":"a","key":-1,"value":null}]}` {
		t.Fatalf("after a changed map: %s", got)
	}
	if err := e.svc.DeleteDesignDoc(ctx, "default", "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Info(ctx, "default", "d"); err == nil {
		t.Fatal("deleted design document still answers")
	}
}

// TestRunawayMap: while(true){} in one view's map is cut off by the time
// limit; the other view and later documents are indexed all the same.
func TestRunawayMap(t *testing.T) {
	// A limit of 4s: a busy machine does not cut off the documents that do
	// not loop, and the watchdog's grace is its longest (1s), so that a
	// stalled process does not have the looping document abandoned whole,
	// its "fine" view failing too.
	e := newEnv(t, views.Options{JS: &jsruntime.Options{Timeout: 4 * time.Second}})
	ctx := context.Background()
	_, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{
		"loop":{"map":"function (doc, meta) { if (doc.loop) { while (true) {} } emit(meta.id, null); }"},
		"fine":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	e.put("a", `{"loop":false}`)
	e.put("b", `{"loop":true}`)
	e.put("c", `{}`)
	if got := e.query("d", "loop", "stale=false"); got != `{"total_rows":2,"rows":[{"id":"a","key":"a","value":null},{"id":"c","key":"c","value":null}]}` {
		t.Fatalf("loop view: %s", got)
	}
	if got := e.query("d", "fine", "stale=ok"); !strings.Contains(got, `"total_rows":3`) {
		t.Fatalf("fine view: %s", got)
	}
	inf, _ := e.svc.Info(ctx, "default", "d")
	if v := inf.Views["loop"]; v.MapErrors != 1 || len(v.RecentErrors) != 1 || v.RecentErrors[0].DocID != "b" {
		t.Fatalf("loop view errors: %+v", v)
	}
}

// TestUpdateAfter: without auto-update, stale=update_after answers from the
// old index and then brings it up to date; stale=ok never does.
func TestUpdateAfter(t *testing.T) {
	e := newEnv(t, views.Options{NoAutoUpdate: true})
	ctx := context.Background()
	e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(1, null); }","reduce":"_count"}}}`))
	e.put("a", `{}`)
	if got := e.query("d", "v", "stale=ok"); got != `{"rows":[]}` {
		t.Fatalf("stale=ok on a new index: %s", got)
	}
	if got := e.query("d", "v", "stale=update_after"); got != `{"rows":[]}` {
		t.Fatalf("stale=update_after answers before updating: %s", got)
	}
	deadline := time.Now().Add(hangDeadline) // polling the background update
	for e.query("d", "v", "stale=ok") != `{"rows":[{"key":null,"value":1}]}` {
		if time.Now().After(deadline) {
			t.Fatal("stale=update_after did not update the index")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestErrorAfterRowsStarted: a reduction that fails after rows have reached
// the client ends the answer with Couchbase's "errors" list, as valid JSON,
// its reason Couchbase's.
func TestErrorAfterRowsStarted(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"s":{"map":"function (doc, meta) { emit(meta.id, doc.v); }","reduce":"_sum"}}}`))
	for i := range 3000 {
		e.put(fmt.Sprintf("k%05d", i), `{"v":1}`)
	}
	e.put("zzz", `{"v":"oops"}`)
	q, _ := url.ParseQuery("stale=false&group=true")
	p, _ := views.ParseParams(q, nil)
	prep, err := e.svc.Prepare(ctx, "default", "d", "s", p)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = prep.Run(ctx, &buf)
	var se *views.StreamError
	if !errors.As(err, &se) {
		t.Fatalf("Run: %v, want a *StreamError", err)
	}
	var answer struct {
		Rows   []json.RawMessage
		Errors []struct{ From, Reason string }
	}
	if err := json.Unmarshal(buf.Bytes(), &answer); err != nil {
		t.Fatalf("the answer is not JSON: %v\n%.300s", err, buf.String())
	}
	want := "Reducer: Error building index for view `s`, reason: Value is not a number (key \"zzz\")"
	if len(answer.Rows) != 3000 || len(answer.Errors) != 1 || answer.Errors[0].From != "local" || answer.Errors[0].Reason != want {
		t.Fatalf("rows %d, errors %+v", len(answer.Rows), answer.Errors)
	}
}

// TestQueriesDuringWarmup restarts a bucket whose index is behind its store,
// with the bucket's warm-up held: stale=ok answers from the index at once,
// stale=false waits for the warm-up (rather than answering what the index
// held, or an error), and once it is done answers every document.
func TestQueriesDuringWarmup(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"n":{"map":"function (doc, meta) { emit(doc.n, null); }","reduce":"_count"}}}`)); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		e.put(fmt.Sprint("k", i), fmt.Sprintf(`{"n":%d}`, i))
	}
	if got := e.query("d", "n", "stale=false"); got != `{"rows":[{"key":null,"value":100}]}` {
		t.Fatalf("before restart: %s", got)
	}
	e.svc.Close() // the index stops at 100 documents; 50 more reach the store
	for i := 100; i < 150; i++ {
		e.put(fmt.Sprint("k", i), fmt.Sprintf(`{"n":%d}`, i))
	}
	e.svc = nil
	e.eng.Close()

	gate, at := make(chan struct{}), make(chan struct{})
	var hold, release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	t.Cleanup(open)
	var err error
	e.eng, err = engine.Open(e.dir, &engine.Options{Clock: e.clk, NumPartitions: 16, NoSync: true, BackgroundWarmup: true,
		WarmupHook: func(string, int64) { hold.Do(func() { close(at); <-gate }) }})
	if err != nil {
		t.Fatal(err)
	}
	if e.svc, err = views.New(ctx, e.eng, &views.Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	<-at
	if got := e.query("d", "n", "stale=ok"); got != `{"rows":[{"key":null,"value":100}]}` {
		t.Fatalf("stale=ok during the warm-up: %s, want the index's 100", got)
	}
	q, _ := url.ParseQuery("stale=false")
	p, err := views.ParseParams(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	var buf bytes.Buffer
	prep, err := e.svc.Prepare(short, "default", "d", "n", p)
	if err == nil {
		err = prep.Run(short, &buf)
	}
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stale=false during a held warm-up: %v %q, want it to wait for the warm-up", err, buf.String())
	}
	open()
	if got := e.query("d", "n", "stale=false"); got != `{"rows":[{"key":null,"value":150}]}` {
		t.Fatalf("stale=false after the warm-up: %s, want 150", got)
	}
}
