package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// A read on the leader of a document in a collection with idleTTL slides
// its expiration on every replica, as one replicated write: the same
// sequence number and expiration everywhere, the CAS and revision kept (a
// CAS taken before the read still replaces it); a read on a follower
// proposes nothing.
func TestReplicatedSlidingExpiry(t *testing.T) {
	ctx := context.Background()
	bs, r, clks := replicaClocks(t, 2)
	followers(bs)
	cols := make([]*engine.Collection, len(bs))
	for i, b := range bs {
		if err := b.CreateScope(ctx, "s"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.CreateCollectionWith(ctx, "s", "c", engine.CollectionSettings{IdleTTL: 100}); err != nil {
			t.Fatal(err)
		}
		c, err := b.Collection("s", "c")
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = c
	}
	w, err := cols[0].Upsert(ctx, "k", []byte(`{"v":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	part := int(w.Partition)
	countsEverywhere(t, bs, 1)
	start := clks[0].Now()
	advanceAll(clks, 40)

	if _, err := cols[1].Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // a proposal the follower's read might make
	r.mu.Lock()
	logged := len(r.log[part])
	r.mu.Unlock()
	if logged != 1 {
		t.Fatalf("partition %d's log has %d entries after the follower's read", part, logged)
	}

	if _, err := cols[0].Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	want := start + 40 + 100
	deadline := time.Now().Add(30 * time.Second) // wall clock: a hang's deadline in a test
	for {
		d, err := cols[1].Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if d.Expiration == want {
			break
		}
		if time.Now().After(deadline) { // wall clock: a hang's deadline in a test
			t.Fatalf("the follower's copy expires at %d, want %d (slid by the leader's read)", d.Expiration, want)
		}
		time.Sleep(time.Millisecond)
	}
	if n := bs[0].Stats().SlidingExtends; n != 1 {
		t.Fatalf("ep_sliding_extends on the leader: %d", n)
	}
	for i, c := range cols {
		d, err := c.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if d.CAS != w.CAS || d.RevSeq != w.RevSeq || d.Expiration != want || d.Seq <= w.Seq {
			t.Fatalf("replica %d: %+v; want the write's CAS %d and revision %d, expiration %d, a later seqno than %d",
				i, d, w.CAS, w.RevSeq, want, w.Seq)
		}
	}
	r.mu.Lock()
	last := r.log[part][len(r.log[part])-1].index
	r.mu.Unlock()
	for i, c := range cols {
		if d, _ := c.Get(ctx, "k"); d.Seq != last {
			t.Fatalf("replica %d: seqno %d, the extension's log index %d", i, d.Seq, last)
		}
	}
	if _, err := cols[0].Replace(ctx, "k", []byte(`{"v":2}`), &engine.WriteOptions{CAS: w.CAS}); err != nil {
		t.Fatalf("replace with the CAS read before the extension: %v", err)
	}
}
