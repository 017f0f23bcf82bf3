package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// applyManifest applies m to every bucket of bs.
func applyManifest(t *testing.T, m engine.Manifest, bs ...*engine.Bucket) {
	t.Helper()
	for i, b := range bs {
		if err := b.ApplyManifest(context.Background(), m); err != nil {
			t.Fatalf("bucket %d: apply manifest %d: %v", i, m.UID, err)
		}
	}
}

// replayLog applies every entry of r's log above from[part] to b, partition
// by partition, and returns how many had a result that was not an applied
// version, by error (nil for none), and the last index of each partition.
func replayLog(t *testing.T, r *logReplicator, b *engine.Bucket, from map[int]uint64) (map[error]int, map[int]uint64) {
	t.Helper()
	errs := map[error]int{}
	last := map[int]uint64{}
	for part, ents := range r.log {
		for _, e := range ents {
			last[part] = e.index
			if e.index <= from[part] {
				continue
			}
			res, err := b.ApplyReplicated(part, e.index, e.data)
			if err != nil {
				t.Fatalf("partition %d index %d: %v", part, e.index, err)
			}
			switch {
			case res.Err == nil && res.Doc != nil:
			case errors.Is(res.Err, engine.ErrCollectionNotFound):
				errs[engine.ErrCollectionNotFound]++
			default:
				t.Fatalf("partition %d index %d: %+v", part, e.index, res)
			}
		}
	}
	return errs, last
}

// A replicated write to a collection the bucket dropped keeps nothing,
// whether its copy applied the drop after the write (the leader and a
// follower in step) or before it (a node that was down, or behind, and
// replays its log once the cluster's manifest reached it, or restores a
// partition snapshot taken before the drop): every copy ends with the same
// documents, counts and partition sequence numbers, and the returning
// copy's store holds its log position past those writes. A
// review found a node that applied the drop first kept the writes, as
// documents of a collection nobody could reach, counted in curr_items.
func TestReplicatedWritesToADroppedCollectionKeepNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		storage string
		typ     engine.BucketType
	}{
		{"pebble", engine.StoragePebble, engine.Couchbase},
		{"bolt", engine.StorageBolt, engine.Couchbase},
		{"ephemeral", engine.StoragePebble, engine.Ephemeral},
	} {
		t.Run(tc.name, func(t *testing.T) { droppedCollectionReplay(t, tc.storage, tc.typ) })
	}
}

// openStorage opens an engine on dir with the given store, closed (and
// checked) when the test ends.
func openStorage(t *testing.T, dir, storage string) *engine.Engine {
	t.Helper()
	eng, err := engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 64, NoSync: true, Storage: storage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeChecked(t, eng) })
	return eng
}

// droppedCollectionReplay is TestReplicatedWritesToADroppedCollectionKeepNothing
// on buckets of type typ in engines with the given store.
func droppedCollectionReplay(t *testing.T, storage string, typ engine.BucketType) {
	ctx := context.Background()
	s := engine.BucketSettings{Name: "b", Type: typ}
	var bs []*engine.Bucket
	for range 2 {
		b, err := openStorage(t, t.TempDir(), storage).CreateBucket(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	r := &logReplicator{replicas: bs}
	bs[0].SetReplicator(r)
	lateDir := t.TempDir()
	lateEng := openStorage(t, lateDir, storage)
	late, err := lateEng.CreateBucket(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	m := bs[0].Manifest()
	if err := m.CreateScope("s"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateCollection("s", "c", engine.CollectionSettings{}); err != nil {
		t.Fatal(err)
	}
	applyManifest(t, m, bs[0], bs[1], late)
	c, err := bs[0].Collection("s", "c")
	if err != nil {
		t.Fatal(err)
	}
	// Sets, deletes and touches of s.c, and a few documents of _default.
	const kept = 5
	for i := range 30 {
		if _, err := c.Upsert(ctx, fmt.Sprintf("k%d", i), []byte(`{"x":1}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if _, err := c.Delete(ctx, fmt.Sprintf("k%d", i), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Touch(ctx, fmt.Sprintf("k%d", 10+i), 3600); err != nil {
			t.Fatal(err)
		}
	}
	for i := range kept {
		if _, err := bs[0].DefaultCollection().Upsert(ctx, fmt.Sprintf("d%d", i), []byte(`{"n":1}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range bs {
		if got := b.Stats().CurrItems; got != kept+25 {
			t.Fatalf("replica %d before the drop: curr_items %d, want %d", i, got, kept+25)
		}
	}

	// Snapshots of every partition, taken before the drop, restored on a
	// copy that has the drop below.
	if err := bs[0].Sync(ctx); err != nil {
		t.Fatal(err)
	}
	snaps, snapSeqs := map[int][]byte{}, map[int]uint64{}
	for part := range r.log {
		if snaps[part], err = bs[0].ReplicatedSnapshot(part); err != nil {
			t.Fatal(err)
		}
		snapSeqs[part], _, _ = bs[0].PartitionSeqnos(part)
	}

	// The drop reaches the leader and its follower after the writes: it
	// takes the documents on both.
	m = bs[0].Manifest()
	if _, err := m.DropCollection("s", "c"); err != nil {
		t.Fatal(err)
	}
	applyManifest(t, m, bs[0], bs[1])
	for i, b := range bs {
		if st := b.Stats(); st.CurrItems != kept || st.Tombstones != 0 || st.WithExpiry != 0 {
			t.Fatalf("replica %d after the drop: curr_items %d, tombstones %d, with expiry %d; want %d, 0, 0",
				i, st.CurrItems, st.Tombstones, st.WithExpiry, kept)
		}
	}

	// The late copy learns of the drop first, then replays the log.
	applyManifest(t, m, late)
	errs, last := replayLog(t, r, late, nil)
	check := func(what string, b *engine.Bucket) {
		t.Helper()
		if st := b.Stats(); st.CurrItems != kept || st.Tombstones != 0 || st.WithExpiry != 0 {
			t.Fatalf("%s: curr_items %d, tombstones %d, with expiry %d; want %d, 0, 0",
				what, st.CurrItems, st.Tombstones, st.WithExpiry, kept)
		}
		if got := b.DefaultCollection().Count(); got != kept {
			t.Fatalf("%s: _default counts %d, want %d", what, got, kept)
		}
		for part, idx := range last {
			cur, _, err := b.PartitionSeqnos(part)
			lcur, _, _ := bs[0].PartitionSeqnos(part)
			if err != nil || cur != idx || cur != lcur {
				t.Fatalf("%s: partition %d at sequence number %d (%v), the leader at %d, its log at %d", what, part, cur, err, lcur, idx)
			}
			if got := b.ReplicatedDurable(part); got != idx {
				t.Fatalf("%s: partition %d durable at %d, its log at %d", what, part, got, idx)
			}
		}
	}
	if err := late.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	check("the late copy", late)
	if got := errs[engine.ErrCollectionNotFound]; got != 40 {
		t.Fatalf("%d entries of the dropped collection answered ErrCollectionNotFound, want 40 (%v)", got, errs)
	}

	// A copy restored from the snapshots after it applied the drop keeps
	// none of the collection's documents either.
	restored, err := openStorage(t, t.TempDir(), storage).CreateBucket(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	applyManifest(t, m, restored)
	for part, snap := range snaps {
		if err := restored.ReplicatedRestore(ctx, part, snap); err != nil {
			t.Fatal(err)
		}
		if cur, _, _ := restored.PartitionSeqnos(part); cur != snapSeqs[part] {
			t.Fatalf("restored: partition %d at sequence number %d, its snapshot at %d", part, cur, snapSeqs[part])
		}
	}
	if st := restored.Stats(); st.CurrItems != kept || st.Tombstones != 0 || st.WithExpiry != 0 {
		t.Fatalf("restored: curr_items %d, tombstones %d, with expiry %d; want %d, 0, 0",
			st.CurrItems, st.Tombstones, st.WithExpiry, kept)
	}

	if typ == engine.Ephemeral {
		return // nothing to reopen
	}

	// Reopened, the late copy holds the same, and its log position: a
	// replay from there applies nothing.
	closeChecked(t, lateEng)
	re, err := openStorage(t, lateDir, storage).Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	if err := re.WaitWarm(ctx); err != nil {
		t.Fatal(err)
	}
	check("the late copy reopened", re)
	from := map[int]uint64{}
	for part := range last {
		from[part] = re.ReplicatedDurable(part)
	}
	if errs, _ := replayLog(t, r, re, from); len(errs) != 0 {
		t.Fatalf("a replay from the durable position: %v", errs)
	}
}

// A replicated write to a collection ID above every one the bucket's
// manifest gave (created after the manifest this copy has) is kept, and
// readable once the manifest naming it arrives; if that manifest has it
// dropped already, its documents go with it. A review found such a
// collection's documents stayed (ApplyManifest dropped only the
// collections the bucket knew).
func TestReplicatedWritesToANewerCollectionWaitForTheManifest(t *testing.T) {
	ctx := context.Background()
	bs, r, _ := replicas(t, 2)
	behind, _ := newBucket(t, engine.Couchbase)
	m := bs[0].Manifest()
	if err := m.CreateScope("s"); err != nil {
		t.Fatal(err)
	}
	ci, err := m.CreateCollection("s", "c", engine.CollectionSettings{})
	if err != nil {
		t.Fatal(err)
	}
	applyManifest(t, m, bs[0], bs[1])
	c, err := bs[0].Collection("s", "c")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := c.Upsert(ctx, fmt.Sprintf("k%d", i), []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	// behind replays the writes before it has the manifest: kept.
	errs, last := replayLog(t, r, behind, nil)
	if len(errs) != 0 || behind.Stats().CurrItems != 10 {
		t.Fatalf("writes to collection %d, newer than the manifest: %v, curr_items %d, want 10", ci.ID, errs, behind.Stats().CurrItems)
	}
	applyManifest(t, m, behind)
	bc, err := behind.Collection("s", "c")
	if err != nil {
		t.Fatal(err)
	}
	if n := bc.Count(); n != 10 {
		t.Fatalf("s.c counts %d once its manifest arrived, want 10", n)
	}
	if d, err := bc.Get(ctx, "k3"); err != nil || string(d.Value) != `{}` {
		t.Fatalf("s.c's k3: %+v %v", d, err)
	}

	// s.c2 is created, written and dropped while behind's manifest lags:
	// its writes are kept until the manifest without it arrives.
	m = bs[0].Manifest()
	if _, err := m.CreateCollection("s", "c2", engine.CollectionSettings{}); err != nil {
		t.Fatal(err)
	}
	applyManifest(t, m, bs[0], bs[1])
	c2, err := bs[0].Collection("s", "c2")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := c2.Upsert(ctx, fmt.Sprintf("j%d", i), []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	m = bs[0].Manifest()
	if _, err := m.DropCollection("s", "c2"); err != nil {
		t.Fatal(err)
	}
	applyManifest(t, m, bs[0], bs[1])
	if errs, _ := replayLog(t, r, behind, last); len(errs) != 0 || behind.Stats().CurrItems != 14 {
		t.Fatalf("writes to s.c2, newer than the manifest: %v, curr_items %d, want 14", errs, behind.Stats().CurrItems)
	}
	applyManifest(t, m, behind)
	for i, b := range []*engine.Bucket{bs[0], bs[1], behind} {
		if got := b.Stats().CurrItems; got != 10 {
			t.Fatalf("bucket %d: curr_items %d once s.c2 was dropped, want 10", i, got)
		}
	}
}
