package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

func writeN(t *testing.T, b *engine.Bucket, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := b.DefaultCollection().Upsert(context.Background(), fmt.Sprintf("%s%d", prefix, i), []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// copyDir copies the files under from to to, as a kill -9 would leave
// them: an open store's files may be appended to meanwhile (as at a crash),
// but its background work (a flush, a compaction) may also create and
// delete files while the copy runs, which no crash leaves (a manifest
// naming a table the copy missed). So the copy is taken again until the
// set of files is the same before and after it and none vanished under it.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	const attempts = 100
	for range attempts {
		before, err := listFiles(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(to); err != nil {
			t.Fatal(err)
		}
		err = copyFiles(from, to)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a file removed under the copy
		}
		if err != nil {
			t.Fatal(err)
		}
		after, err := listFiles(from)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(before, after) {
			return
		}
	}
	t.Fatalf("copying %s: its files changed under each of %d copies", from, attempts)
}

// listFiles returns the paths of the files under dir, sorted.
func listFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// copyFiles copies the files under from to to, once.
func copyFiles(from, to string) error {
	return filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o600)
	})
}

func openAt(t *testing.T, dir string) *engine.Engine {
	t.Helper()
	eng, err := engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeChecked(t, eng) })
	return eng
}

// A clean restart keeps the history; a crash (a copy of the files taken while
// open) begins a new one at the high sequence numbers, in which positions up
// to them stay valid and positions past them need a rollback.
func TestFailoverLogAfterCrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng := openAt(t, dir)
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(b.FailoverLog()); n != 1 {
		t.Fatalf("new bucket: failover log of %d entries", n)
	}
	uuid := b.UUID()
	writeN(t, b, "a", 50)
	pos := b.HighSeqnos()
	if err := b.CheckPosition(uuid, pos); err != nil {
		t.Fatalf("current position: %v", err)
	}
	crashed := t.TempDir()
	copyDir(t, dir, crashed) // what kill -9 now would leave

	// A position past what the bucket holds is not in its history.
	ahead := slices.Clone(pos)
	ahead[0]++
	if err := b.CheckPosition(uuid, ahead); !errors.Is(err, engine.ErrRollback) {
		t.Errorf("position past the high sequence numbers: %v", err)
	}
	if err := b.CheckPosition(12345, pos); !errors.Is(err, engine.ErrRollback) {
		t.Errorf("unknown history: %v", err)
	}

	eng2 := openAt(t, crashed)
	b2, _ := eng2.Bucket("b")
	log := b2.FailoverLog()
	if len(log) != 2 || log[1].UUID != uuid || b2.UUID() == uuid || !slices.Equal(log[0].Seqs, pos) {
		t.Fatalf("after a crash: failover log %+v, want a new entry at %v in front of %d", log, pos, uuid)
	}
	if err := b2.CheckPosition(uuid, pos); err != nil {
		t.Errorf("position the crash kept: %v", err)
	}
	writeN(t, b2, "b", 50)
	if err := b2.CheckPosition(uuid, b2.HighSeqnos()); !errors.Is(err, engine.ErrRollback) {
		t.Errorf("old history's position past its end: %v", err)
	}
	if err := b2.CheckPosition(b2.UUID(), b2.HighSeqnos()); err != nil {
		t.Errorf("new history's position: %v", err)
	}

	// A clean close and open keeps the history.
	uuid2 := b2.UUID()
	if err := eng2.Close(); err != nil {
		t.Fatal(err)
	}
	eng3 := openAt(t, crashed)
	b3, _ := eng3.Bucket("b")
	if b3.UUID() != uuid2 || len(b3.FailoverLog()) != 2 {
		t.Errorf("clean restart changed the history: %+v", b3.FailoverLog())
	}
}

// A backup restored over newer data, and a bucket deleted and created again,
// are not the history a consumer saw.
func TestRollbackOnRestoreAndRecreate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng, err := engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	writeN(t, b, "a", 20)
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	backup := t.TempDir()
	copyDir(t, dir, backup)

	eng = openAt(t, dir)
	b, _ = eng.Bucket("b")
	writeN(t, b, "b", 20)
	uuid, pos := b.UUID(), b.HighSeqnos()

	restored := openAt(t, backup)
	rb, _ := restored.Bucket("b")
	if err := rb.CheckPosition(uuid, pos); !errors.Is(err, engine.ErrRollback) {
		t.Errorf("restored backup accepted a newer position: %v", err)
	}

	if err := eng.DeleteBucket(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	nb, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	if nb.UUID() == uuid {
		t.Error("recreated bucket kept its UUID")
	}
	if err := nb.CheckPosition(uuid, pos); !errors.Is(err, engine.ErrRollback) {
		t.Errorf("recreated bucket accepted the old position: %v", err)
	}
	if err := nb.CheckPosition(0, make([]uint64, nb.NumPartitions())); err != nil {
		t.Errorf("a consumer that saw nothing: %v", err)
	}
}

// A registered consumer holds back the metadata purge across a restart until
// it acknowledges the tombstones; a dropped one no longer does.
func TestConsumersAreDurable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	open := func() *engine.Engine {
		eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	eng := open()
	b, _ := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err := b.RegisterConsumer(ctx, "views:_design/x"); err != nil {
		t.Fatal(err)
	}
	writeN(t, b, "k", 10)
	for i := range 10 {
		if _, err := b.DefaultCollection().Delete(ctx, fmt.Sprintf("k%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	eng = open()
	defer closeChecked(t, eng)
	b, _ = eng.Bucket("b")
	if got := b.Consumers(); !slices.Equal(got, []string{"views:_design/x"}) {
		t.Fatalf("consumers after restart: %v", got)
	}
	clk.Advance(10)
	if n, _, err := b.PurgeTombstones(ctx, clk.Now(), 100); err != nil || n != 0 {
		t.Fatalf("purged %d tombstones (err %v) that the consumer has not seen", n, err)
	}
	if err := b.AckChanges("views:_design/x", b.HighSeqnos()); err != nil {
		t.Fatal(err)
	}
	if n, _, err := b.PurgeTombstones(ctx, clk.Now(), 100); err != nil || n != 10 {
		t.Fatalf("purged %d (err %v) after the ack, want 10", n, err)
	}
	if err := b.DropConsumer(ctx, "views:_design/x"); err != nil {
		t.Fatal(err)
	}
	if got := b.Consumers(); len(got) != 0 {
		t.Errorf("consumers after drop: %v", got)
	}
}

// A metadata purge committed on its own leaves each partition's sequence
// number where it was, on disk too (engine.Check compares them), so that
// sequence numbers are never given out twice.
func TestPurgeKeepsSequenceNumbers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	c := b.DefaultCollection()
	if _, err := c.Upsert(ctx, "gone", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, "gone", nil); err != nil {
		t.Fatal(err)
	}
	writeN(t, b, "k", 5)
	high := b.HighSeqnos()
	clk.Advance(10)
	if n, _, err := b.PurgeTombstones(ctx, clk.Now(), 10); err != nil || n != 1 {
		t.Fatalf("purged %d, %v", n, err)
	}
	if got := b.HighSeqnos(); !slices.Equal(got, high) {
		t.Errorf("high sequence numbers %v after the purge, want %v", got, high)
	}
	if err := eng.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	eng = openAt(t, dir)
	b, _ = eng.Bucket("b")
	if got := b.HighSeqnos(); !slices.Equal(got, high) {
		t.Errorf("after restart high sequence numbers %v, want %v", got, high)
	}
}
