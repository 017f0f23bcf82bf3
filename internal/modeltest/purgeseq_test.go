package modeltest

import (
	"context"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/views"
)

// TestPurgeTombstonesKeepsPartitionSeq: a metadata purge must not move a
// partition's sequence number on disk back to the purged tombstone's. If it
// does, a reopened bucket hands out sequence numbers again that a view index
// has already consumed, and the index never sees those mutations.
func TestPurgeTombstonesKeepsPartitionSeq(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	open := func() (*engine.Engine, *engine.Collection, *views.Service) {
		eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 1})
		if err != nil {
			t.Fatal(err)
		}
		b, err := eng.Bucket(bucketName)
		if err != nil {
			if b, err = eng.CreateBucket(ctx, engine.DefaultBucketSettings(bucketName)); err != nil {
				t.Fatal(err)
			}
		}
		svc, err := views.New(ctx, eng, nil)
		if err != nil {
			t.Fatal(err)
		}
		return eng, b.DefaultCollection(), svc
	}
	eng, c, svc := open()
	if _, err := svc.PutDesignDoc(ctx, bucketName, ddocName, []byte(variants[0].body)); err != nil {
		t.Fatal(err)
	}
	must := func(_ *engine.Document, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Upsert(ctx, "a", value(1, 1), nil))                                // seq 1
	must(c.Delete(ctx, "a", nil))                                             // seq 2, a tombstone made at t0
	must(c.Upsert(ctx, "b", value(2, 10), &engine.WriteOptions{Expiry: 200})) // seq 3
	clk.Advance(300)
	if n, _, err := c.Bucket().ExpireBatch(ctx, 10); err != nil || n != 1 { // seq 4, b's tombstone
		t.Fatalf("ExpireBatch: %d, %v", n, err)
	}
	if err := c.Bucket().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, svc: svc, ddoc: 0}
	if got := compact(h.query("stale=false")); got != `{"rows":[]}` {
		t.Fatalf("before the purge: %s", got)
	}
	// Purge a's tombstone (seq 2), not b's (made at t0+300).
	if n, _, err := c.Bucket().PurgeTombstones(ctx, t0+100, 100); err != nil || n != 1 {
		t.Fatalf("PurgeTombstones: %d, %v", n, err)
	}
	checkErr := eng.Check(ctx)
	svc.Close()
	eng.Close()

	eng, c, svc = open()
	defer func() { svc.Close(); eng.Close() }()
	t.Logf("high seqnos after the reopen: %v", c.Bucket().HighSeqnos())
	must(c.Upsert(ctx, "d", value(4, 1000), nil)) // must be seq 5, not 4 again
	h.svc = svc
	got := compact(h.query("stale=false"))
	if checkErr != nil {
		t.Errorf("engine.Check after the purge: %v", checkErr)
	}
	// b stays an expiration's tombstone: its rows left the index at seq 4.
	// d must be indexed.
	if got != `{"rows":[{"key":null,"value":1000}]}` {
		t.Errorf("after the reopen and a new document d (n=1000): %s, want the sum 1000", got)
	}
}
