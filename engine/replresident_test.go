package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestReplicatedWriteResidentRefused: a bucket whose writes are replicated
// says so (Replicated), and a write asked to be done from memory alone
// (WriteOptions.Resident, an event loop's) is ErrWouldBlock having changed
// nothing, whatever its level: it would wait for its log entry's commit on
// a majority. The same write without Resident is made. Before, it waited
// in its caller.
func TestReplicatedWriteResidentRefused(t *testing.T) {
	ctx := context.Background()
	bs, _, _ := replicas(t, 1)
	b := bs[0]
	if !b.Replicated() {
		t.Fatal("Replicated false on a bucket with a Replicator")
	}
	c := b.DefaultCollection()
	for _, d := range []engine.Durability{engine.DurabilityNone, engine.DurabilityMajority, engine.DurabilityPersistToMajority} {
		if _, err := c.Upsert(ctx, "k", []byte(`1`), &engine.WriteOptions{Durability: d, Resident: true}); !errors.Is(err, engine.ErrWouldBlock) {
			t.Errorf("Resident upsert at %s on a replicated bucket: %v, want ErrWouldBlock", d, err)
		}
	}
	if _, err := c.Get(ctx, "k"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a refused write is readable: %v", err)
	}
	if _, err := c.Upsert(ctx, "k", []byte(`1`), &engine.WriteOptions{Durability: engine.DurabilityNone}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "k"); err != nil {
		t.Fatalf("the write without Resident: %v", err)
	}
}
