package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestFullEvictionReplicatedWritesHoldTheQuota: on a fullEviction bucket
// whose writes are replicated (mutateReplicated), a refused write (an
// insert of a key that exists, a replace with a wrong CAS) reads its item
// back into memory to decide, as the local path's does, and must evict as
// that path does: mutateReplicated decides through mutateOnce, whose
// refused branch evicts since fb23a95 (without it, 40,000 small documents
// in 1 MiB: refused writes took mem_used past the quota at about the
// 2,400th to 2,700th, each reading one item back).
func TestFullEvictionReplicatedWritesHoldTheQuota(t *testing.T) {
	ctx := context.Background()
	b := memBucket(t, engine.Couchbase, 1, engine.FullEviction)
	b.SetReplicator(&logReplicator{replicas: []*engine.Bucket{b}})
	c := b.DefaultCollection()
	const n = 40000
	cas := make([]uint64, n)
	for i := range n {
		d, err := c.Upsert(ctx, memKey(i), fmt.Appendf(nil, `{"i":%d}`, i), nil)
		if err != nil {
			t.Fatal(err)
		}
		cas[i] = d.CAS
	}
	// Replicated writes are acknowledged from memory: their versions can
	// leave memory once committed, and the commits evict.
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.MemUsed > 1<<20 {
		t.Fatalf("after %d replicated writes into 1 MiB: mem_used %d", n, st.MemUsed)
	}
	for i := range n {
		var err error
		if i%2 == 0 {
			_, err = c.Insert(ctx, memKey(i), []byte(`{}`), nil)
		} else {
			_, err = c.Replace(ctx, memKey(i), []byte(`{}`), &engine.WriteOptions{CAS: cas[i] + 1})
		}
		if !errors.Is(err, engine.ErrKeyExists) && !errors.Is(err, engine.ErrCASMismatch) {
			t.Fatalf("refused write %d: %v", i, err)
		}
		if st := b.Stats(); st.MemUsed > 1<<20 {
			t.Fatalf("after %d refused replicated writes: mem_used %d past the 1 MiB quota (high-water mark %d)", i+1, st.MemUsed, st.MemHighWat)
		}
	}
}
