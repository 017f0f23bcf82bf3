package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// A document lock's CAS is never handed out again after a clean restart:
// the bucket opens above every CAS it handed out, a lock's included, which
// no stored record carries (as Couchbase keeps a vBucket's max_cas). A
// client that held the lock and replaces with its CAS after the restart is
// refused, whatever was written meanwhile. A review found the bucket opened
// at the highest stored CAS, so that the next write took the lock's CAS
// again (with a clock that had not moved on) and a replace with it matched
// a version its client never read.
func TestLockCASNotReusedAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	open := func() *engine.Engine {
		t.Helper()
		eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	eng := open()
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.DefaultCollection().Upsert(ctx, "a", []byte(`{"n":1}`), nil); err != nil {
		t.Fatal(err)
	}
	locked, err := b.DefaultCollection().GetLocked(ctx, "a", 15)
	if err != nil {
		t.Fatal(err)
	}
	closeChecked(t, eng)

	eng = open()
	t.Cleanup(func() { closeChecked(t, eng) })
	b, err = eng.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	d, err := c.Upsert(ctx, "a", []byte(`{"n":2}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.CAS <= locked.CAS {
		t.Errorf("a write after the restart took CAS %d, the lock's was %d: want a larger one", d.CAS, locked.CAS)
	}
	if _, err := c.Replace(ctx, "a", []byte(`{"n":3}`), &engine.WriteOptions{CAS: locked.CAS}); !errors.Is(err, engine.ErrCASMismatch) {
		t.Errorf("a replace with the lock's CAS after the restart and another write: %v, want a CAS mismatch", err)
	}
}
