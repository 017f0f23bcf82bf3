package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/internal/logtest"
)

// failingScans is a store whose full scans (the warm-up's load) fail,
// after reading a few documents, while fail is set.
type failingScans struct {
	storage
	fail atomic.Bool
}

func (f *failingScans) scan(fn func(*Document) error) error {
	n := 0
	return f.storage.scan(func(d *Document) error {
		if n++; n > 5 && f.fail.Load() {
			return errors.New("injected scan failure")
		}
		return fn(d)
	})
}

// A background warm-up whose load fails is retried, with back-off, logged,
// and shown (running, State WarmupRetrying between tries, Error, Retries)
// while the bucket is not warm; once the store reads again the warm-up
// finishes and what waits for it (WaitWarm: the feed, the pager, the
// purge, listings) goes on, every document loaded once.
func TestWarmupRetriesFailedLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	eng, err := Open(dir, &Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, DefaultBucketSettings("b"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 30
	for i := range n {
		if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprint("k", i), []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	var logs logtest.Buffer
	var fs *failingScans
	eng, err = Open(dir, &Options{NumPartitions: 4, NoSync: true, BackgroundWarmup: true, Logger: logs.Logger(),
		warmupRetryFirst: time.Millisecond,
		wrapStorage: func(st storage) storage {
			fs = &failingScans{storage: st}
			fs.fail.Store(true)
			return fs
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err = eng.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	for b.WarmupStats().Retries < 2 {
		if ctx.Err() != nil {
			t.Fatalf("the failed warm-up was not retried: %+v", b.WarmupStats())
		}
		time.Sleep(time.Millisecond)
	}
	ws := b.WarmupStats()
	if !ws.Running || !strings.Contains(ws.Error, "injected scan failure") || b.Warm() {
		t.Fatalf("warm-up being retried: %+v, warm %v; want running with the error", ws, b.Warm())
	}
	short, cancelShort := context.WithTimeout(ctx, 10*time.Millisecond)
	err = b.WaitWarm(short)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitWarm while the load fails: %v, want it to wait", err)
	}
	if recs := logs.Records(t, "warm-up failed; it is retried (reads go to disk meanwhile; the change feed, pager and purge wait)"); len(recs) < 2 || !strings.Contains(fmt.Sprint(recs[0]["err"]), "injected") {
		t.Fatalf("retries logged: %v", recs)
	}

	fs.fail.Store(false)
	if err := b.WaitWarm(ctx); err != nil {
		t.Fatalf("WaitWarm once the store reads again: %v", err)
	}
	ws = b.WarmupStats()
	if ws.Running || ws.State != WarmupDone || ws.Error != "" || ws.Retries < 2 || ws.KeyCount != n {
		t.Fatalf("warm-up after the retries: %+v", ws)
	}
	if st := b.Stats(); st.CurrItems != n {
		t.Fatalf("curr_items %d after the retried warm-up, want %d", st.CurrItems, n)
	}
	var listed int
	for _, err := range b.DefaultCollection().List(ctx, ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		listed++
	}
	if listed != n {
		t.Fatalf("listed %d documents, want %d", listed, n)
	}
}

// TestGetRacingTheWarmupFindsTheKey: a get looks in memory while the warm-up
// has not loaded its key yet; the warm-up then loads it and finishes before
// the get reads further. The get must answer the stored document, not
// ErrNotFound because memory now holds every key.
func TestGetRacingTheWarmupFindsTheKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // catches a hang only
	defer cancel()
	dir := t.TempDir()
	clk := NewFakeClock(1_700_000_000)
	eng, err := Open(dir, &Options{Clock: clk, NumPartitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, BucketSettings{Name: "b", Type: Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprint("k", i), []byte(fmt.Sprint(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	warmHeld, warmGo := make(chan struct{}), make(chan struct{})
	getHeld, getGo := make(chan struct{}), make(chan struct{})
	var holdWarm atomic.Bool
	holdWarm.Store(true)
	eng, err = Open(dir, &Options{Clock: clk, NumPartitions: 4, BackgroundWarmup: true,
		WarmupHook: func(string, int64) {
			if holdWarm.CompareAndSwap(true, false) {
				close(warmHeld)
				<-warmGo
			}
		},
		beforeMiss: func(string) {
			close(getHeld)
			<-getGo
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err = eng.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	<-warmHeld // one document loaded: find one that is not
	key := ""
	for i := range n {
		k := fmt.Sprint("k", i)
		p := b.partitionFor(k)
		p.mu.RLock()
		d := p.mu.docs.get(docKey{cid: c.id, key: k})
		p.mu.RUnlock()
		if d == nil {
			key = k
			break
		}
	}
	if key == "" {
		t.Fatal("the held warm-up has loaded every key")
	}
	type answer struct {
		d   *Document
		err error
	}
	got := make(chan answer, 1)
	go func() {
		d, err := c.Get(ctx, key)
		got <- answer{d, err}
	}()
	<-getHeld // the get found nothing in memory
	close(warmGo)
	if err := b.WaitWarm(ctx); err != nil {
		t.Fatal(err)
	}
	close(getGo)
	a := <-got
	if a.err != nil {
		t.Fatalf("get of the stored %s racing the warm-up: %v", key, a.err)
	}
	if want := strings.TrimPrefix(key, "k"); string(a.d.Value) != want {
		t.Fatalf("get of %s: %q, want %q", key, a.d.Value, want)
	}
}

// TestListingRacingTheWarmupListsTheKey: listStored looks in memory for a
// key the warm-up has not loaded yet; the warm-up then loads it and
// finishes before the listing reads further. The listing must yield the
// key, not skip it because memory now holds every key. (List itself waits
// for the warm-up before it calls listStored; this holds listStored to its
// own word without that wait.)
func TestListingRacingTheWarmupListsTheKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // catches a hang only
	defer cancel()
	dir := t.TempDir()
	clk := NewFakeClock(1_700_000_000)
	eng, err := Open(dir, &Options{Clock: clk, NumPartitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, BucketSettings{Name: "b", Type: Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprint("k", i), []byte(fmt.Sprint(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	warmHeld, warmGo := make(chan struct{}), make(chan struct{})
	listHeld, listGo := make(chan struct{}), make(chan struct{})
	var holdWarm atomic.Bool
	holdWarm.Store(true)
	var held atomic.Value // the key the listing is held at
	held.Store("")
	eng, err = Open(dir, &Options{Clock: clk, NumPartitions: 4, BackgroundWarmup: true,
		WarmupHook: func(string, int64) {
			if holdWarm.CompareAndSwap(true, false) {
				close(warmHeld)
				<-warmGo
			}
		},
		beforeMiss: func(key string) {
			if key == held.Load().(string) {
				close(listHeld)
				<-listGo
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err = eng.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	<-warmHeld // one document loaded: hold the listing at the last that is not
	key := ""
	for i := range n {
		k := fmt.Sprint("k", i)
		p := b.partitionFor(k)
		p.mu.RLock()
		d := p.mu.docs.get(docKey{cid: c.id, key: k})
		p.mu.RUnlock()
		if d == nil && k > key {
			key = k
		}
	}
	if key == "" {
		t.Fatal("the held warm-up has loaded every key")
	}
	held.Store(key)
	type answer struct {
		keys []string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		var a answer
		c.listStored(ctx, keyRange{}, nil,
			func(d *Document) bool { a.keys = append(a.keys, d.Key); return true },
			func(_ *Document, err error) bool { a.err = err; return false })
		got <- a
	}()
	<-listHeld // the listing found nothing in memory for key
	close(warmGo)
	if err := b.WaitWarm(ctx); err != nil {
		t.Fatal(err)
	}
	close(listGo)
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	if len(a.keys) != n || !slices.Contains(a.keys, key) {
		t.Fatalf("listing racing the warm-up's end yielded %d keys (%s among them: %v), want all %d", len(a.keys), key, slices.Contains(a.keys, key), n)
	}
}
