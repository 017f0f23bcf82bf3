package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// A write on its way to disk holds StableCAS below its CAS, so that no
// consumer passes it before it is visible; once committed, it is covered.
func TestStableCASWaitsForPendingWrites(t *testing.T) {
	b, _ := newBucket(t, engine.Couchbase)
	c := b.DefaultCollection()
	if _, err := c.Upsert(context.Background(), "a", []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	if s, m := b.StableCAS(), b.MaxCAS(); s != m {
		t.Fatalf("idle bucket: StableCAS %d, MaxCAS %d", s, m)
	}
	before := b.MaxCAS()
	release, err := engine.HoldCommits(b)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Upsert(context.Background(), "b", []byte(`{}`), nil)
		done <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); b.MaxCAS() == before; { // wall clock: a hang's deadline
		if time.Now().After(deadline) { // wall clock: a hang's deadline
			t.Fatal("the write never took a CAS")
		}
		time.Sleep(time.Millisecond)
	}
	if s := b.StableCAS(); s >= b.MaxCAS() {
		t.Errorf("with a write queued at CAS %d: StableCAS %d", b.MaxCAS(), s)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s, m := b.StableCAS(), b.MaxCAS(); s != m {
		t.Errorf("after the commit: StableCAS %d, MaxCAS %d", s, m)
	}
}

// ScanChanges returns a partition's versions in a CAS range, in sequence
// order, and says where versions above the range start.
func TestScanChanges(t *testing.T) {
	b, _ := newBucket(t, engine.Couchbase)
	writeN(t, b, "k", 200)
	mid := b.MaxCAS()
	writeN(t, b, "j", 200)
	total := 0
	for p := range b.NumPartitions() {
		low := engine.ChangeScan{Part: p, Hi: mid, Limit: 3}
		var n int
		for low.More = true; low.More; {
			low.Docs = low.Docs[:0]
			b.ScanChanges(&low)
			for i, d := range low.Docs {
				if d.CAS > mid || (i > 0 && d.Seq <= low.Docs[i-1].Seq) {
					t.Fatalf("partition %d: %+v out of range or order", p, d)
				}
			}
			n += len(low.Docs)
		}
		high := engine.ChangeScan{Part: p, After: max(low.Above, 1) - 1, Lo: mid, Hi: b.MaxCAS(), Limit: 1000}
		b.ScanChanges(&high)
		if low.Above == 0 && len(high.Docs) != 0 {
			t.Errorf("partition %d: no version above %d seen, yet %d there", p, mid, len(high.Docs))
		}
		total += n + len(high.Docs)
	}
	if total != 400 {
		t.Errorf("scanned %d versions, want 400", total)
	}
}

// A CAS position in an older history stands while the changes it covers
// were kept; past what the crash kept, or in an unknown history, it needs a
// rollback.
func TestCheckCASPositionAfterCrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng := openAt(t, dir)
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, b, "a", 50)
	uuid, kept := b.UUID(), b.MaxCAS()
	if err := b.CheckCASPosition(uuid, kept); err != nil {
		t.Fatalf("current position: %v", err)
	}
	if err := b.CheckCASPosition(uuid, kept+1); !errors.Is(err, engine.ErrRollback) {
		t.Errorf("a position past the last change: %v", err)
	}
	if err := b.CheckCASPosition(uuid+1, kept); !errors.Is(err, engine.ErrRollback) {
		t.Errorf("an unknown history: %v", err)
	}
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	writeN(t, b, "lost", 10) // the crash loses these
	lost := b.MaxCAS()

	b2, _ := openAt(t, crashed).Bucket("b")
	if b2.UUID() == uuid {
		t.Fatal("no new history after a crash")
	}
	if err := b2.CheckCASPosition(uuid, kept); err != nil {
		t.Errorf("a position the crash kept: %v", err)
	}
	writeN(t, b2, "new", 20) // their CAS values reuse the lost ones'
	if err := b2.CheckCASPosition(uuid, lost); !errors.Is(err, engine.ErrRollback) {
		t.Errorf("a position among changes the crash lost: %v", err)
	}
	if err := b2.CheckCASPosition(uuid, 0); err != nil {
		t.Errorf("the start: %v", err)
	}
}
