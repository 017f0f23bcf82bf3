package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// followers makes every replica but the first one a node that leads none
// of the partitions (its writes, and expirations, are refused), as serve
// wires a bucket on a node that does not lead.
func followers(bs []*engine.Bucket) {
	for _, b := range bs[1:] {
		b.SetReplicator(&logReplicator{refuse: true})
	}
}

// advanceAll moves every replica's clock by sec seconds.
func advanceAll(clks []*engine.FakeClock, sec int64) {
	for _, c := range clks {
		c.Advance(sec)
	}
}

// countsEverywhere checks each replica's curr_items.
func countsEverywhere(t *testing.T, bs []*engine.Bucket, want int64) {
	t.Helper()
	for i, b := range bs {
		if err := b.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := b.Stats().CurrItems; got != want {
			t.Fatalf("replica %d: curr_items %d, want %d", i, got, want)
		}
	}
}

// sameTombstone checks that every replica holds key's expiration with the
// same sequence number, CAS and revision, and returns it.
func sameTombstone(t *testing.T, bs []*engine.Bucket, key string) *engine.Document {
	t.Helper()
	var want *engine.Document
	for i, b := range bs {
		d, err := b.DefaultCollection().Tombstone(key)
		if err != nil {
			t.Fatalf("%q on replica %d: %v", key, i, err)
		}
		if !d.Expired {
			t.Fatalf("%q on replica %d: deleted, not expired: %+v", key, i, d)
		}
		if want == nil {
			want = d
			continue
		}
		if d.Seq != want.Seq || d.CAS != want.CAS || d.RevSeq != want.RevSeq || d.DeletedAt != want.DeletedAt {
			t.Fatalf("%q: replica %d has %+v, the leader %+v", key, i, d, want)
		}
	}
	return want
}

// The pager of a partition's leader expires its due documents on every
// replica alike (the same sequence number, the log index, and CAS; every
// replica's curr_items drops), counting them in ep_expired_pager where it
// ran; a follower's pager expires nothing, though the documents are due
// on its clock too.
func TestReplicatedPagerExpiresOnEveryReplica(t *testing.T) {
	ctx := context.Background()
	bs, r, clks := replicaClocks(t, 3)
	followers(bs)
	c := bs[0].DefaultCollection()
	const due = 150 // more than one batch, more than one round of proposals in flight
	for i := range due {
		if _, err := c.Upsert(ctx, fmt.Sprintf("e%03d", i), []byte(`{}`), &engine.WriteOptions{Expiry: 5}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Upsert(ctx, "later", []byte(`{}`), &engine.WriteOptions{Expiry: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upsert(ctx, "kept", []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	advanceAll(clks, 10)

	before := len(r.log)
	entries := 0
	for _, l := range r.log {
		entries += len(l)
	}
	for i, b := range bs[1:] {
		if n, more, err := b.ExpireBatch(ctx, 1000); err != nil || n != 0 || more {
			t.Fatalf("follower %d's pager: %d (more %v), %v", i+1, n, more, err)
		}
	}
	after := 0
	for _, l := range r.log {
		after += len(l)
	}
	if after != entries || len(r.log) != before {
		t.Fatalf("a follower's pager proposed %d entries", after-entries)
	}
	countsEverywhere(t, bs, due+2)

	total := 0
	for {
		n, more, err := bs[0].ExpireBatch(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		total += n
		if !more {
			break
		}
	}
	if total != due {
		t.Fatalf("the leader's pager expired %d, want %d", total, due)
	}
	countsEverywhere(t, bs, 2)
	for i, b := range bs {
		if err := b.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if i == 0 {
			want = due
		}
		if got := b.Stats().ExpiredPager; got != want {
			t.Fatalf("replica %d: ep_expired_pager %d, want %d", i, got, want)
		}
	}
	for i := range due {
		k := fmt.Sprintf("e%03d", i)
		d := sameTombstone(t, bs, k)
		part := int(d.Partition)
		found := false
		for _, e := range r.log[part] {
			found = found || e.index == d.Seq
		}
		if !found {
			t.Fatalf("%q expired at sequence number %d, no index of partition %d's log", k, d.Seq, part)
		}
	}
	for _, k := range []string{"later", "kept"} {
		sameEverywhere(t, bs, k)
	}
	if n, more, err := bs[0].ExpireBatch(ctx, 100); err != nil || n != 0 || more {
		t.Fatalf("a second run: %d (more %v), %v", n, more, err)
	}
}

// A document written between the pager's decision to expire it and the
// expiration's apply keeps the new write, on every replica; the
// expiration is not counted.
func TestReplicatedExpirationOvertakenByWrite(t *testing.T) {
	ctx := context.Background()
	bs, r, clks := replicaClocks(t, 2)
	followers(bs)
	c := bs[0].DefaultCollection()
	if _, err := c.Upsert(ctx, "e", []byte(`1`), &engine.WriteOptions{Expiry: 5}); err != nil {
		t.Fatal(err)
	}
	countsEverywhere(t, bs, 1) // committed: in the expiry index
	advanceAll(clks, 10)
	r.mu.Lock()
	r.beforeApply = func() {
		if _, err := c.Upsert(ctx, "e", []byte(`2`), nil); err != nil {
			t.Error(err)
		}
	}
	r.mu.Unlock()
	if n, _, err := bs[0].ExpireBatch(ctx, 100); err != nil || n != 0 {
		t.Fatalf("pager: expired %d, %v", n, err)
	}
	if d, err := c.Get(ctx, "e"); err != nil {
		t.Fatalf("the rewritten document: %v", err)
	} else if string(d.Value) != "2" || d.Expiration != 0 {
		t.Fatalf("the rewritten document: %+v", d)
	}
	sameEverywhere(t, bs, "e")
	countsEverywhere(t, bs, 1)
	if got := bs[0].Stats().ExpiredPager; got != 0 {
		t.Fatalf("ep_expired_pager %d for an expiration that did not apply", got)
	}
}

// A read of an expired document on the partition's leader answers
// not-found and queues its expiration, which reaches every replica; on a
// follower it answers not-found and proposes nothing.
func TestReplicatedExpiredReadExpiresOnLeaderOnly(t *testing.T) {
	ctx := context.Background()
	bs, r, clks := replicaClocks(t, 2)
	followers(bs)
	c := bs[0].DefaultCollection()
	d, err := c.Upsert(ctx, "e", []byte(`{}`), &engine.WriteOptions{Expiry: 5})
	if err != nil {
		t.Fatal(err)
	}
	part := int(d.Partition)
	countsEverywhere(t, bs, 1) // committed: a pending version is left to its commit
	advanceAll(clks, 10)
	if _, err := bs[1].DefaultCollection().Get(ctx, "e"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("expired read on the follower: %v", err)
	}
	// The follower's read proposed nothing: the leader's pager still
	// finds the document due.
	if _, err := bs[1].DefaultCollection().Tombstone("e"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the follower's read expired the document: %v", err)
	}
	r.mu.Lock()
	logged := len(r.log[part])
	r.mu.Unlock()
	if logged != 1 {
		t.Fatalf("partition %d's log has %d entries after the follower's read", part, logged)
	}

	if _, err := c.Get(ctx, "e"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("expired read on the leader: %v", err)
	}
	// The read does not wait for its expiration: wait for it (the
	// deadline only catches a hang).
	deadline := time.Now().Add(30 * time.Second) // wall clock: a hang's deadline in a test
	for bs[1].Stats().CurrItems != 0 || bs[0].Stats().ExpiredAccess != 1 {
		if time.Now().After(deadline) { // wall clock: a hang's deadline in a test
			t.Fatalf("the leader's read did not expire the document: curr_items %d, expired on access %d",
				bs[1].Stats().CurrItems, bs[0].Stats().ExpiredAccess)
		}
		time.Sleep(time.Millisecond)
	}
	countsEverywhere(t, bs, 0)
	sameTombstone(t, bs, "e")
	if n, _, err := bs[0].ExpireBatch(ctx, 100); err != nil || n != 0 {
		t.Fatalf("pager after the read's expiration: %d, %v", n, err)
	}
}

// A replica restored from a snapshot that holds the expiration of a
// document it still holds live drops it from its counts, as applying the
// expiration from the log does (engine.Check at close checks the counts
// against the documents).
func TestReplicatedRestoreOfExpiration(t *testing.T) {
	ctx := context.Background()
	bs, r, clks := replicaClocks(t, 2)
	followers(bs)
	c := bs[0].DefaultCollection()
	d, err := c.Upsert(ctx, "e", []byte(`{}`), &engine.WriteOptions{Expiry: 5})
	if err != nil {
		t.Fatal(err)
	}
	part := int(d.Partition)
	// A replica that applied the write and missed what followed.
	eng, _ := newEngine(t, t.TempDir())
	behind, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.log[part] {
		if _, err := behind.ApplyReplicated(part, e.index, e.data); err != nil {
			t.Fatal(err)
		}
	}
	countsEverywhere(t, append(bs, behind), 1)
	advanceAll(clks, 10)
	if n, _, err := bs[0].ExpireBatch(ctx, 100); err != nil || n != 1 {
		t.Fatalf("pager: %d, %v", n, err)
	}
	if err := bs[0].Sync(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := bs[0].ReplicatedSnapshot(part)
	if err != nil {
		t.Fatal(err)
	}
	if err := behind.ReplicatedRestore(ctx, part, snap); err != nil {
		t.Fatal(err)
	}
	countsEverywhere(t, append(bs, behind), 0)
	sameTombstone(t, append(bs, behind), "e")
}
