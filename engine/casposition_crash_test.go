package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// After a kill -9, a _changes since of the old history that the crash kept
// (every change synced before it) is served without a rollback by a
// fullEviction bucket as by a valueOnly one, and still after the documents
// are rewritten in the new history: each history records the CAS the store
// had committed when it began (FailoverEntry.CAS), and CheckCASPosition
// bounds an older history's positions by it. A review found a fullEviction
// bucket refused every such since, CheckCASPosition looking for the kept
// changes among the records in memory, of which a fullEviction warm-up
// loads none (and a rewrite replaces the rest). The README promises a
// rollback only after "a crash that lost changes the reader had seen".
func TestCASPositionAfterCrash(t *testing.T) {
	for _, policy := range []engine.EvictionPolicy{engine.ValueOnly, engine.FullEviction} {
		t.Run(string(policy), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			eng := openAt(t, dir)
			b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase, EvictionPolicy: policy})
			if err != nil {
				t.Fatal(err)
			}
			writeN(t, b, "a", 50)
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			uuid, kept := b.UUID(), b.MaxCAS()
			crashed := t.TempDir()
			copyDir(t, dir, crashed)

			b2, _ := openAt(t, crashed).Bucket("b")
			if b2.UUID() == uuid {
				t.Fatal("no new history after a crash")
			}
			if err := b2.CheckCASPosition(uuid, kept); err != nil {
				t.Errorf("a position the crash kept (every change synced before the copy): %v", err)
			}
			writeN(t, b2, "a", 50) // every kept document rewritten in the new history
			if err := b2.CheckCASPosition(uuid, kept); err != nil {
				t.Errorf("a position the crash kept, its documents since rewritten: %v", err)
			}
			if err := b2.CheckCASPosition(uuid, kept+1); !errors.Is(err, engine.ErrRollback) {
				t.Errorf("a position past what the crash kept: %v", err)
			}
		})
	}
}
