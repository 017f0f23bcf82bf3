package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
// order, in pieces of any size; starting past a CAS (its binary search) it
// finds exactly what a full read filtered by CAS finds, sliding extensions
// (which log an older CAS after newer ones) and deletions included.
func TestScanChanges(t *testing.T) {
	ctx := context.Background()
	b, c, clk := ttlColl(t, engine.Couchbase, 0, engine.CollectionSettings{IdleTTL: 100})
	for i := range 300 {
		if _, err := c.Upsert(ctx, fmt.Sprintf("k%d", i), []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	for p := range b.NumPartitions() { // index the logs: later changes extend the index
		b.ScanChanges(&engine.ChangeScan{Part: p, Hi: b.MaxCAS(), Limit: 1})
	}
	clk.Advance(10)
	for i := 0; i < 300; i += 3 { // sliding extensions: new sequence numbers, old CAS
		if _, err := c.Get(ctx, fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < 300; i += 5 {
		if _, err := c.Delete(ctx, fmt.Sprintf("k%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	read := func(part int, lo uint64, limit int) []*engine.Document {
		s := engine.ChangeScan{Part: part, Lo: lo, Hi: b.MaxCAS(), Limit: limit}
		var out []*engine.Document
		for s.More = true; s.More; {
			s.Docs = s.Docs[:0]
			b.ScanChanges(&s)
			out = append(out, s.Docs...)
		}
		return out
	}
	total := 0
	for p := range b.NumPartitions() {
		all := read(p, 0, 1000)
		total += len(all)
		for i := 1; i < len(all); i++ {
			if all[i].Seq <= all[i-1].Seq {
				t.Fatalf("partition %d: out of sequence order at %d", p, i)
			}
		}
		for _, cut := range all {
			var want []string
			for _, d := range all {
				if d.CAS > cut.CAS {
					want = append(want, d.Key)
				}
			}
			var got []string
			for _, d := range read(p, cut.CAS, 2) {
				got = append(got, d.Key)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("partition %d past CAS %d: %v, want %v", p, cut.CAS, got, want)
			}
		}
	}
	if total != 300 {
		t.Errorf("read %d versions, want 300", total)
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
