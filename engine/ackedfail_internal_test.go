package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestAckedBytesAfterFailedCommit: a write at durability none that waits
// for its commit because MaxAckedBytes is reached gets the commit's error
// when it fails (it does not hang), and the failure leaves nothing counted:
// no acknowledged bytes, nothing pending, the partitions' sequence numbers
// and their lock-free copies back at the committed ones. Once the disk takes
// writes again, writes at the bound are answered and the count drains.
func TestAckedBytesAfterFailedCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // catches a hang only
	defer cancel()
	const limit = 4 << 10
	b, f := faultyNoneBucket(ctx, t, Options{FlushInterval: time.Hour, MaxAckedBytes: limit})
	c := b.DefaultCollection()
	value := make([]byte, 300)
	for i := range value {
		value[i] = 'x'
	}
	// consistent checks what the commit's failure or success must leave.
	consistent := func(when string) {
		t.Helper()
		for _, p := range b.parts {
			p.mu.RLock()
			n, np, seq, durable, now := len(p.mu.pending), p.mu.npending, p.mu.seq, p.mu.durable, p.seqNow.Load()
			p.mu.RUnlock()
			if n != np {
				t.Errorf("%s: partition %d: npending %d, pending holds %d", when, p.id, np, n)
			}
			if now != seq {
				t.Errorf("%s: partition %d: lock-free sequence number %d, given out %d", when, p.id, now, seq)
			}
			if n == 0 && seq != durable {
				t.Errorf("%s: partition %d: nothing pending, sequence number %d, committed %d", when, p.id, seq, durable)
			}
		}
	}
	f.setErr(errors.New("disk gone"))
	// Writes acknowledged from memory until the bound; the one past it
	// waits for the batch's commit, which fails.
	var failed error
	for i := 0; failed == nil; i++ {
		if i > 1000 {
			t.Fatal("no write waited for its commit past MaxAckedBytes")
		}
		_, failed = c.Upsert(ctx, fmt.Sprintf("k%d", i), value, nil)
	}
	if !errors.Is(failed, ErrStorage) {
		t.Fatalf("the write past the bound: %v, want ErrStorage", failed)
	}
	b.store.mu.Lock()
	left := b.store.mu.acked
	b.store.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d acknowledged bytes counted after the failed commit, want 0", left)
	}
	consistent("after the failed commit")
	f.setErr(nil)
	for b.store.failure() != nil {
		select {
		case <-ctx.Done():
			t.Fatal("writes never taken again")
		case <-time.After(time.Millisecond):
		}
	}
	for i := range 100 {
		if _, err := c.Upsert(ctx, fmt.Sprintf("again%d", i), value, nil); err != nil {
			t.Fatalf("after the disk came back: %v", err)
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	b.store.mu.Lock()
	left = b.store.mu.acked
	b.store.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d acknowledged bytes counted after Sync, want 0", left)
	}
	if peak := b.store.ackedPeak.Load(); peak > limit {
		t.Fatalf("acknowledged bytes peaked at %d, want at most %d", peak, limit)
	}
	consistent("after Sync")
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAckedBytesWaiterAtClose: writers waiting for their commit because
// MaxAckedBytes is reached, while the flusher is held, are answered when
// the bucket closes meanwhile (their writes committed, or refused), and the
// close ends.
func TestAckedBytesWaiterAtClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // catches a hang only
	defer cancel()
	const limit = 4 << 10
	var hold atomic.Bool
	release := make(chan struct{})
	eng, err := Open(t.TempDir(), &Options{NumPartitions: 4, NoSync: true, MaxAckedBytes: limit,
		CommitHook: func(string) {
			if hold.Load() {
				<-release
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	bs := DefaultBucketSettings("b")
	bs.DurabilityMinLevel = DurabilityNone
	b, err := eng.CreateBucket(ctx, bs)
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	value := make([]byte, 300)
	hold.Store(true)
	const writers = 4
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			var err error
			for i := 0; err == nil; i++ {
				_, err = c.Upsert(ctx, fmt.Sprintf("w%d-%d", w, i), value, nil)
			}
			errs <- err
		}()
	}
	for b.store.ackedWaits.Load() < writers {
		select {
		case <-ctx.Done():
			t.Fatalf("writers waiting at the bound: %d of %d", b.store.ackedWaits.Load(), writers)
		case <-time.After(time.Millisecond):
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- eng.Close() }()
	for !b.isClosed() {
		select {
		case <-ctx.Done():
			t.Fatal("the bucket never began to close")
		case <-time.After(time.Millisecond):
		}
	}
	hold.Store(false)
	close(release)
	for range writers {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("a writer at the bound as the bucket closed: %v, want ErrClosed in the end", err)
			}
		case <-ctx.Done():
			t.Fatal("a writer waiting at the bound hangs after the close")
		}
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the close hangs")
	}
}
