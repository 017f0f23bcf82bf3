package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestLockWrites covers a lock's life: taking it, writes refused without the
// lock CAS, the holder's write that ends it, a second lock, and unlock.
func TestLockWrites(t *testing.T) {
	ctx := context.Background()
	b, clk := newBucket(t, engine.Couchbase)
	c := b.DefaultCollection()
	d, err := c.Upsert(ctx, "k", []byte(`{"v":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.GetLocked(ctx, "k", 10)
	if err != nil {
		t.Fatal(err)
	}
	if l.CAS <= d.CAS || l.CAS != b.MaxCAS() || string(l.Value) != `{"v":1}` {
		t.Fatalf("locked: cas %d (doc %d) value %s", l.CAS, d.CAS, l.Value)
	}
	if _, err := c.GetLocked(ctx, "k", 10); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("second lock: %v", err)
	}
	// Reads see the real document; Locked says the lock holds.
	g, err := c.Get(ctx, "k")
	if err != nil || g.CAS != d.CAS || !c.Locked(g) {
		t.Fatalf("get while locked: %+v %v locked=%v", g, err, c.Locked(g))
	}
	for name, write := range map[string]func() error{
		"upsert without cas": func() error { _, err := c.Upsert(ctx, "k", []byte(`2`), nil); return err },
		"replace with the old cas": func() error {
			_, err := c.Replace(ctx, "k", []byte(`2`), &engine.WriteOptions{CAS: d.CAS})
			return err
		},
		"replace with a wrong cas": func() error {
			_, err := c.Replace(ctx, "k", []byte(`2`), &engine.WriteOptions{CAS: l.CAS + 1})
			return err
		},
		"delete": func() error { _, err := c.Delete(ctx, "k", nil); return err },
		"touch":  func() error { _, err := c.Touch(ctx, "k", 100); return err },
		"batch put": func() error {
			return c.ApplyAll(ctx, []engine.Op{{Kind: engine.OpUpsert, Key: "k", Value: []byte(`3`)}})[0].Err
		},
	} {
		if err := write(); !errors.Is(err, engine.ErrLocked) {
			t.Errorf("%s on a locked document: %v, want ErrLocked", name, err)
		}
	}
	if _, err := c.Insert(ctx, "k", []byte(`2`), nil); !errors.Is(err, engine.ErrKeyExists) {
		t.Errorf("insert over a locked document: %v, want ErrKeyExists", err)
	}
	if g, _ := c.Get(ctx, "k"); string(g.Value) != `{"v":1}` || g.CAS != d.CAS {
		t.Fatalf("a refused write changed the document: %+v", g)
	}
	// The holder writes with the lock CAS: the write ends the lock.
	w, err := c.Replace(ctx, "k", []byte(`{"v":2}`), &engine.WriteOptions{CAS: l.CAS})
	if err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	if w.CAS == l.CAS || c.Locked(w) {
		t.Fatalf("after the holder's write: cas %d lock cas %d locked=%v", w.CAS, l.CAS, c.Locked(w))
	}
	if err := c.Unlock("k", l.CAS); !errors.Is(err, engine.ErrNotLocked) {
		t.Fatalf("unlock after the holder's write: %v", err)
	}
	if _, err := c.Upsert(ctx, "k", []byte(`{"v":3}`), nil); err != nil {
		t.Fatalf("write after the lock ended: %v", err)
	}

	// Unlock: a wrong CAS is ErrLocked, the right one ends the lock.
	l2, err := c.GetLocked(ctx, "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Unlock("k", l2.CAS-1); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("unlock with a wrong cas: %v", err)
	}
	if err := c.Unlock("k", l2.CAS); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if _, err := c.Upsert(ctx, "k", []byte(`{"v":4}`), nil); err != nil {
		t.Fatalf("write after unlock: %v", err)
	}
	if _, err := c.Replace(ctx, "k", []byte(`5`), &engine.WriteOptions{CAS: l2.CAS}); !errors.Is(err, engine.ErrCASMismatch) {
		t.Fatalf("the old lock cas after unlock: %v, want ErrCASMismatch", err)
	}
	if err := c.Unlock("nope", 1); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("unlock of a missing document: %v", err)
	}
	if _, err := c.GetLocked(ctx, "nope", 0); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("lock of a missing document: %v", err)
	}
	if _, err := c.Upsert(ctx, "short", []byte(`1`), &engine.WriteOptions{Expiry: 5}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(5)
	if _, err := c.GetLocked(ctx, "short", 0); !errors.Is(err, engine.ErrExpired) {
		t.Fatalf("lock of an expired document: %v, want ErrExpired", err)
	}
	// The holder may delete with the lock CAS.
	l3, err := c.GetLocked(ctx, "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, "k", &engine.WriteOptions{CAS: l3.CAS}); err != nil {
		t.Fatalf("the holder's delete: %v", err)
	}
}

// TestLockTimesOut moves the clock past the lock's end: the default lock
// time is 15 s, and a lock asked for longer than 30 s gets the default, as
// Couchbase's (ep-engine's getLockedInner: over getl_max_timeout is
// getl_default_timeout); it was cut to 30 s.
func TestLockTimesOut(t *testing.T) {
	ctx := context.Background()
	b, clk := newBucket(t, engine.Couchbase)
	c := b.DefaultCollection()
	for _, tc := range []struct{ ask, lasts int64 }{{0, 15}, {5, 5}, {30, 30}, {31, 15}, {3600, 15}} {
		if _, err := c.Upsert(ctx, "k", []byte(`1`), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetLocked(ctx, "k", tc.ask); err != nil {
			t.Fatal(err)
		}
		clk.Advance(tc.lasts - 1)
		if _, err := c.Upsert(ctx, "k", []byte(`2`), nil); !errors.Is(err, engine.ErrLocked) {
			t.Fatalf("lock of %d s, %d s later: %v, want ErrLocked", tc.ask, tc.lasts-1, err)
		}
		clk.Advance(1)
		if _, err := c.Upsert(ctx, "k", []byte(`2`), nil); err != nil {
			t.Fatalf("lock of %d s, %d s later: %v, want it ended", tc.ask, tc.lasts, err)
		}
	}
}

// TestLockNotLogged: taking and releasing a lock writes nothing: no sequence
// number, no change-feed entry.
func TestLockNotLogged(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, engine.Couchbase)
	c := b.DefaultCollection()
	if _, err := c.Upsert(ctx, "k", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	seqs := b.HighSeqnos()
	l, err := c.GetLocked(ctx, "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Unlock("k", l.CAS); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetLocked(ctx, "k", 0); err != nil {
		t.Fatal(err)
	}
	if got := b.HighSeqnos(); !slices.Equal(got, seqs) {
		t.Fatal("a lock moved the sequence numbers")
	}
	docs, _, err := b.Changes(seqs, 100)
	if err != nil || len(docs) != 0 {
		t.Fatalf("a lock made %d feed entries (%v)", len(docs), err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLockDroppedOnRestart: locks are in memory only.
func TestLockDroppedOnRestart(t *testing.T) {
	ctx := context.Background()
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
	d, err := b.DefaultCollection().Upsert(ctx, "k", []byte(`1`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.DefaultCollection().GetLocked(ctx, "k", 30); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	eng, err = engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, eng)
	b, err = eng.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	g, err := c.Get(ctx, "k")
	if err != nil || g.CAS != d.CAS || c.Locked(g) {
		t.Fatalf("after restart: %+v %v locked=%v", g, err, c.Locked(g))
	}
	if _, err := c.Upsert(ctx, "k", []byte(`2`), nil); err != nil {
		t.Fatalf("write after restart: %v", err)
	}
}

// TestLockedDocumentExpires: as Couchbase's expiry, the pager expires a
// locked document whose expiration passes, and the lock goes with it; a
// document written again under the key is not locked.
func TestLockedDocumentExpires(t *testing.T) {
	ctx := context.Background()
	b, clk := newBucket(t, engine.Couchbase)
	c := b.DefaultCollection()
	if _, err := c.Upsert(ctx, "k", []byte(`1`), &engine.WriteOptions{Expiry: 10}); err != nil {
		t.Fatal(err)
	}
	l, err := c.GetLocked(ctx, "k", 30)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(10)
	n, _, err := b.ExpireBatch(ctx, 100)
	if err != nil || n != 1 {
		t.Fatalf("pager purged %d (%v), want the locked document", n, err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "k"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("get after expiry: %v", err)
	}
	if err := c.Unlock("k", l.CAS); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("unlock after expiry: %v", err)
	}
	if _, err := c.Insert(ctx, "k", []byte(`2`), nil); err != nil {
		t.Fatalf("insert after expiry, within the old lock's time: %v", err)
	}
	if _, err := c.Upsert(ctx, "k", []byte(`3`), nil); err != nil {
		t.Fatalf("the new document is not locked: %v", err)
	}
}

// TestLockEphemeral: an ephemeral bucket locks the same way.
func TestLockEphemeral(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, engine.Ephemeral)
	c := b.DefaultCollection()
	if _, err := c.Upsert(ctx, "k", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	l, err := c.GetLocked(ctx, "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upsert(ctx, "k", []byte(`2`), nil); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("write to a locked document: %v", err)
	}
	if _, err := c.Upsert(ctx, "k", []byte(`2`), &engine.WriteOptions{CAS: l.CAS}); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
}

// TestLockRace: of many clients locking one document at once, one gets the
// lock and the rest ErrLocked.
func TestLockRace(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, engine.Couchbase)
	c := b.DefaultCollection()
	if _, err := c.Upsert(ctx, "k", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	const n = 16
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := c.GetLocked(ctx, "k", 0)
			errs <- err
		}()
	}
	won := 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			won++
		case !errors.Is(err, engine.ErrLocked):
			t.Errorf("GetLocked: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d clients got the lock, want 1", won)
	}
}

// TestLockEjectedValue: GetLocked of a document whose value left memory
// (value eviction) returns the value read back, and the lock holds on it.
func TestLockEjectedValue(t *testing.T) {
	ctx := context.Background()
	b := ejectBucket(t)
	c := b.DefaultCollection()
	fillEjecting(t, b)
	before := b.Stats().BgFetched
	for i := range 20 {
		l, err := c.GetLocked(ctx, memKey(i), 0)
		if err != nil {
			t.Fatal(err)
		}
		wantValue(t, "GetLocked", l, i, 0)
		if _, err := c.Upsert(ctx, memKey(i), ejectValue(i, 1), nil); !errors.Is(err, engine.ErrLocked) {
			t.Fatalf("write to locked %s: %v", memKey(i), err)
		}
		if _, err := c.Replace(ctx, memKey(i), ejectValue(i, 1), &engine.WriteOptions{CAS: l.CAS}); err != nil {
			t.Fatalf("the holder's write to %s: %v", memKey(i), err)
		}
		wantValue(t, "Get after the holder's write", mustGet(t, c, i), i, 1)
	}
	if b.Stats().BgFetched == before {
		t.Fatal("no GetLocked read an ejected value back: the test locked only resident documents")
	}
}
