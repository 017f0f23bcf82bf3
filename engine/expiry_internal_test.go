package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestExpirationLostToAFailedCommit: a get's expiration leaves curr_items and
// the collection's count when it is queued; when its commit fails, the
// document comes back into both (it is still the committed version), a
// catch-up waiting for the expiration (WaitCommitted) ends instead of
// waiting for a commit that will never come, and once the disk takes writes
// again the next get expires it for good.
func TestExpirationLostToAFailedCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // catches a hang only
	defer cancel()
	clk := NewFakeClock(1_700_000_000)
	var fs *faultyStorage
	eng, err := Open(t.TempDir(), &Options{Clock: clk, NumPartitions: 4, wrapStorage: func(st storage) storage {
		fs = &faultyStorage{storage: st}
		return fs
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, BucketSettings{Name: "b", Type: Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	b.store.probeGap = time.Millisecond
	c := b.DefaultCollection()
	if _, err := c.Upsert(ctx, "k", []byte(`1`), &WriteOptions{Expiry: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upsert(ctx, "live", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10)
	fs.setErr(errors.New("injected commit failure"))
	if _, err := c.Get(ctx, "k"); !errors.Is(err, ErrExpired) {
		t.Fatalf("get of the expired k: %v, want ErrExpired", err)
	}
	target := b.Consumer("test").HighSeqnos()
	if err := b.Consumer("test").WaitCommitted(ctx, target); err != nil {
		t.Fatalf("waiting for the expiration whose commit fails: %v", err)
	}
	if st := b.Stats(); st.CurrItems != 2 || c.Count() != 2 {
		t.Fatalf("after the expiration's commit failed: curr_items %d, count %d; want 2, 2 (k is still the committed version)", st.CurrItems, c.Count())
	}
	for _, p := range b.parts {
		p.mu.RLock()
		n := len(p.mu.expiring)
		p.mu.RUnlock()
		if n != 0 {
			t.Fatalf("partition %d still counts %d expirations on their way to disk", p.id, n)
		}
	}
	fs.setErr(nil)
	for {
		if _, err := c.Get(ctx, "k"); errors.Is(err, ErrExpired) {
			if err := b.Sync(ctx); err == nil {
				break
			}
		} else if !errors.Is(err, ErrStorage) { // refused until the probe passes
			t.Fatalf("get of k once the disk takes writes again: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatal("the store never took writes again")
		}
		time.Sleep(time.Millisecond)
	}
	if st := b.Stats(); st.CurrItems != 1 || c.Count() != 1 || st.Tombstones != 1 {
		t.Fatalf("after the expiration is committed: curr_items %d, count %d, tombstones %d; want 1, 1, 1", st.CurrItems, c.Count(), st.Tombstones)
	}
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestExpiryEntryBackAfterReplacedExpirationFails: a queued expiration takes
// the document's expiry entry out at once; a set of the same key then
// replaces it as the pending version, and the commit of both fails. The
// committed version is still live and expired: it must be back in the expiry
// index, so that the pager purges it and curr_items drops, not left for a
// reader to find.
func TestExpiryEntryBackAfterReplacedExpirationFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // catches a hang only
	defer cancel()
	clk := NewFakeClock(1_700_000_000)
	var fs *faultyStorage
	var hold atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	eng, err := Open(t.TempDir(), &Options{Clock: clk, NumPartitions: 4,
		CommitHook: func(string) {
			if hold.CompareAndSwap(true, false) {
				entered <- struct{}{}
				<-release
			}
		},
		wrapStorage: func(st storage) storage {
			fs = &faultyStorage{storage: st}
			return fs
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, BucketSettings{Name: "b", Type: Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	b.store.probeGap = time.Millisecond
	c := b.DefaultCollection()
	if _, err := c.Upsert(ctx, "k", []byte(`1`), &WriteOptions{Expiry: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upsert(ctx, "live", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10)
	hold.Store(true)
	if n, _, err := b.ExpireBatch(ctx, 10); err != nil || n != 1 {
		t.Fatalf("queueing k's expiration: purged %d, %v; want 1", n, err)
	}
	<-entered // the expiration's batch is being committed, held
	setDone := make(chan error, 1)
	go func() {
		_, err := c.Upsert(ctx, "k", []byte(`2`), &WriteOptions{Expiry: 100, Durability: DurabilityPersistToMajority})
		setDone <- err
	}()
	// The set is queued, replacing the pending expiration, once k's
	// pending version is no longer the expiration.
	for {
		p := b.partitionFor("k")
		p.mu.RLock()
		d := p.mu.pending[docKey{cid: c.id, key: "k"}]
		p.mu.RUnlock()
		if d != nil && !d.Deleted {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the set of k was never queued")
		}
		time.Sleep(time.Millisecond)
	}
	fs.setErr(errors.New("injected commit failure"))
	close(release)
	if err := <-setDone; !errors.Is(err, ErrStorage) {
		t.Fatalf("set of k whose commit fails: %v, want ErrStorage", err)
	}
	if err := b.Check(ctx); err != nil {
		t.Fatalf("after the failed commit: %v", err)
	}
	fs.setErr(nil)
	for b.store.failure() != nil {
		if ctx.Err() != nil {
			t.Fatal("the store never took writes again")
		}
		time.Sleep(time.Millisecond)
	}
	if n, _, err := b.ExpireBatch(ctx, 10); err != nil || n != 1 {
		t.Fatalf("the pager once the disk takes writes again: purged %d, %v; want k's expiration (1)", n, err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.CurrItems != 1 || c.Count() != 1 || st.Tombstones != 1 {
		t.Fatalf("after the pager purged k: curr_items %d, count %d, tombstones %d; want 1, 1, 1", st.CurrItems, c.Count(), st.Tombstones)
	}
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
}
