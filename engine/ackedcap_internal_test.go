package engine

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAckedBytesBounded: with the flusher held, a flood of writes at
// durability none is acknowledged from memory only up to MaxAckedBytes; the
// writes past it wait for their commit instead of piling up, and once the
// flusher goes on every write is answered, in order, and on disk after a
// restart.
func TestAckedBytesBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // catches a hang only
	defer cancel()
	const limit = 32 << 10
	var hold atomic.Bool
	release := make(chan struct{})
	dir := t.TempDir()
	eng, err := Open(dir, &Options{NumPartitions: 16, MaxAckedBytes: limit,
		CommitHook: func(string) {
			if hold.Load() {
				<-release
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, BucketSettings{Name: "b", Type: Couchbase, DurabilityMinLevel: DurabilityNone})
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	hold.Store(true)
	const writers, each = 8, 100
	value := func(w, i int) []byte { return bytes.Repeat([]byte{byte('a' + w)}, 1000+i) }
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := c.Upsert(ctx, fmt.Sprintf("w%d-%d", w, i), value(w, i), nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Every writer ends up waiting for a commit the hook holds: the bytes
	// acknowledged from memory reached the bound.
	for b.store.ackedWaits.Load() < writers {
		select {
		case <-ctx.Done():
			t.Fatalf("writers waiting at the bound: %d of %d", b.store.ackedWaits.Load(), writers)
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(time.Millisecond):
		}
	}
	if peak := b.store.ackedPeak.Load(); peak > limit || peak < limit/2 {
		t.Fatalf("acknowledged bytes not on disk peaked at %d, want at most %d (and near it)", peak, limit)
	}
	hold.Store(false)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if peak := b.store.ackedPeak.Load(); peak > limit {
		t.Fatalf("acknowledged bytes not on disk peaked at %d, want at most %d", peak, limit)
	}
	b.store.mu.Lock()
	left := b.store.mu.acked
	b.store.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d acknowledged bytes counted after Sync, want 0", left)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	eng, err = Open(dir, &Options{NumPartitions: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if b, err = eng.Bucket("b"); err != nil {
		t.Fatal(err)
	}
	c = b.DefaultCollection()
	for w := range writers {
		for i := range each {
			d, err := c.Get(ctx, fmt.Sprintf("w%d-%d", w, i))
			if err != nil {
				t.Fatalf("w%d-%d after the restart: %v", w, i, err)
			}
			if !bytes.Equal(d.Value, value(w, i)) {
				t.Fatalf("w%d-%d after the restart: %d bytes, want %d", w, i, len(d.Value), len(value(w, i)))
			}
		}
	}
}
