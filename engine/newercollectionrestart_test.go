package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// A replicated write to a collection created after the manifest a copy has
// (an ID at or above its next one) is kept, and its copy's log position
// passes it; a restart before the manifest naming the collection arrives
// keeps it too (the warm-up purges only the documents of collections the
// bucket dropped), so the collection holds the same documents on every
// copy once that manifest arrives. A review found the warm-up purged them
// as orphans of a dropped collection, and a replay from the copy's durable
// position could not bring them back.
func TestReplicatedWritesToANewerCollectionSurviveARestart(t *testing.T) {
	for _, policy := range []engine.EvictionPolicy{engine.ValueOnly, engine.FullEviction} {
		t.Run(string(policy), func(t *testing.T) { newerCollectionRestart(t, policy) })
	}
}

// newerCollectionRestart is
// TestReplicatedWritesToANewerCollectionSurviveARestart with a restarted
// copy of the given eviction policy (a fullEviction bucket's warm-up loads
// keys only, warmkeys.go).
func newerCollectionRestart(t *testing.T, policy engine.EvictionPolicy) {
	ctx := context.Background()
	bs, r, _ := replicas(t, 2)
	dir := t.TempDir()
	behindEng := openStorage(t, dir, engine.StoragePebble)
	behind, err := behindEng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase, EvictionPolicy: policy})
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
	applyManifest(t, m, bs[0], bs[1])
	c, err := bs[0].Collection("s", "c")
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	for i := range n {
		if _, err := c.Upsert(ctx, fmt.Sprintf("k%d", i), []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	// behind applies the writes before it has the manifest, then restarts.
	if errs, _ := replayLog(t, r, behind, nil); len(errs) != 0 || behind.Stats().CurrItems != n {
		t.Fatalf("writes to a newer collection: %v, curr_items %d, want %d", errs, behind.Stats().CurrItems, n)
	}
	if err := behind.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	closeChecked(t, behindEng)
	re, err := openStorage(t, dir, engine.StoragePebble).Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	if err := re.WaitWarm(ctx); err != nil {
		t.Fatal(err)
	}
	// What the restarted copy still lacks a replay from its durable
	// position brings back.
	from := map[int]uint64{}
	for part := range r.log {
		from[part] = re.ReplicatedDurable(part)
	}
	if errs, _ := replayLog(t, r, re, from); len(errs) != 0 {
		t.Fatalf("a replay from the durable position: %v", errs)
	}
	applyManifest(t, m, re)
	rc, err := re.Collection("s", "c")
	if err != nil {
		t.Fatal(err)
	}
	if got := rc.Count(); got != n {
		t.Fatalf("s.c counts %d on the restarted copy once its manifest arrived, the leader %d", got, c.Count())
	}
	if d, err := rc.Get(ctx, "k3"); err != nil || string(d.Value) != `{}` {
		t.Fatalf("s.c's k3 on the restarted copy: %+v %v", d, err)
	}
}
