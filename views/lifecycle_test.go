package views_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/jsruntime"
	"github.com/mayflydb/mayfly/views"
)

// loadDocs writes n small JSON documents to the env's default bucket.
func (e *env) loadDocs(n int) {
	e.t.Helper()
	loadInto(e.t, e.coll(), n)
}

// loadInto writes n small JSON documents with 16 writers, so that they
// share group commits.
func loadInto(t *testing.T, coll *engine.Collection, n int) {
	t.Helper()
	ctx := context.Background()
	const writers = 16
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := w; i < n; i += writers {
				if _, err := coll.Upsert(ctx, fmt.Sprintf("k%06d", i), []byte(fmt.Sprintf(`{"n":%d}`, i)), nil); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// hangDeadline bounds a wait that only a hang would reach: generous, so that
// a busy machine (a shared 2-core CI runner, -race) never reaches it. Tests
// assert order and outcome, never speed (BENCHMARKS.md has the figures).
const hangDeadline = 2 * time.Minute

// stuckTimeout is the JavaScript time limit of the tests that spin a map or
// reduce function: far past hangDeadline, so that a call that ends before
// the deadline was interrupted, not timed out.
const stuckTimeout = 10 * time.Minute

// stuckMapDDoc maps every document quickly except the one whose n is
// stuckN, where it logs msg and then spins until interrupted (or
// stuckTimeout). A build over it never finishes by itself within
// hangDeadline.
func stuckMapDDoc(msg string) []byte {
	return []byte(fmt.Sprintf(`{"views":{"v":{"map":"function (doc, meta) { if (doc.n === %d) { log('%s'); while (true) {} } emit(doc.n, null); }","reduce":"_count"}}}`, stuckN, msg))
}

// stuckN is the document stuckMapDDoc spins on.
const stuckN = 50

// jsLog is a slog handler for jsruntime.Options.Logger: it closes a channel
// when a JavaScript log(...) line first reads a given message, so that a
// test can wait until a function reached a point (instead of sleeping).
type jsLog struct {
	mu   sync.Mutex
	seen map[string]chan struct{}
	hold map[string]chan struct{} // log(msg) waits until it is closed
}

func newJSLog() *jsLog {
	return &jsLog{seen: map[string]chan struct{}{}, hold: map[string]chan struct{}{}}
}

// holdOn makes a log(msg) line wait, in the JavaScript call, until release
// is called (release may be called more than once).
func (l *jsLog) holdOn(msg string) (release func()) {
	c := make(chan struct{})
	l.mu.Lock()
	l.hold[msg] = c
	l.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(c) }) }
}

func (l *jsLog) ch(msg string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.seen[msg]
	if c == nil {
		c = make(chan struct{})
		l.seen[msg] = c
	}
	return c
}

// wait fails the test if no log(msg) line comes within hangDeadline.
func (l *jsLog) wait(t *testing.T, msg string) {
	t.Helper()
	select {
	case <-l.ch(msg):
	case <-time.After(hangDeadline):
		t.Fatalf("log(%q) not seen in %v", msg, hangDeadline)
	}
}

func (l *jsLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *jsLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *jsLog) WithGroup(string) slog.Handler            { return l }
func (l *jsLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "msg" {
			return true
		}
		c := l.ch(a.Value.String())
		l.mu.Lock()
		select {
		case <-c:
		default:
			close(c)
		}
		hold := l.hold[a.Value.String()]
		l.mu.Unlock()
		if hold != nil {
			<-hold
		}
		return false
	})
	return nil
}

// returns runs f and fails the test if it errs or does not return within
// hangDeadline: it catches a hang, never slowness.
func returns(t *testing.T, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(hangDeadline):
		t.Fatalf("%s did not return in %v", what, hangDeadline)
	}
}

// TestStopWhileBuilding: replacing, deleting or closing a design document
// whose index is still building returns without waiting for the build. The
// build is stuck in a map call that would run for stuckTimeout: the change
// can return only by interrupting it.
func TestStopWhileBuilding(t *testing.T) {
	for _, op := range []string{"delete", "replace", "close"} {
		t.Run(op, func(t *testing.T) {
			logs := newJSLog()
			e := newEnv(t, views.Options{JS: &jsruntime.Options{Timeout: stuckTimeout, Logger: slog.New(logs)}})
			e.loadDocs(2 * stuckN)
			ctx := context.Background()
			if _, err := e.svc.PutDesignDoc(ctx, "default", "d", stuckMapDDoc("first")); err != nil {
				t.Fatal(err)
			}
			logs.wait(t, "first") // the indexer is inside the stuck map call
			returns(t, op, func() error {
				switch op {
				case "delete":
					return e.svc.DeleteDesignDoc(ctx, "default", "d")
				case "replace":
					_, err := e.svc.PutDesignDoc(ctx, "default", "d", stuckMapDDoc("second"))
					return err
				default:
					return e.svc.Close()
				}
			})
			if op == "replace" {
				// And the new index can be deleted while it builds too.
				logs.wait(t, "second")
				returns(t, "delete after replace", func() error {
					return e.svc.DeleteDesignDoc(ctx, "default", "d")
				})
			}
			if op != "close" {
				if _, err := e.svc.Info(ctx, "default", "d"); !errors.Is(err, views.ErrNotFound) {
					t.Fatalf("Info after the delete: %v, want ErrNotFound", err)
				}
			}
		})
	}
}

// TestSlowBucketDoesNotBlockOthers: while one bucket's stale=false
// catch-up is stuck, and while its design document is deleted, another
// bucket's design documents answer and change without waiting.
func TestSlowBucketDoesNotBlockOthers(t *testing.T) {
	logs := newJSLog()
	e := newEnv(t, views.Options{NoAutoUpdate: true, JS: &jsruntime.Options{Timeout: stuckTimeout, Logger: slog.New(logs)}})
	ctx := context.Background()
	if _, err := e.eng.CreateBucket(ctx, engine.DefaultBucketSettings("other")); err != nil {
		t.Fatal(err)
	}
	e.loadDocs(2 * stuckN)
	if _, err := e.svc.PutDesignDoc(ctx, "default", "slow", stuckMapDDoc("stuck")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.PutDesignDoc(ctx, "other", "fast", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	queryErr := make(chan error, 1)
	go func() { // a stale=false catch-up that cannot finish by itself
		_, err := queryRows(ctx, e.svc, "default", "slow", "v", "stale=false")
		queryErr <- err
	}()
	logs.wait(t, "stuck")
	others := func(when string, n int) {
		t.Helper()
		returns(t, "query of another bucket "+when, func() error {
			_, err := queryRows(ctx, e.svc, "other", "fast", "v", "stale=ok")
			return err
		})
		returns(t, "design document change in another bucket "+when, func() error {
			_, err := e.svc.PutDesignDoc(ctx, "other", fmt.Sprint("fast", n), []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(1, null); }"}}}`))
			return err
		})
	}
	others("during the stuck catch-up", 2)
	select {
	case err := <-queryErr:
		t.Fatalf("the stuck stale=false query returned (%v) before its design document was deleted", err)
	default:
	}
	deleteErr := make(chan error, 1)
	go func() { deleteErr <- e.svc.DeleteDesignDoc(ctx, "default", "slow") }()
	others("during the delete", 3)
	returns(t, "the delete", func() error { return <-deleteErr })
	returns(t, "the stuck query", func() error {
		if err := <-queryErr; !errors.Is(err, views.ErrClosed) && !errors.Is(err, views.ErrNotFound) {
			return fmt.Errorf("ended with %v, want ErrClosed (its design document was deleted)", err)
		}
		return nil
	})
}

// runQuery runs a view query and returns its answer.
func queryRows(ctx context.Context, svc *views.Service, bucket, ddoc, view, params string) (string, error) {
	q, _ := url.ParseQuery(params)
	p, err := views.ParseParams(q, nil)
	if err != nil {
		return "", err
	}
	prep, err := svc.Prepare(ctx, bucket, ddoc, view, p)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	err = prep.Run(ctx, &buf)
	return buf.String(), err
}

// TestReplaceWhileQuerying: design documents replaced (same and changed
// functions) and deleted while other goroutines query them and read _info.
// Run with -race.
func TestReplaceWhileQuerying(t *testing.T) {
	e := newEnv(t, views.Options{BatchSize: 50})
	ctx := context.Background()
	e.loadDocs(300)
	ddoc := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"views":{"v":{"map":"function (doc, meta) { emit(doc.n %% %d, null); }","reduce":"_count"}},"note":%d}`, 2+i/2, i))
	}
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", ddoc(0)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// A query that spans a replacement is answered from the new index; one
	// that spans a deletion finds no design document. Never ErrClosed.
	tolerable := func(err error) bool {
		return err == nil || errors.Is(err, views.ErrNotFound)
	}
	var mu sync.Mutex
	var failures []error
	fail := func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
	}
	for _, params := range []string{"stale=false", "stale=ok", "stale=ok&reduce=false&limit=5", "info", "ddoc"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				switch params {
				case "info":
					var inf *views.Info
					if inf, err = e.svc.Info(ctx, "default", "d"); err == nil && inf.Name != "_design/d" {
						err = fmt.Errorf("info names %q", inf.Name)
					}
				case "ddoc":
					_, err = e.svc.DesignDoc(ctx, "default", "d")
				default:
					_, err = queryRows(ctx, e.svc, "default", "d", "v", params)
				}
				if !tolerable(err) {
					fail(fmt.Errorf("%s: %w", params, err))
				}
			}
		}()
	}
	for i := 1; i <= 30; i++ {
		if i%7 == 0 {
			if err := e.svc.DeleteDesignDoc(ctx, "default", "d"); err != nil {
				t.Error(err)
			}
		}
		if _, err := e.svc.PutDesignDoc(ctx, "default", "d", ddoc(i)); err != nil {
			t.Error(err)
		}
		e.put(fmt.Sprint("x", i), fmt.Sprintf(`{"n":%d}`, i))
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	for _, err := range failures {
		t.Error(err)
	}
}

// TestLongDesignDocName: a design document name of 180 bytes (longer than a
// file name may be once escaped) works, and survives a restart.
func TestLongDesignDocName(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	name := strings.Repeat("é", 90)
	if _, err := e.svc.PutDesignDoc(ctx, "default", name, []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	e.put("a", `{}`)
	want := `{"total_rows":1,"rows":[{"id":"a","key":"a","value":null}]}`
	if got := e.query(name, "v", "stale=false"); got != want {
		t.Fatalf("query: %s", got)
	}
	e.close()
	e.open()
	if got := e.query(name, "v", "stale=ok"); got != want {
		t.Fatalf("after a restart: %s", got)
	}
}

// TestBrokenStoredDesignDocs: stored design documents that do not parse,
// compile or open are reported and skipped; the others work, and the broken
// ones can be deleted.
func TestBrokenStoredDesignDocs(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	if _, err := e.svc.PutDesignDoc(ctx, "default", "good", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.PutDesignDoc(ctx, "default", "noopen", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(1, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	e.put("a", `{}`)
	e.close()

	eng, err := engine.Open(e.dir, &engine.Options{Clock: e.clk, NumPartitions: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := eng.Bucket("default")
	if err := b.PutSystemDoc(ctx, "_design/notjson", []byte(`{"views":`)); err != nil {
		t.Fatal(err)
	}
	if err := b.PutSystemDoc(ctx, "_design/nocompile", []byte(`{"views":{"v":{"map":"function (doc { emit("}}}`)); err != nil {
		t.Fatal(err)
	}
	// The index file of "noopen" is now a directory: it cannot be opened.
	p := views.IndexPath(b, "_design/noopen")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	eng.Close()

	e.open()
	if got := e.query("good", "v", "stale=false"); got != `{"total_rows":1,"rows":[{"id":"a","key":"a","value":null}]}` {
		t.Fatalf("good design document: %s", got)
	}
	loadErrs, err := e.svc.LoadErrors(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"notjson", "nocompile", "noopen"} {
		if loadErrs[views.DesignDocPrefix+name] == nil {
			t.Errorf("no load error reported for %s: %v", name, loadErrs)
		}
		if _, err := e.svc.DesignDoc(ctx, "default", name); !errors.Is(err, views.ErrLoadFailed) {
			t.Errorf("DesignDoc(%s): %v, want ErrLoadFailed", name, err)
		}
		if err := e.svc.DeleteDesignDoc(ctx, "default", name); err != nil {
			t.Errorf("DeleteDesignDoc(%s): %v", name, err)
		}
		if _, err := e.svc.DesignDoc(ctx, "default", name); !errors.Is(err, views.ErrNotFound) {
			t.Errorf("DesignDoc(%s) after delete: %v, want ErrNotFound", name, err)
		}
	}
	b, _ = e.eng.Bucket("default")
	if keys := b.SystemDocKeys(views.DesignDocPrefix); len(keys) != 1 || keys[0] != "_design/good" {
		t.Fatalf("stored design documents after the deletes: %v", keys)
	}
	e.close()
	e.open()
	if loadErrs, _ := e.svc.LoadErrors(ctx, "default"); len(loadErrs) != 0 {
		t.Fatalf("load errors after a restart: %v", loadErrs)
	}
}

// TestDeleteBucket: deleting a bucket closes its indexes, removes their
// files and forgets them; a new bucket of the same name starts empty.
// (TestMain checks that no goroutine is left.)
func TestDeleteBucket(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	b, err := e.eng.CreateBucket(ctx, engine.DefaultBucketSettings("b2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.PutDesignDoc(ctx, "b2", "d", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	loadInto(t, b.DefaultCollection(), 100)
	if got, err := queryRows(ctx, e.svc, "b2", "d", "v", "stale=false&limit=0"); err != nil || !strings.Contains(got, `"total_rows":100`) {
		t.Fatalf("query: %s %v", got, err)
	}
	path := views.IndexPath(b, "_design/d")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if n := views.HeldBuckets(e.svc); n != 2 {
		t.Fatalf("the service holds %d buckets, want 2", n)
	}
	if err := e.eng.DeleteBucket(ctx, "b2"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("index file after the bucket was deleted: %v", err)
	}
	if n := views.HeldBuckets(e.svc); n != 1 {
		t.Fatalf("the service holds %d buckets after the delete, want 1", n)
	}
	if _, err := e.svc.DesignDocs(ctx, "b2"); err == nil {
		t.Fatal("design documents of a deleted bucket")
	}
	if _, err := e.eng.CreateBucket(ctx, engine.DefaultBucketSettings("b2")); err != nil {
		t.Fatal(err)
	}
	if ds, err := e.svc.DesignDocs(ctx, "b2"); err != nil || len(ds) != 0 {
		t.Fatalf("design documents of a new bucket of the same name: %v %v", ds, err)
	}
	if _, err := e.svc.Info(ctx, "b2", "d"); !errors.Is(err, views.ErrNotFound) {
		t.Fatalf("Info of the old design document: %v", err)
	}
}

// TestCloseThenDetach: after Close, every call is a no-op or ErrClosed, and
// the engine can still detach (close) and delete buckets.
func TestCloseThenDetach(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`))
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.PutDesignDoc(ctx, "default", "x", []byte(`{}`)); !errors.Is(err, views.ErrClosed) {
		t.Fatalf("PutDesignDoc after Close: %v", err)
	}
	if _, err := e.eng.CreateBucket(ctx, engine.DefaultBucketSettings("late")); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.DeleteBucket(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.DeleteBucket(ctx, "default"); err != nil {
		t.Fatal(err)
	}
}

// TestConsumerRegistration: an indexer registers itself, durably, as a
// change-feed consumer; deleting its design document drops it.
func TestConsumerRegistration(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`))
	b, _ := e.eng.Bucket("default")
	if got := b.Consumers(); len(got) != 1 || got[0] != "views:_design/d" {
		t.Fatalf("consumers: %v", got)
	}
	if err := e.svc.DeleteDesignDoc(ctx, "default", "d"); err != nil {
		t.Fatal(err)
	}
	if got := b.Consumers(); len(got) != 0 {
		t.Fatalf("consumers after the delete: %v", got)
	}
}

// TestRollback: an index whose position is not in the bucket's history (the
// bucket was recreated, or restored from a backup) is discarded and rebuilt,
// never served.
func TestRollback(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		e.put(fmt.Sprint("old", i), `{}`)
	}
	if got := e.query("d", "v", "stale=false&limit=0"); !strings.Contains(got, `"total_rows":100`) {
		t.Fatalf("before: %s", got)
	}
	b, _ := e.eng.Bucket("default")
	path := views.IndexPath(b, "_design/d")
	ddocBody, _ := b.SystemDoc("_design/d")
	e.close()
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	// The bucket's data is replaced by other data (as a restore would), and
	// the old index file put back.
	eng, err := engine.Open(e.dir, &engine.Options{Clock: e.clk, NumPartitions: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.DeleteBucket(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	b, err = eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	b.PutSystemDoc(ctx, "_design/d", ddocBody)
	loadInto(t, b.DefaultCollection(), 3)
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	eng.Close()

	e.opts.NoAutoUpdate = true // what stale=ok answers is the index as opened
	e.open()
	if got := e.query("d", "v", "stale=ok&limit=0"); strings.Contains(got, `"total_rows":100`) {
		t.Fatalf("rows of the old history served: %s", got)
	}
	if got := e.query("d", "v", "stale=false&limit=0"); !strings.Contains(got, `"total_rows":3`) {
		t.Fatalf("after the rebuild: %s", got)
	}
	inf, err := e.svc.Info(ctx, "default", "d")
	if err != nil {
		t.Fatal(err)
	}
	if inf.Rollbacks != 1 {
		t.Fatalf("rollbacks %d, want 1", inf.Rollbacks)
	}
}

// TestInvalidOptions: a negative setting is an error, not the default.
func TestInvalidOptions(t *testing.T) {
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := views.New(context.Background(), eng, &views.Options{BatchSize: -1}); !errors.Is(err, views.ErrInvalidOptions) {
		t.Fatalf("BatchSize -1: %v", err)
	}
	if _, err := views.New(context.Background(), eng, &views.Options{BatchBytes: -1}); !errors.Is(err, views.ErrInvalidOptions) {
		t.Fatalf("BatchBytes -1: %v", err)
	}
}

// TestLegacyIndexFileRenamed: an index file named the old way (the escaped
// design document ID) is renamed and kept, not rebuilt.
func TestLegacyIndexFileRenamed(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		e.put(fmt.Sprint("k", i), `{}`)
	}
	e.query("d", "v", "stale=false")
	b, _ := e.eng.Bucket("default")
	path := views.IndexPath(b, "_design/d")
	legacy := filepath.Join(filepath.Dir(path), url.PathEscape("_design/d")+".idx")
	e.close()
	if err := os.Rename(path, legacy); err != nil {
		t.Fatal(err)
	}
	e.open()
	if got := e.query("d", "v", "stale=ok&limit=0"); !strings.Contains(got, `"total_rows":10`) {
		t.Fatalf("after the rename: %s", got)
	}
	if n := e.mapped("d"); n != 0 {
		t.Fatalf("the index was rebuilt: %d documents mapped", n)
	}
	if _, err := os.Stat(legacy); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old file still there: %v", err)
	}
}

// TestQueryContextStopsReduce: a client that hangs up (the request's context
// ends) stops a JavaScript reduce that would run far longer: the query
// returns with the context's error, long before the time limit per call.
func TestQueryContextStopsReduce(t *testing.T) {
	e := newEnv(t, views.Options{JS: &jsruntime.Options{Timeout: stuckTimeout}})
	e.loadDocs(10)
	ctx := context.Background()
	ddoc := `{"views":{"v":{"map":"function (doc, meta) { emit(doc.n, 1); }","reduce":"function (k, v, r) { while (true) {} }"}}}`
	if _, err := e.svc.PutDesignDoc(ctx, "default", "slow", []byte(ddoc)); err != nil {
		t.Fatal(err)
	}
	p, err := views.ParseParams(url.Values{"stale": {"false"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := e.svc.Prepare(ctx, "default", "slow", "v", p)
	if err != nil {
		t.Fatal(err)
	}
	qctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	returns(t, "a query whose reduce spins, after its context ended", func() error {
		var buf bytes.Buffer
		if err := q.Run(qctx, &buf); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("err %v, want the context's; answered %s", err, buf.String())
		}
		return nil
	})
	if err := e.svc.DeleteDesignDoc(ctx, "default", "slow"); err != nil {
		t.Fatal(err)
	}
}

// TestStaleFalseQueryHonoursContext: a stale=false query that waits while
// the indexer catches up returns as soon as its request's context ends (a
// client that hangs up, a server shutting down), whatever the catch-up has
// left to do: here it is stuck in a map call.
func TestStaleFalseQueryHonoursContext(t *testing.T) {
	logs := newJSLog()
	e := newEnv(t, views.Options{JS: &jsruntime.Options{Timeout: stuckTimeout, Logger: slog.New(logs)}})
	e.loadDocs(2 * stuckN)
	ctx := context.Background()
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", stuckMapDDoc("stuck")); err != nil {
		t.Fatal(err)
	}
	logs.wait(t, "stuck") // the indexer is inside the stuck map call
	p, err := views.ParseParams(url.Values{"stale": {"false"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := e.svc.Prepare(ctx, "default", "d", "v", p)
	if err != nil {
		t.Fatal(err)
	}
	qctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	returns(t, "a stale=false query, after its context ended", func() error {
		if err := q.Run(qctx, io.Discard); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("err %v, want the context's", err)
		}
		return nil
	})
	if err := e.svc.DeleteDesignDoc(ctx, "default", "d"); err != nil {
		t.Fatal(err)
	}
}

// TestReplaceKeepsAnswering: while a design document is replaced by one with
// other functions, queries go on being answered (by the old index until the
// new one takes over): never "not found". The new index then answers with
// the new functions, and survives a restart at its place.
func TestReplaceKeepsAnswering(t *testing.T) {
	e := newEnv(t, views.Options{})
	ctx := context.Background()
	e.loadDocs(2000)
	ddoc := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"views":{"v":{"map":"function (doc, meta) { emit(doc.n %% %d, null); }","reduce":"_count"}}}`, 2+i))
	}
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", ddoc(0)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := queryRows(ctx, e.svc, "default", "d", "v", "stale=ok&reduce=false&limit=1"); errors.Is(err, views.ErrNotFound) {
				errs <- err
				return
			}
		}
	}()
	for i := 1; i <= 10; i++ {
		if _, err := e.svc.PutDesignDoc(ctx, "default", "d", ddoc(i)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-errs; err != nil {
		t.Fatalf("a query during a replacement: %v", err)
	}
	want := e.query("d", "v", "stale=false&group=true")
	if !strings.Contains(want, `"key":11`) {
		t.Fatalf("the new functions do not answer: %s", want)
	}
	e.close()
	e.open()
	if got := e.query("d", "v", "stale=ok&group=true"); got != want {
		t.Errorf("after a restart: %s, want %s", got, want)
	}
	if n := e.mapped("d"); n != 0 {
		t.Errorf("the replaced index was rebuilt after the restart (%d documents mapped)", n)
	}
}

// attachGate is a bucket service that, once armed, holds each AttachBucket
// until released: the gap in which a restarting bucket has no views yet.
type attachGate struct {
	armed    atomic.Bool
	entered  chan struct{}
	released chan struct{}
}

func (g *attachGate) AttachBucket(ctx context.Context, b *engine.Bucket) error {
	if g.armed.Load() {
		g.entered <- struct{}{}
		<-g.released
	}
	return nil
}
func (g *attachGate) DetachBucket(context.Context, *engine.Bucket, bool) error { return nil }

// While a bucket restarts for a changed evictionPolicy, its views are
// briefly detached: a request then is told to come back (engine.ErrWarmup,
// 503 over HTTP), not that the bucket has no such design document.
func TestViewsDuringBucketRestartAnswerWarmup(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	gate := &attachGate{entered: make(chan struct{}), released: make(chan struct{})}
	if err := eng.Attach(ctx, gate); err != nil { // attached before the views: reattached first
		t.Fatal(err)
	}
	svc, err := views.New(ctx, eng, &views.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if _, err := svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	gate.armed.Store(true)
	done := make(chan error, 1)
	go func() {
		_, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.EvictionPolicy = engine.FullEviction; return nil })
		done <- err
	}()
	<-gate.entered
	if _, err := svc.DesignDocs(ctx, "default"); !errors.Is(err, engine.ErrWarmup) {
		t.Errorf("design documents during the restart: %v, want ErrWarmup", err)
	}
	if _, err := svc.Info(ctx, "default", "d"); !errors.Is(err, engine.ErrWarmup) {
		t.Errorf("a design document's info during the restart: %v, want ErrWarmup", err)
	}
	close(gate.released)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ds, err := svc.DesignDocs(ctx, "default"); err != nil || len(ds) != 1 {
		t.Fatalf("design documents after the restart: %v, %v", ds, err)
	}
}
