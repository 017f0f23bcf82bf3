package views_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/views"
)

// applyAll is a replication group per partition in one process: an entry
// gets the partition's next log index and is applied to every bucket in
// to, in order; the proposer gets the first one's result.
type applyAll struct {
	mu   sync.Mutex
	to   []*engine.Bucket
	next map[int]uint64
}

func (a *applyAll) Writable(context.Context, int) error { return nil }

func (a *applyAll) Replicate(_ context.Context, part int, entry []byte) (engine.ReplicatedResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next[part]++
	var first engine.ReplicatedResult
	for i, b := range a.to {
		res, err := b.ApplyReplicated(part, a.next[part], entry)
		if err != nil {
			return engine.ReplicatedResult{}, err
		}
		if i == 0 {
			first = res
		}
	}
	return first, nil
}

// newReplicatedEnv is an env whose default bucket is a replica of a leader
// bucket in an engine of its own (its clock lclk): every write to the
// leader goes through group, which applies it to both.
func newReplicatedEnv(t *testing.T) (e *env, replica, leader *engine.Bucket, lclk *engine.FakeClock, group *applyAll) {
	t.Helper()
	e = newEnv(t, views.Options{})
	replica, err := e.eng.Bucket("default")
	if err != nil {
		t.Fatal(err)
	}
	lclk = engine.NewFakeClock(t0)
	leng, err := engine.Open(t.TempDir(), &engine.Options{Clock: lclk, NumPartitions: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leng.Close() })
	leader, err = leng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	group = &applyAll{to: []*engine.Bucket{leader, replica}, next: map[int]uint64{}}
	leader.SetReplicator(group)
	return e, replica, leader, lclk, group
}

// purgeAndRestore has the leader purge its one tombstone an hour on (the
// replica never saw the deletion), then restores the replica's copy of
// partition part from the leader's snapshot, as a copy joining its group
// again gets it: only the snapshot's lack of the key says it is gone.
func purgeAndRestore(t *testing.T, leader, replica *engine.Bucket, lclk *engine.FakeClock, part int) {
	t.Helper()
	ctx := context.Background()
	if err := leader.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	lclk.Advance(3600)
	if n, _, err := leader.PurgeTombstones(ctx, t0+1, 100); err != nil || n != 1 {
		t.Fatalf("the leader purged %d tombstones: %v", n, err)
	}
	snap, err := leader.ReplicatedSnapshot(part)
	if err != nil {
		t.Fatal(err)
	}
	if err := replica.ReplicatedRestore(ctx, part, snap); err != nil {
		t.Fatal(err)
	}
}

// A replica that missed a deletion whose tombstone the leader purged drops
// the document's view rows when it restores the leader's snapshot: the
// restore deletes the key through the change feed the index reads.
func TestReplicaRestoreDropsRowsOfPurgedDeletion(t *testing.T) {
	ctx := context.Background()
	e, replica, leader, lclk, group := newReplicatedEnv(t)
	if _, err := e.svc.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"n":{"map":"function (doc, meta) { emit(meta.id, doc.n); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	const part = 3
	var keys []string
	for i := 0; len(keys) < 4; i++ {
		if k := fmt.Sprint("k", i); leader.PartitionOf(k) == part {
			keys = append(keys, k)
		}
	}
	lc := leader.DefaultCollection()
	for i, k := range keys {
		if _, err := lc.Upsert(ctx, k, fmt.Appendf(nil, `{"n":%d}`, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.query("d", "n", "stale=false&limit=0"); got != `{"total_rows":4,"rows":[]}` {
		t.Fatalf("the replica's index before: %s", got)
	}

	// The replica misses the deletion of keys[0]; the leader purges its tombstone.
	group.mu.Lock()
	group.to = group.to[:1]
	group.mu.Unlock()
	if _, err := lc.Delete(ctx, keys[0], nil); err != nil {
		t.Fatal(err)
	}
	purgeAndRestore(t, leader, replica, lclk, part)
	if got := e.query("d", "n", fmt.Sprintf(`stale=false&key="%s"`, keys[0])); got != `{"total_rows":3,"rows":[]}` {
		t.Fatalf("the replica's index after the restore, %s's row: %s", keys[0], got)
	}
	want := fmt.Sprintf(`{"total_rows":3,"rows":[{"id":"%s","key":"%s","value":1}]}`, keys[1], keys[1])
	if got := e.query("d", "n", fmt.Sprintf(`stale=ok&key="%s"`, keys[1])); got != want {
		t.Fatalf("the replica's index after the restore, %s's row: %s, want %s", keys[1], got, want)
	}
}
