package engine_test

import (
	"context"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// Bug (review of issue 19's feed): after a kill -9, a fullEviction bucket
// refuses every _changes since of the old history with a rollback, though the
// crash lost nothing the reader saw. CheckCASPosition looks for the kept
// changes among the records memory holds, and a fullEviction warm-up loads
// none, so no position is ever "shown to be kept". The README promises a
// rollback only after "a crash that lost changes the reader had seen"; a
// valueOnly bucket answers the same position without one.
func TestReviewCASPositionAfterCrashFullEviction(t *testing.T) {
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
		})
	}
}
