package replica

import (
	"context"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// oneReplica is a group of one in process: each proposed entry gets the
// next index and is applied to m at once.
type oneReplica struct {
	mu   sync.Mutex
	m    *BucketMachine
	next uint64
}

func (o *oneReplica) Writable(context.Context, int) error { return nil }

func (o *oneReplica) Replicate(_ context.Context, _ int, entry []byte) (engine.ReplicatedResult, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next++
	out, err := o.m.Apply(nil, []Entry{{Index: o.next, Data: entry}})
	if err != nil {
		return engine.ReplicatedResult{}, err
	}
	return out[0].(engine.ReplicatedResult), nil
}

// A BucketMachine follows its bucket across a restart (a change of its
// evictionPolicy makes a new engine.Bucket): entries after the restart
// reach the new bucket, which holds those before; its durable position
// goes on.
func TestBucketMachineFollowsRestart(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	o := &oneReplica{m: NewBucketMachine(b, 0, nil)}
	b.SetReplicator(o)
	if _, err := b.DefaultCollection().Upsert(ctx, "before", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error {
		s.EvictionPolicy = engine.FullEviction
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	nb := b.Reopened()
	if nb == nil {
		t.Fatal("the bucket did not restart")
	}
	nb.SetReplicator(o) // as serve's AttachBucket does
	d, err := nb.DefaultCollection().Upsert(ctx, "after", []byte(`2`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := nb.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"before", "after"} {
		if _, err := nb.DefaultCollection().Get(ctx, k); err != nil {
			t.Errorf("%s after the restart: %v", k, err)
		}
	}
	if got := o.m.Durable(); got != d.Seq || d.Seq != o.next {
		t.Fatalf("durable position %d, the write's seqno %d, the log's last index %d", got, d.Seq, o.next)
	}
}
