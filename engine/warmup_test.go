package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// heldWarmup opens dir with a background warm-up that holds after the
// first document it loads, until release is called (at the latest when the
// test ends). reached is closed once the warm-up holds.
func heldWarmup(t *testing.T, dir string, clk engine.Clock) (eng *engine.Engine, reached <-chan struct{}, release func()) {
	t.Helper()
	gate := make(chan struct{})
	at := make(chan struct{})
	var once, hold sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true, BackgroundWarmup: true,
		WarmupHook: func(bucket string, loaded int64) {
			hold.Do(func() {
				close(at)
				<-gate
			})
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		release()
		closeChecked(t, eng)
	})
	return eng, at, release
}

// waitCtx is a context that ends with the test's generous deadline for a
// hang.
func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestWarmupServesWhileLoading restarts a bucket whose warm-up is held after
// its first document: reads of keys not loaded yet answer what the store
// holds (never a false "not found"), writes build on the stored versions
// (CAS, revision, expiry), the loader then leaves what was written alone,
// and once it is done the counters, the expiry index and the change feed
// are those of a bucket loaded whole.
func TestWarmupServesWhileLoading(t *testing.T) {
	ctx := waitCtx(t)
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	const n = 100
	before := map[string]*engine.Document{}
	for i := range n {
		d, err := c.Upsert(ctx, fmt.Sprintf("k%03d", i), []byte(fmt.Sprintf(`{"n":%d}`, i)), &engine.WriteOptions{Expiry: int64(i%2) * 1000})
		if err != nil {
			t.Fatal(err)
		}
		before[d.Key] = d
	}
	if _, err := c.Delete(ctx, "k050", nil); err != nil {
		t.Fatal(err)
	}
	closeChecked(t, eng)

	eng, reached, release := heldWarmup(t, dir, clk)
	b, err = eng.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	c = b.DefaultCollection()
	<-reached
	ws := b.WarmupStats()
	// The estimate is the store's (the deleted document's tombstone is
	// stored too).
	if !ws.Running || ws.State != engine.WarmupLoading || ws.KeyCount != 1 || ws.EstimatedKeyCount != n {
		t.Fatalf("held warm-up: %+v, want running, %q, 1 key of %d estimated", ws, engine.WarmupLoading, n)
	}
	if b.Warm() {
		t.Fatal("Warm() during the warm-up")
	}

	// Reads: every stored version, as it was.
	for _, key := range []string{"k001", "k002", "k099"} {
		d, err := c.Get(ctx, key)
		if err != nil {
			t.Fatalf("Get %s during warm-up: %v", key, err)
		}
		w := before[key]
		if string(d.Value) != string(w.Value) || d.CAS != w.CAS || d.RevSeq != w.RevSeq || d.Expiration != w.Expiration || d.Seq != w.Seq {
			t.Fatalf("Get %s during warm-up = %+v, want %+v", key, d, w)
		}
	}
	if _, err := c.Peek("k003"); err != nil {
		t.Fatalf("Peek k003 during warm-up: %v", err)
	}
	if _, err := c.Get(ctx, "k050"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Get of a deleted key during warm-up: %v, want not found", err)
	}
	if _, err := c.Get(ctx, "absent"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Get of an absent key during warm-up: %v, want not found", err)
	}

	// Writes build on the stored versions.
	if _, err := c.Insert(ctx, "k010", []byte(`{}`), nil); !errors.Is(err, engine.ErrKeyExists) {
		t.Fatalf("Insert of a stored key during warm-up: %v, want ErrKeyExists", err)
	}
	if _, err := c.Replace(ctx, "k011", []byte(`{"x":1}`), &engine.WriteOptions{CAS: before["k011"].CAS + 1}); !errors.Is(err, engine.ErrCASMismatch) {
		t.Fatalf("Replace with a wrong CAS during warm-up: %v, want ErrCASMismatch", err)
	}
	repl, err := c.Replace(ctx, "k012", []byte(`{"new":true}`), &engine.WriteOptions{CAS: before["k012"].CAS, PreserveExpiry: true})
	if err != nil {
		t.Fatalf("Replace with the stored CAS during warm-up: %v", err)
	}
	w := before["k012"]
	if repl.RevSeq != w.RevSeq+1 || repl.Expiration != w.Expiration || repl.CAS <= w.CAS || repl.Seq <= w.Seq {
		t.Fatalf("Replace during warm-up = rev %d exp %d cas %d seq %d, want rev %d, exp %d, a higher CAS and seq", repl.RevSeq, repl.Expiration, repl.CAS, repl.Seq, w.RevSeq+1, w.Expiration)
	}
	if _, err := c.Delete(ctx, "k013", nil); err != nil {
		t.Fatalf("Delete during warm-up: %v", err)
	}
	if _, err := c.Insert(ctx, "k050", []byte(`{"again":1}`), nil); err != nil {
		t.Fatalf("Insert over a stored tombstone during warm-up: %v", err)
	}
	if _, err := c.Insert(ctx, "new", []byte(`{}`), nil); err != nil {
		t.Fatalf("Insert of a new key during warm-up: %v", err)
	}

	// What needs every item waits, or says it cannot answer yet.
	if _, _, err := b.Changes(nil, 0); !errors.Is(err, engine.ErrWarmup) {
		t.Fatalf("Changes during warm-up: %v, want ErrWarmup", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	err = b.WaitChanges(short, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitChanges during a held warm-up: %v, want it to wait (deadline exceeded)", err)
	}
	short, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
	_, _, err = b.ExpireBatch(short, 10)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ExpireBatch during a held warm-up: %v, want it to wait", err)
	}

	release()
	if err := b.WaitWarm(ctx); err != nil {
		t.Fatal(err)
	}
	ws = b.WarmupStats()
	if ws.Running || ws.State != engine.WarmupDone || ws.KeyCount != n || ws.ValueCount != n {
		t.Fatalf("warm-up done: %+v, want complete, %q, %d keys and values", ws, engine.WarmupDone, n)
	}

	// The loader left every version written during the warm-up in place.
	if d, err := c.Get(ctx, "k012"); err != nil || string(d.Value) != `{"new":true}` || d.CAS != repl.CAS {
		t.Fatalf("k012 after the warm-up = %v, %v; want the version written during it", d, err)
	}
	if _, err := c.Get(ctx, "k013"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("k013, deleted during the warm-up, after it: %v", err)
	}
	if d, err := c.Get(ctx, "k050"); err != nil || string(d.Value) != `{"again":1}` {
		t.Fatalf("k050 after the warm-up = %v, %v", d, err)
	}
	// Live: 100 - k050 + k050 again - k013 + new = 100; tombstones: k013.
	st := b.Stats()
	if st.CurrItems != n || st.Tombstones != 1 {
		t.Fatalf("after the warm-up: curr_items %d, tombstones %d; want %d, 1", st.CurrItems, st.Tombstones, n)
	}
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
	// The feed holds every document once, at its latest version.
	docs, _, err := b.Changes(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]*engine.Document{}
	for _, d := range docs {
		if seen[d.Key] != nil {
			t.Fatalf("the feed holds %s twice", d.Key)
		}
		seen[d.Key] = d
	}
	if len(seen) != n+1 || seen["k012"].CAS != repl.CAS || !seen["k013"].Deleted || seen["k099"].CAS != before["k099"].CAS {
		t.Fatalf("feed after the warm-up: %d documents (want %d), k012 %+v, k013 %+v", len(seen), n+1, seen["k012"], seen["k013"])
	}
	// Half the documents expire at t0+1000: the expiry index holds them
	// (k013, deleted, and k012's preserved expiry included as written).
	clk.Set(t0 + 2000)
	purged, _, err := b.ExpireBatch(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if want := n/2 - 1; purged != want { // k013 was one of them
		t.Fatalf("pager after the warm-up purged %d, want %d", purged, want)
	}
}

// TestWarmupCloseWhileLoading closes an engine whose warm-up is held: the
// close returns once the loader ends, and the next open finds everything.
func TestWarmupCloseWhileLoading(t *testing.T) {
	ctx := waitCtx(t)
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprint("k", i), []byte(`1`), nil); err != nil {
			t.Fatal(err)
		}
	}
	closeChecked(t, eng)

	gate := make(chan struct{})
	at := make(chan struct{})
	var hold sync.Once
	eng2, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true, BackgroundWarmup: true,
		WarmupHook: func(string, int64) { hold.Do(func() { close(at); <-gate }) }})
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := eng2.Bucket("b")
	<-at
	closed := make(chan error, 1)
	go func() { closed <- eng2.Close() }()
	close(gate)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	// The loader ended, either cut short by the close or done first.
	if err := b2.WaitWarm(ctx); err != nil && !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("WaitWarm of a bucket closed while warming: %v, want nil or ErrClosed", err)
	}
	eng3, _ := newEngine(t, dir)
	b3, _ := eng3.Bucket("b")
	if got := b3.Stats().CurrItems; got != 20 {
		t.Fatalf("after a close during the warm-up, the next open holds %d items, want 20", got)
	}
}

// TestWarmupEstimatesKeys restarts a bucket of each store kind whose
// documents were written, rewritten and deleted: the held warm-up reports
// the stored documents (tombstones included) as its estimate, not -1.
func TestWarmupEstimatesKeys(t *testing.T) {
	for _, kind := range []string{engine.StoragePebble, engine.StorageBolt} {
		t.Run(kind, func(t *testing.T) {
			ctx := waitCtx(t)
			dir := t.TempDir()
			clk := engine.NewFakeClock(t0)
			eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true, Storage: kind})
			if err != nil {
				t.Fatal(err)
			}
			b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b"})
			if err != nil {
				t.Fatal(err)
			}
			c := b.DefaultCollection()
			const n = 300
			for i := range n {
				if _, err := c.Upsert(ctx, fmt.Sprintf("k%04d", i), []byte(`{"v":1}`), nil); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 50 {
				if _, err := c.Upsert(ctx, fmt.Sprintf("k%04d", i*3), []byte(`{"v":2}`), nil); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 10 {
				if _, err := c.Delete(ctx, fmt.Sprintf("k%04d", i*7), nil); err != nil {
					t.Fatal(err)
				}
			}
			closeChecked(t, eng)

			eng, reached, release := heldWarmup(t, dir, clk)
			b, err = eng.Bucket("b")
			if err != nil {
				t.Fatal(err)
			}
			<-reached
			// bbolt counts its pages' keys; pebble counts a small store's.
			if ws := b.WarmupStats(); ws.EstimatedKeyCount != n {
				t.Fatalf("estimated key count %d, want %d (%+v)", ws.EstimatedKeyCount, n, ws)
			}
			release()
		})
	}
}

// TestWarmupEstimatesLargePebbleStore: a pebble store past the size it
// counts (8 MiB of documents) is estimated from its tables' properties:
// within a few percent of the documents stored.
func TestWarmupEstimatesLargePebbleStore(t *testing.T) {
	ctx := waitCtx(t)
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true, Storage: engine.StoragePebble})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2500
	// Values that do not compress, so that the tables are as large as the
	// documents.
	rng := rand.NewChaCha8([32]byte{1, 2})
	for i := range n {
		pad := make([]byte, 2048)
		rng.Read(pad)
		value := []byte(fmt.Sprintf(`{"pad":"%x"}`, pad))
		if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprintf("k%05d", i), value, nil); err != nil {
			t.Fatal(err)
		}
	}
	closeChecked(t, eng)

	eng, reached, release := heldWarmup(t, dir, clk)
	if b, err = eng.Bucket("b"); err != nil {
		t.Fatal(err)
	}
	<-reached
	if got := b.WarmupStats().EstimatedKeyCount; got < n*95/100 || got > n*105/100 {
		t.Fatalf("estimated key count %d, want within 5%% of %d", got, n)
	}
	release()
}
