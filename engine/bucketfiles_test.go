package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// A persistent bucket whose folder is gone when the server starts (deleted
// by hand, or on a volume that did not mount) stops the start with an error
// naming the folder and what to do, instead of opening the bucket empty in
// its place without a word; created empty again, the folder starts the
// bucket with no documents. An ephemeral bucket has no folder to miss.
func TestMissingBucketFolderRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := func() *engine.Options {
		return &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 4, NoSync: true}
	}
	eng, err := engine.Open(dir, opts())
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "travel", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "cache", Type: engine.Ephemeral}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DefaultCollection().Upsert(ctx, "k", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(dir, "buckets", "travel")
	if err := os.RemoveAll(folder); err != nil {
		t.Fatal(err)
	}
	_, err = engine.Open(dir, opts())
	if !errors.Is(err, engine.ErrBucketFilesMissing) || !strings.Contains(err.Error(), folder) || !strings.Contains(err.Error(), "mkdir") {
		t.Fatalf("open with travel's folder gone: %v; want ErrBucketFilesMissing naming %s and what to do", err, folder)
	}
	if _, err := os.Stat(folder); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused open made %s: %v", folder, err)
	}
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	eng, err = engine.Open(dir, opts())
	if err != nil {
		t.Fatalf("open with travel's folder made again, empty: %v", err)
	}
	defer eng.Close()
	b, err = eng.Bucket("travel")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WaitWarm(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.DefaultCollection().Count(); n != 0 {
		t.Fatalf("travel started from an empty folder counts %d documents, want 0", n)
	}
	if _, err := eng.Bucket("cache"); err != nil {
		t.Fatalf("the ephemeral bucket: %v", err)
	}
}
