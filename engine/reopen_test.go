package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// lifeLog is a BucketService that records the attaches and detaches it is
// told of.
type lifeLog struct {
	mu     sync.Mutex
	events []string
	last   *engine.Bucket
}

func (l *lifeLog) AttachBucket(_ context.Context, b *engine.Bucket) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, "attach "+b.Name()+" "+string(b.Settings().EvictionPolicy))
	l.last = b
	return nil
}

func (l *lifeLog) DetachBucket(_ context.Context, b *engine.Bucket, deleted bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("detach %s deleted=%v", b.Name(), deleted))
	return nil
}

// TestEvictionPolicyChangeRestartsBucket: a couchbase bucket's evictionPolicy
// changes in place, as Couchbase changes it: the bucket restarts with the
// new policy (services detached, not deleted, and attached to the new one),
// keeps every document, tombstone and count, and the change survives a
// restart of the engine. On the old code the change was refused.
func TestEvictionPolicyChangeRestartsBucket(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng, _ := newEngine(t, dir)
	svc := &lifeLog{}
	if err := eng.Attach(ctx, svc); err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "r", RAMQuotaMB: 100})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	c := b.DefaultCollection()
	for i := range n {
		if _, err := c.Upsert(ctx, fmt.Sprintf("k%03d", i), fmt.Appendf(nil, `{"n":%d}`, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Delete(ctx, "k000", nil); err != nil {
		t.Fatal(err)
	}
	seqs, uuid := b.HighSeqnos(), b.UUID()
	check := func(b *engine.Bucket, want engine.EvictionPolicy) {
		t.Helper()
		if got := b.UUID(); got != uuid {
			t.Errorf("history %d after the restart, want %d: a clean restart goes on with its history", got, uuid)
		}
		if err := b.WaitWarm(ctx); err != nil {
			t.Fatal(err)
		}
		if got := b.Settings().EvictionPolicy; got != want {
			t.Errorf("evictionPolicy %s, want %s", got, want)
		}
		if got := b.Stats().CurrItems; got != n-1 {
			t.Errorf("curr_items %d, want %d", got, n-1)
		}
		c := b.DefaultCollection()
		for i := 1; i < n; i++ {
			d, err := c.Get(ctx, fmt.Sprintf("k%03d", i))
			if err != nil {
				t.Fatalf("k%03d: %v", i, err)
			}
			if want := fmt.Sprintf(`{"n":%d}`, i); string(d.Value) != want {
				t.Fatalf("k%03d = %s, want %s", i, d.Value, want)
			}
		}
		if _, err := c.Get(ctx, "k000"); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("deleted k000: %v, want ErrNotFound", err)
		}
		for p, s := range b.HighSeqnos() {
			if s != seqs[p] {
				t.Fatalf("partition %d high seqno %d after the restart, want %d", p, s, seqs[p])
			}
		}
	}

	old, upd, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.EvictionPolicy = engine.FullEviction; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if old.EvictionPolicy != engine.ValueOnly || upd.EvictionPolicy != engine.FullEviction {
		t.Errorf("UpdateSettings returned %s → %s, want valueOnly → fullEviction", old.EvictionPolicy, upd.EvictionPolicy)
	}
	nb, err := eng.Bucket("r")
	if err != nil {
		t.Fatal(err)
	}
	if nb == b || b.Reopened() != nb {
		t.Fatalf("after the restart the engine holds %p, the old bucket's Reopened %p, want a new bucket found by both", nb, b.Reopened())
	}
	if _, err := c.Get(ctx, "k001"); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("read through the old bucket: %v, want ErrClosed", err)
	}
	check(nb, engine.FullEviction)
	svc.mu.Lock()
	want := []string{"attach r valueOnly", "detach r deleted=false", "attach r fullEviction"}
	if fmt.Sprint(svc.events) != fmt.Sprint(want) || svc.last != nb {
		t.Errorf("service saw %q, want %q, ending on the new bucket", svc.events, want)
	}
	svc.mu.Unlock()

	// A write after the restart, then back to valueOnly.
	if _, err := nb.DefaultCollection().Upsert(ctx, "k001", []byte(`{"n":1}`), nil); err != nil {
		t.Fatal(err)
	}
	seqs = nb.HighSeqnos()
	if _, _, err := nb.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.EvictionPolicy = engine.ValueOnly; return nil }); err != nil {
		t.Fatal(err)
	}
	if b.Reopened() == nb || b.Reopened() == nil {
		t.Error("Reopened of the first bucket does not follow the second restart")
	}
	nb2, err := eng.Bucket("r")
	if err != nil {
		t.Fatal(err)
	}
	check(nb2, engine.ValueOnly)

	// A change of another setting alone restarts nothing.
	if _, _, err := nb2.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.MaxTTL = 60; return nil }); err != nil {
		t.Fatal(err)
	}
	if nb2.Reopened() != nil {
		t.Error("a change of maxTTL restarted the bucket")
	}
	if _, _, err := nb2.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.EvictionPolicy = engine.FullEviction; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	eng2, _ := newEngine(t, dir)
	rb, err := eng2.Bucket("r")
	if err != nil {
		t.Fatal(err)
	}
	check(rb, engine.FullEviction)
	if got := rb.Settings().MaxTTL; got != 60 {
		t.Errorf("maxTTL %d after the engine's restart, want 60", got)
	}
}
