package engine_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestReviewGetLockedDuringWarmup locks a document the held warm-up has not
// loaded yet: GetLocked answers what the store holds, as Get does (never a
// false "not found"), and the lock holds against other writers.
func TestReviewGetLockedDuringWarmup(t *testing.T) {
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
	for i := range 50 {
		if _, err := c.Upsert(ctx, fmt.Sprintf("k%03d", i), []byte(fmt.Sprintf(`{"n":%d}`, i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	closeChecked(t, eng)

	eng, reached, release := heldWarmup(t, dir, clk)
	b, err = eng.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	c = b.DefaultCollection()
	<-reached
	// An unlock of a stored document not loaded yet: not locked, not missing.
	if err := c.Unlock("k049", 1); !errors.Is(err, engine.ErrNotLocked) {
		t.Fatalf("Unlock of an unlocked document during warm-up: %v, want ErrNotLocked", err)
	}
	for i := range 50 {
		key := fmt.Sprintf("k%03d", i)
		d, err := c.GetLocked(ctx, key, 10)
		if err != nil {
			t.Fatalf("GetLocked %s during warm-up: %v", key, err)
		}
		if string(d.Value) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("GetLocked %s = %q", key, d.Value)
		}
		if _, err := c.Upsert(ctx, key, []byte(`{}`), nil); err == nil {
			t.Fatalf("Upsert of %s locked during warm-up succeeded", key)
		}
	}
	release()
	if err := b.WaitWarm(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upsert(ctx, "k010", []byte(`{}`), nil); err == nil {
		t.Fatal("Upsert of a document locked during warm-up succeeded after it")
	}
}

// TestReviewListSeesAckedWrites lists a couchbase bucket after writes
// acknowledged from memory (durability none) that the flusher has not
// committed yet: List, as Get, reads its writes (a new key is listed, a
// changed one with its new value).
func TestReviewListSeesAckedWrites(t *testing.T) {
	ctx := waitCtx(t)
	_, b := newLevelBucket(t, t.TempDir(), engine.DurabilityNone)
	c := b.DefaultCollection()
	if _, err := c.Upsert(ctx, "b", []byte(`{"v":1}`), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upsert(ctx, "a", []byte(`{"v":1}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upsert(ctx, "b", []byte(`{"v":2}`), nil); err != nil {
		t.Fatal(err)
	}
	if d, err := c.Get(ctx, "a"); err != nil || string(d.Value) != `{"v":1}` {
		t.Fatalf("Get a = %v, %v", d, err)
	}
	var got []string
	for d, err := range c.List(ctx, engine.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Key+"="+string(d.Value))
	}
	if want := []string{`a={"v":1}`, `b={"v":2}`}; !slices.Equal(got, want) {
		t.Fatalf("List after writes at durability none = %q, want %q (as Get reads them)", got, want)
	}
}

// TestReviewWarmupEjectLockAckedTogether restarts a couchbase bucket whose
// values do not fit its quota and whose writes are acknowledged from memory,
// and, while its warm-up is held and after, runs readers, writers, lockers
// and listings at once: every read sees an intact value, and Check (in the
// cleanup) finds the counters and the store consistent.
func TestReviewWarmupEjectLockAckedTogether(t *testing.T) {
	ctx := waitCtx(t)
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase, RAMQuotaMB: ejectQuota})
	if err != nil {
		t.Fatal(err)
	}
	fillEjecting(t, b)
	closeChecked(t, eng)

	eng, reached, release := heldWarmup(t, dir, clk)
	b, err = eng.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	<-reached
	none := &engine.WriteOptions{Durability: engine.DurabilityNone}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	run := func(w int) {
		defer wg.Done()
		for j := range 200 {
			i := (w*7919 + j*31) % ejectDocs
			key := memKey(i)
			switch j % 4 {
			case 0:
				if _, err := c.Upsert(ctx, key, ejectValue(i, 1), none); err != nil && !errors.Is(err, engine.ErrLocked) {
					errs <- fmt.Errorf("upsert %s: %w", key, err)
					return
				}
			case 1:
				d, err := c.GetLocked(ctx, key, 1)
				if errors.Is(err, engine.ErrLocked) {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("GetLocked %s: %w", key, err)
					return
				}
				if _, err := c.Replace(ctx, key, ejectValue(i, 2), &engine.WriteOptions{CAS: d.CAS, Durability: engine.DurabilityNone}); err != nil {
					errs <- fmt.Errorf("replace %s with the lock CAS: %w", key, err)
					return
				}
			case 2:
				d, err := c.Get(ctx, key)
				if err != nil {
					errs <- fmt.Errorf("get %s: %w", key, err)
					return
				}
				if !bytes.Equal(d.Value, ejectValue(i, 0)) && !bytes.Equal(d.Value, ejectValue(i, 1)) && !bytes.Equal(d.Value, ejectValue(i, 2)) {
					errs <- fmt.Errorf("get %s: value %.40q", key, d.Value)
					return
				}
			case 3:
				if j == 103 { // halfway: the load finishes under the traffic
					release()
				}
			}
		}
	}
	for w := range 4 {
		wg.Add(1)
		go run(w)
	}
	wg.Wait()
	release()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := 0
	for d, err := range c.List(ctx, engine.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Value) != 4096 {
			t.Fatalf("List %s: value of %d bytes", d.Key, len(d.Value))
		}
		n++
	}
	if n != ejectDocs {
		t.Fatalf("List yielded %d documents, want %d", n, ejectDocs)
	}
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReviewQuotaAfterAckedBurst writes a couchbase bucket's quota over four
// times at durability none: once the writes are on disk, value eviction has
// brought mem_used back under the quota, as it does for durable writes.
func TestReviewQuotaAfterAckedBurst(t *testing.T) {
	ctx := waitCtx(t)
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeChecked(t, eng) })
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase, RAMQuotaMB: ejectQuota, DurabilityMinLevel: engine.DurabilityNone})
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	for i := range ejectDocs {
		if _, err := c.Upsert(ctx, memKey(i), ejectValue(i, 0), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	st := b.Stats()
	if st.MemUsed > ejectQuota<<20 {
		t.Fatalf("after a burst of writes at durability none, once on disk: mem_used %d past the quota %d", st.MemUsed, ejectQuota<<20)
	}
}
