package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// selfReplicator applies each entry to its own bucket at the next index,
// as a group of one would.
type selfReplicator struct {
	b    *Bucket
	mu   sync.Mutex
	next uint64
}

func (r *selfReplicator) Writable(context.Context, int) error { return nil }
func (r *selfReplicator) Replicate(_ context.Context, part int, entry []byte) (ReplicatedResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	return r.b.ApplyReplicated(part, r.next, entry)
}

// A failed commit drops versions the node applied from its group's log,
// which the group counts applied: the node must stop applying (a later
// entry committed would raise its durable position past the hole, and no
// replay would fill it), so that a restart replays from its durable
// position. On the old code the next entry applied and committed, and the
// dropped one was gone from this copy for good.
func TestReplicatedEntriesLostToAFailedCommitStopTheCopy(t *testing.T) {
	ctx := context.Background()
	eng, err := Open(t.TempDir(), &Options{NumPartitions: 1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, DefaultBucketSettings("b"))
	if err != nil {
		t.Fatal(err)
	}
	f := &faultyStorage{storage: b.store.st}
	b.store.st = f
	b.store.probeGap = time.Millisecond
	b.SetReplicator(&selfReplicator{b: b})
	c := b.DefaultCollection()
	if _, err := c.Upsert(ctx, "k1", []byte(`{"v":1}`), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	f.setErr(errors.New("disk gone"))
	if _, err := c.Upsert(ctx, "k2", []byte(`{"v":2}`), nil); err != nil {
		t.Fatal(err) // applied in memory: the group has it
	}
	if err := b.Sync(ctx); !errors.Is(err, ErrStorage) {
		t.Fatalf("Sync: %v, want ErrStorage", err)
	}
	f.setErr(nil)
	for b.store.failure() != nil {
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Upsert(ctx, "k3", []byte(`{"v":3}`), nil); !errors.Is(err, ErrReplicaLost) {
		t.Fatalf("a write after applied entries were lost: %v, want ErrReplicaLost", err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.ReplicatedDurable(0); got != 1 {
		t.Errorf("durable position %d, want 1 (k1's entry): a restart must replay k2's", got)
	}
}
