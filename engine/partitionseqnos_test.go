package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// PartitionSeqnos (OBSERVE_SEQNO's answer): a write's sequence number is
// current at once and persisted once committed, on a persistent bucket
// and on an ephemeral one (its commit is in memory); persisted is never
// above current; a partition the bucket does not have is ErrNotMyVBucket.
func TestPartitionSeqnos(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	eph := engine.DefaultBucketSettings("e")
	eph.Type = engine.Ephemeral
	for _, s := range []engine.BucketSettings{engine.DefaultBucketSettings("p"), eph} {
		b, err := eng.CreateBucket(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		d, err := b.DefaultCollection().Upsert(ctx, "k", []byte(`{}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		part := b.PartitionOf("k")
		for deadline := time.Now().Add(time.Minute); ; {
			cur, pers, err := b.PartitionSeqnos(part)
			if err != nil || cur < d.Seq || pers > cur {
				t.Fatalf("%s: current %d persisted %d (%v); the write's %d", s.Name, cur, pers, err, d.Seq)
			}
			if pers >= d.Seq {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the write (seq %d) never persisted: %d", s.Name, d.Seq, pers)
			}
			time.Sleep(5 * time.Millisecond)
		}
		for _, p := range []int{-1, b.NumPartitions()} {
			if _, _, err := b.PartitionSeqnos(p); !errors.Is(err, engine.ErrNotMyVBucket) {
				t.Fatalf("%s: partition %d: %v, want ErrNotMyVBucket", s.Name, p, err)
			}
		}
	}
}
