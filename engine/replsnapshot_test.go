package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// partitionKeys returns n keys of b's partition part (k0, k1, … in order).
func partitionKeys(b *engine.Bucket, part, n int) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := fmt.Sprintf("k%d", i); b.PartitionOf(k) == part {
			keys = append(keys, k)
		}
	}
	return keys
}

// sameVersion checks that replica got holds key as want does: the same
// live version (value, flags, expiration, CAS, revision, sequence number)
// or the same tombstone (CAS, revision, sequence number), or neither.
func sameVersion(t *testing.T, want, got *engine.Bucket, key string) {
	t.Helper()
	ctx := context.Background()
	read := func(b *engine.Bucket) (*engine.Document, string) {
		c := b.DefaultCollection()
		if d, err := c.Get(ctx, key); err == nil {
			return d, "live"
		} else if !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("%q: %v", key, err)
		}
		if d, err := c.Tombstone(key); err == nil {
			return d, "tombstone"
		} else if !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("%q: %v", key, err)
		}
		return nil, "none"
	}
	w, wk := read(want)
	g, gk := read(got)
	if wk != gk {
		t.Fatalf("%q: %s, want %s", key, gk, wk)
	}
	if w == nil {
		return
	}
	if g.CAS != w.CAS || g.Seq != w.Seq || g.RevSeq != w.RevSeq || !bytes.Equal(g.Value, w.Value) ||
		g.Flags != w.Flags || g.Expiration != w.Expiration || g.Deleted != w.Deleted {
		t.Fatalf("%q: %+v, want %+v", key, g, w)
	}
}

// A fullEviction partition whose items left memory whole is snapshotted
// whole (every key, tombstones included, with its CAS, sequence number and
// revision) and restores into a fresh bucket identically: the restored
// partition's own snapshot is the same bytes.
func TestReplicatedSnapshotItemsOutOfMemory(t *testing.T) {
	ctx := context.Background()
	s := engine.BucketSettings{Name: "b", Type: engine.Couchbase, EvictionPolicy: engine.FullEviction}
	bs, _, clks := replicaBuckets(t, 1, s)
	clk := clks[0]
	leader := bs[0]
	c := leader.DefaultCollection()
	const part = 5
	keys := partitionKeys(leader, part, 40)
	for i, k := range keys {
		o := &engine.WriteOptions{Flags: uint32(i)}
		if i%4 == 0 {
			o.Expiry = 1000
		}
		if _, err := c.Upsert(ctx, k, fmt.Appendf(nil, `{"n":%d}`, i), o); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(3)
	for i, k := range keys {
		var err error
		switch i % 5 {
		case 1:
			_, err = c.Delete(ctx, k, nil)
		case 2:
			_, err = c.Upsert(ctx, k, []byte(`"again"`), nil)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := leader.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := engine.EvictItems(leader); n < len(keys)/2 {
		t.Fatalf("%d of %d items left memory", n, len(keys))
	}
	snap, err := leader.ReplicatedSnapshot(part)
	if err != nil {
		t.Fatalf("a snapshot of a partition whose items left memory: %v", err)
	}

	eng, _ := newEngine(t, t.TempDir())
	fresh, err := eng.CreateBucket(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.ReplicatedRestore(ctx, part, snap); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		sameVersion(t, leader, fresh, k)
	}
	if got, want := fresh.ReplicatedDurable(part), leader.ReplicatedDurable(part); got != want {
		t.Fatalf("restored at %d, the leader at %d", got, want)
	}
	if got, want := fresh.Stats().CurrItems, leader.Stats().CurrItems; got != want {
		t.Fatalf("restored curr_items %d, the leader's %d", got, want)
	}
	again, err := fresh.ReplicatedSnapshot(part)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, snap) {
		t.Fatalf("the restored partition's snapshot (%d bytes) differs from the one it restored (%d bytes)", len(again), len(snap))
	}
}

// A replica that missed a key's deletion, whose tombstone the leader then
// purged, restores a snapshot that lacks the key: the key is deleted there
// through the write path (its change feed shows the deletion), at a
// sequence number of its own between the replica's old position and the
// snapshot's, above which the log goes on. An old snapshot (no position)
// still restores, deleting nothing. The same with every item out of memory
// on both sides (fullEviction).
func TestReplicatedRestoreDeletesKeysSnapshotLacks(t *testing.T) {
	for _, policy := range []engine.EvictionPolicy{engine.ValueOnly, engine.FullEviction} {
		t.Run(string(policy), func(t *testing.T) { testRestoreDeletes(t, policy) })
	}
}

func testRestoreDeletes(t *testing.T, policy engine.EvictionPolicy) {
	ctx := context.Background()
	bs, r, clks := replicaBuckets(t, 2, engine.BucketSettings{Name: "b", Type: engine.Couchbase, EvictionPolicy: policy})
	clk := clks[0]
	leader, behind := bs[0], bs[1]
	c := leader.DefaultCollection()
	const part = 7
	keys := partitionKeys(leader, part, 6)
	for _, k := range keys {
		if _, err := c.Upsert(ctx, k, []byte(`1`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := behind.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	from := behind.ReplicatedDurable(part)
	_, feedPos, err := behind.Changes(nil, 0)
	if err != nil {
		t.Fatal(err)
	}

	// The replica misses what follows: two deletions (whose tombstones the
	// leader purges), a new key, an update, and a key deleted and written again.
	r.mu.Lock()
	r.replicas = bs[:1]
	r.mu.Unlock()
	gone := keys[:2]
	for _, k := range append(slices.Clone(gone), keys[4]) {
		if _, err := c.Delete(ctx, k, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{keys[2], keys[4], partitionKeys(leader, part, 7)[6]} {
		if _, err := c.Upsert(ctx, k, []byte(`2`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := leader.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10)
	if n, _, err := leader.PurgeTombstones(ctx, t0+5, 100); err != nil || n != 2 {
		t.Fatalf("the leader purged %d tombstones: %v", n, err)
	}
	for _, k := range gone {
		if _, err := c.Tombstone(k); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("%q: the leader still holds its tombstone: %v", k, err)
		}
	}
	if policy == engine.FullEviction {
		for _, b := range bs {
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if n := engine.EvictItems(b); n == 0 {
				t.Fatal("no item left memory")
			}
		}
	}
	snap, err := leader.ReplicatedSnapshot(part)
	if err != nil {
		t.Fatal(err)
	}
	pos := leader.ReplicatedDurable(part) // the snapshot's position

	if err := behind.ReplicatedRestore(ctx, part, snap); err != nil {
		t.Fatal(err)
	}
	bc := behind.DefaultCollection()
	seqs := map[uint64]string{}
	for _, k := range gone {
		if _, err := bc.Get(ctx, k); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("%q, deleted on the leader, after the restore: %v", k, err)
		}
		d, err := bc.Tombstone(k)
		if err != nil {
			t.Fatalf("%q: no tombstone after the restore: %v", k, err)
		}
		if d.Seq <= from || d.Seq > pos {
			t.Fatalf("%q deleted at %d, outside (%d, %d]", k, d.Seq, from, pos)
		}
		seqs[d.Seq] = k
	}
	for _, k := range append(slices.Clone(keys[2:]), partitionKeys(leader, part, 7)[6]) {
		sameVersion(t, leader, behind, k)
		if d, err := bc.Get(ctx, k); err == nil {
			if other, ok := seqs[d.Seq]; ok {
				t.Fatalf("%q and %q both at sequence number %d", k, other, d.Seq)
			}
			seqs[d.Seq] = k
		}
	}
	if len(seqs) != len(gone)+len(keys)-2+1 {
		t.Fatalf("sequence numbers %v", seqs)
	}
	if err := behind.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := behind.Stats().CurrItems, leader.Stats().CurrItems; got != want {
		t.Fatalf("curr_items %d after the restore, the leader's %d", got, want)
	}
	// The replica's change feed shows the deletions.
	docs, _, err := behind.Changes(feedPos, 0)
	if err != nil {
		t.Fatal(err)
	}
	deleted := map[string]bool{}
	for _, d := range docs {
		if d.Deleted {
			deleted[d.Key] = true
		}
	}
	for _, k := range gone {
		if !deleted[k] {
			t.Fatalf("the change feed after the restore does not show %q deleted: %v", k, deleted)
		}
	}

	// An old snapshot (format 1, no position) restores what it holds and
	// deletes nothing.
	_, n := binary.Uvarint(snap[1:])
	old := append([]byte{1}, snap[1+n:]...)
	oldReplica := newReplicaFrom(t, r, part, from)
	if err := oldReplica.ReplicatedRestore(ctx, part, old); err != nil {
		t.Fatalf("an old snapshot: %v", err)
	}
	if _, err := oldReplica.DefaultCollection().Get(ctx, gone[0]); err != nil {
		t.Fatalf("an old snapshot deleted %q: %v", gone[0], err)
	}
	sameVersion(t, leader, oldReplica, keys[2])

	// The log goes on above the snapshot on both.
	r.mu.Lock()
	r.replicas = bs
	r.mu.Unlock()
	for _, k := range append(slices.Clone(gone), keys[3]) {
		if _, err := c.Upsert(ctx, k, []byte(`3`), nil); err != nil {
			t.Fatal(err)
		}
		if d := sameEverywhere(t, bs, k); d.Seq <= pos {
			t.Fatalf("%q written at %d after a snapshot at %d", k, d.Seq, pos)
		}
	}
}

// newReplicaFrom opens a bucket that applied partition part's log of r up
// to index upTo, as a replica that stopped there.
func newReplicaFrom(t *testing.T, r *logReplicator, part int, upTo uint64) *engine.Bucket {
	t.Helper()
	ctx := context.Background()
	eng, _ := newEngine(t, t.TempDir())
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	log := slices.Clone(r.log[part])
	r.mu.Unlock()
	for _, e := range log {
		if e.index > upTo {
			break
		}
		if _, err := b.ApplyReplicated(part, e.index, e.data); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// A snapshot of an unknown format, cut short, or whose versions pass its
// position is refused (ErrInvalidOp) and changes nothing.
func TestReplicatedRestoreRefusesMalformedSnapshot(t *testing.T) {
	ctx := context.Background()
	bs, _, _ := replicas(t, 1)
	const part = 2
	keys := partitionKeys(bs[0], part, 3)
	for _, k := range keys {
		if _, err := bs[0].DefaultCollection().Upsert(ctx, k, []byte(`1`), nil); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := bs[0].ReplicatedSnapshot(part)
	if err != nil {
		t.Fatal(err)
	}
	_, n := binary.Uvarint(snap[1:])
	early := append(binary.AppendUvarint([]byte{snap[0]}, 1), snap[1+n:]...) // a position below its versions
	for what, data := range map[string][]byte{
		"unknown format": append([]byte{9}, snap[1:]...),
		"cut short":      snap[:len(snap)-1],
		"trailing bytes": append(slices.Clone(snap), 0),
		"early position": early,
		"empty":          nil,
	} {
		eng, _ := newEngine(t, t.TempDir())
		b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.ReplicatedRestore(ctx, part, data); !errors.Is(err, engine.ErrInvalidOp) {
			t.Errorf("%s: %v", what, err)
		}
		if n := b.Stats().CurrItems; n != 0 || b.ReplicatedDurable(part) != 0 {
			t.Errorf("%s: a refused snapshot left %d items, position %d", what, n, b.ReplicatedDurable(part))
		}
	}
}
