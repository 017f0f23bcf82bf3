package engine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// confirmingReplicator is a logReplicator with a read index: confirm runs
// at each ConfirmRead.
type confirmingReplicator struct {
	*logReplicator
	confirm func(part int) error
	calls   int
}

func (c *confirmingReplicator) ConfirmRead(_ context.Context, part int) error {
	c.calls++
	return c.confirm(part)
}

// TestRefusedWriteIsConfirmed: a write the document refuses (a CAS
// mismatch, an insert over a live key, a delete of a missing one) is a
// read of the leader's copy. A leader whose copy is behind the group's
// log (deposed without knowing it, or catching up) must not answer it
// from that copy: it confirms its leadership first (the read index, which
// also brings its copy up to the log), then decides again. A refusal the
// confirmation does not take back is answered; one that fails to confirm
// answers the confirmation's error; a write that succeeds confirms nothing.
func TestRefusedWriteIsConfirmed(t *testing.T) {
	ctx := context.Background()
	bs, r0, _ := replicas(t, 2)
	stale, current := bs[0], bs[1]
	v1, err := stale.DefaultCollection().Upsert(ctx, "k", []byte(`{"v":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Another leader commits v2, which the stale node has not applied.
	r1 := &logReplicator{replicas: []*engine.Bucket{current}, next: maps.Clone(r0.next), log: map[int][]logEntry{}}
	current.SetReplicator(r1)
	v2, err := current.DefaultCollection().Upsert(ctx, "k", []byte(`{"v":2}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	catchUp := func(part int) error {
		for _, e := range r1.log[part] {
			if _, err := stale.ApplyReplicated(part, e.index, e.data); err != nil {
				return err
			}
		}
		r0.mu.Lock()
		r0.next[part] = max(r0.next[part], r1.next[part])
		r0.mu.Unlock()
		return nil
	}
	cr := &confirmingReplicator{logReplicator: r0, confirm: catchUp}
	stale.SetReplicator(cr)

	// A CAS of the committed v2: refused by the stale copy (v1), so
	// confirmed, and then taken.
	v3, err := stale.DefaultCollection().Replace(ctx, "k", []byte(`{"v":3}`), &engine.WriteOptions{CAS: v2.CAS})
	if err != nil {
		t.Fatalf("replace with the committed version's CAS on a node behind the log: %v (v1's CAS %d, v2's %d)", err, v1.CAS, v2.CAS)
	}
	if cr.calls != 1 {
		t.Fatalf("the refused write confirmed %d times, want 1", cr.calls)
	}
	if got := sameEverywhere(t, bs, "k"); got.CAS != v3.CAS || string(got.Value) != `{"v":3}` {
		t.Fatalf("k is %s (CAS %d) after the replace, want v3 (CAS %d)", got.Value, got.CAS, v3.CAS)
	}

	// A refusal the confirmation does not take back is answered.
	cr.calls = 0
	if _, err := stale.DefaultCollection().Replace(ctx, "k", []byte(`{"v":4}`), &engine.WriteOptions{CAS: v1.CAS}); !errors.Is(err, engine.ErrCASMismatch) {
		t.Fatalf("replace with an old CAS: %v, want ErrCASMismatch", err)
	}
	if _, err := stale.DefaultCollection().Insert(ctx, "k", []byte(`{"v":5}`), nil); !errors.Is(err, engine.ErrKeyExists) {
		t.Fatalf("insert over a live key: %v, want ErrKeyExists", err)
	}
	if cr.calls != 2 {
		t.Fatalf("two refused writes confirmed %d times, want 2", cr.calls)
	}

	// One that cannot be confirmed answers why, not the refusal.
	cr.confirm = func(part int) error {
		return fmt.Errorf("%w: partition %d is led elsewhere", engine.ErrNotMyVBucket, part)
	}
	if _, err := stale.DefaultCollection().Replace(ctx, "k", []byte(`{"v":6}`), &engine.WriteOptions{CAS: v1.CAS}); !errors.Is(err, engine.ErrNotMyVBucket) {
		t.Fatalf("a refused write whose leadership cannot be confirmed: %v, want ErrNotMyVBucket", err)
	}

	// A write the document takes confirms nothing.
	cr.calls = 0
	if _, err := stale.DefaultCollection().Upsert(ctx, "k2", []byte(`{"v":1}`), nil); err != nil {
		t.Fatal(err)
	}
	if cr.calls != 0 {
		t.Fatalf("a write taken confirmed %d times, want 0", cr.calls)
	}
}
