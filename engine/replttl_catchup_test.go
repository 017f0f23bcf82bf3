package engine_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// A node applies a manifest before the partition's leader does (each node
// applies the cluster's manifest at its own pace); the leader, still under
// the old settings, writes k; then leadership moves to that node before the
// old leader's pass reaches k. The new leader's catch-up must re-evaluate
// k: it was written under the old settings, although its sequence number
// is above the partition's at the new leader's pass start.
func TestReplicatedReevaluationCatchUpOldSettingsWriteAfterBase(t *testing.T) {
	ctx := context.Background()
	bs, r, clks, m, cols := ttlReplicasCatchingUp(t, 10*time.Millisecond)
	advanceAll(clks, 10)
	ci, err := m.UpdateCollection("s", "c", nowOf(bs), func(cs *engine.CollectionSettings) error {
		cs.DefaultTTL = 100
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Replica 1 applies the new settings first.
	applyTTL(t, m, ci.ID, bs[1])
	// The leader, not yet under them, writes k with no expiration.
	w, err := cols[0].Upsert(ctx, "k", []byte(`{"v":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if w.Expiration != 0 {
		t.Fatalf("the leader under the old settings wrote expiration %d", w.Expiration)
	}
	// The leader loses its leadership as it applies them: its pass
	// proposes nothing.
	r.mu.Lock()
	r.refuse = true
	r.mu.Unlock()
	applyTTL(t, m, ci.ID, bs[0], bs[2])
	// Replica 1 leads every partition now; its catch-up does them all.
	catchUpAsLeader(t, r, bs, 1, ci.ID)
	d, err := peekSame(cols, "k")
	if err != nil {
		t.Fatal(err)
	}
	if want := w.TS + 100; d.Expiration != want {
		t.Fatalf("k expires at %d after the new leader's catch-up, want %d (defaultTTL 100 from its write); seq %d, written at seq %d", d.Expiration, want, d.Seq, w.Seq)
	}
}

// The leader applies idleTTL first and re-writes k; replica 1 applies the
// same manifest 30 s later (after k's touch reached it), then comes to
// lead. Its catch-up must propose nothing for k ("a partition another
// node already did thus costs its new leader a scan and proposes
// nothing"): k is idle and already has the expiration of an on-time pass.
func TestReplicatedReevaluationCatchUpRedoesAnotherNodesSlidingPass(t *testing.T) {
	ctx := context.Background()
	bs, r, clks, m, cols := ttlReplicasCatchingUp(t, 10*time.Millisecond)
	if _, err := cols[0].Upsert(ctx, "k", []byte(`{"v":1}`), nil); err != nil {
		t.Fatal(err)
	}
	advanceAll(clks, 10)
	ci, err := m.UpdateCollection("s", "c", nowOf(bs), func(cs *engine.CollectionSettings) error {
		cs.IdleTTL = 1000
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ns := applyTTL(t, m, ci.ID, bs[0]); ns[0] != 1 {
		t.Fatalf("the leader's pass re-wrote %d documents, want 1", ns[0])
	}
	done, err := peekSame(cols, "k")
	if err != nil {
		t.Fatal(err)
	}
	advanceAll(clks, 30)
	applyTTL(t, m, ci.ID, bs[1:]...)
	catchUpAsLeader(t, r, bs, 1, ci.ID)
	d, err := peekSame(cols, "k")
	if err != nil {
		t.Fatal(err)
	}
	if d.Seq != done.Seq || d.CAS != done.CAS || d.Expiration != done.Expiration {
		t.Fatalf("the catch-up re-wrote k the leader had done: now exp %d CAS %d seq %d, was exp %d CAS %d seq %d (caught up %d)",
			d.Expiration, d.CAS, d.Seq, done.Expiration, done.CAS, done.Seq, engine.TTLCaughtUp(bs[1], ci.ID))
	}
}

// A read that saw a document live just before a late catch-up's touch
// keeps its extension: the catch-up counts idleTTL from the change, the
// read's slide is decided again on the touch, from the read.
func TestReplicatedSlideAfterACatchUpTouch(t *testing.T) {
	ctx := context.Background()
	bs, r, clks, m, cols := ttlReplicasCatchingUp(t, 10*time.Millisecond)
	if _, err := cols[0].Upsert(ctx, "k", []byte(`{"v":1}`), nil); err != nil {
		t.Fatal(err)
	}
	read, err := peekSame(cols, "k")
	if err != nil {
		t.Fatal(err)
	}
	advanceAll(clks, 10)
	changed := clks[0].Now()
	setTTLLeaderless(t, r, &m, func(cs *engine.CollectionSettings) { cs.IdleTTL = 1000 }, bs...)
	// Ten minutes later the partitions have a leader again; its catch-up
	// touches k with the expiration an on-time pass would have given it.
	advanceAll(clks, 600)
	r.mu.Lock()
	r.refuse = false
	r.mu.Unlock()
	waitExpiration(t, cols, "k", changed+1000)
	// The read that saw k just before the touch slides it from now.
	engine.SlideAsRead(cols[0], "k", read)
	waitExpiration(t, cols, "k", clks[0].Now()+1000)
}

// A partition whose proposals keep failing holds up only itself: a
// catch-up goes on to the other partitions it leads, and finishes the
// failing one once its proposals go through again.
func TestReplicatedCatchUpGoesPastAFailingPartition(t *testing.T) {
	ctx := context.Background()
	bs, r, _, m, cols := ttlReplicasCatchingUp(t, 10*time.Millisecond)
	// Forty keys in partition 0, the first a pass goes through (more than
	// it proposes at once), and a hundred in others.
	var keys []string
	first, in0 := 0, 0
	for i := 0; len(keys) < 140; i++ {
		k := fmt.Sprintf("k%06d", i)
		if bs[0].PartitionOf(k) == first {
			if in0 == 40 {
				continue
			}
			in0++
		} else if len(keys)-in0 == 100 {
			continue
		}
		keys = append(keys, k)
		w, err := cols[0].Upsert(ctx, k, []byte(`{"v":1}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if w.Expiration != 0 {
			t.Fatalf("%s written with expiration %d", k, w.Expiration)
		}
	}
	setTTLLeaderless(t, r, &m, func(cs *engine.CollectionSettings) { cs.DefaultTTL = 100 }, bs...)
	r.mu.Lock()
	r.refuse = false
	r.failPart = map[int]error{first: fmt.Errorf("%w: this group's leader is busy", engine.ErrTempFail)}
	r.mu.Unlock()
	var held []string
	for _, k := range keys {
		if bs[0].PartitionOf(k) == first {
			held = append(held, k)
			continue
		}
		// The catch-up runs meanwhile, so the replicas may differ for
		// a moment; the write's time is the same on each.
		d, err := cols[0].Peek(k)
		if err != nil {
			t.Fatal(err)
		}
		waitExpiration(t, cols, k, d.TS+100)
	}
	for _, k := range held {
		if d, err := peekSame(cols, k); err != nil || d.Expiration != 0 {
			t.Fatalf("%s in the failing partition: %+v, %v", k, d, err)
		}
	}
	r.mu.Lock()
	r.failPart = nil
	r.mu.Unlock()
	for _, k := range held {
		// The catch-up runs meanwhile, so the replicas may differ for
		// a moment; the write's time is the same on each.
		d, err := cols[0].Peek(k)
		if err != nil {
			t.Fatal(err)
		}
		waitExpiration(t, cols, k, d.TS+100)
	}
}

// catchUpAsLeader moves the leadership of every partition from r's node to
// replica i (r refuses from now on, as a node that lost them; replica i
// proposes on the same logs) and waits until i's catch-up of collection
// cid has finished: i leads them all, so it stops once it has done them.
func catchUpAsLeader(t *testing.T, r *logReplicator, bs []*engine.Bucket, i int, cid engine.CollectionID) {
	t.Helper()
	r.mu.Lock()
	r.refuse = true
	next, log := maps.Clone(r.next), maps.Clone(r.log)
	r.mu.Unlock()
	bs[i].SetReplicator(&logReplicator{replicas: bs, leader: i, next: next, log: log})
	select {
	case <-engine.TTLPassExited(bs[i], cid):
	case <-time.After(time.Minute): // a test's patience
		t.Fatalf("replica %d's catch-up never finished", i)
	}
}
