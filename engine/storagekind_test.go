package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// A data directory keeps working when the default store changes: a
// bucket opens with the store it was created with (told by its files),
// whatever Options.Storage says, and keeps its documents; a new bucket
// takes the configured store.
func TestBucketKeepsItsStore(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ created, reopened, file string }{
		{engine.StorageBolt, engine.StoragePebble, "data.db"},
		{engine.StoragePebble, engine.StorageBolt, "pebble"},
	} {
		t.Run(tc.created+"-then-"+tc.reopened, func(t *testing.T) {
			dir := t.TempDir()
			open := func(kind string) *engine.Engine {
				t.Helper()
				eng, err := engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8, NoSync: true, Storage: kind})
				if err != nil {
					t.Fatal(err)
				}
				return eng
			}
			eng := open(tc.created)
			b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "old", Type: engine.Couchbase})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.DefaultCollection().Upsert(ctx, "k", []byte(`{"v":1}`), nil); err != nil {
				t.Fatal(err)
			}
			closeChecked(t, eng)

			eng = open(tc.reopened)
			defer closeChecked(t, eng)
			b, err = eng.Bucket("old")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(b.Dir(), tc.file)); err != nil {
				t.Errorf("the bucket's %s store is gone: %v", tc.created, err)
			}
			d, err := b.DefaultCollection().Get(ctx, "k")
			if err != nil || string(d.Value) != `{"v":1}` {
				t.Fatalf("document written through %s, read after reopening with %s: %+v, %v", tc.created, tc.reopened, d, err)
			}
			if _, err := b.DefaultCollection().Upsert(ctx, "k2", []byte(`{}`), nil); err != nil {
				t.Fatal(err)
			}
			nb, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "new", Type: engine.Couchbase})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{engine.StorageBolt: "data.db", engine.StoragePebble: "pebble"}[tc.reopened]
			if _, err := os.Stat(filepath.Join(nb.Dir(), want)); err != nil {
				t.Errorf("a new bucket does not use the configured %s store: %v", tc.reopened, err)
			}
		})
	}
}

// A bucket folder holding both stores is refused with a clear error, not
// opened with one of them at random.
func TestBucketWithTwoStoresRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng, err := engine.Open(dir, &engine.Options{NumPartitions: 8, NoSync: true, Storage: engine.StoragePebble})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	bdir := b.Dir()
	closeChecked(t, eng)
	if err := os.WriteFile(filepath.Join(bdir, "data.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = engine.Open(dir, &engine.Options{NumPartitions: 8, NoSync: true})
	if !errors.Is(err, engine.ErrStorage) {
		t.Fatalf("open of a bucket with two stores: %v, want ErrStorage", err)
	}
	for _, want := range []string{"data.db", "pebble"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// An unknown store is a setting out of range.
func TestStorageOptionValidated(t *testing.T) {
	_, err := engine.Open(t.TempDir(), &engine.Options{Storage: "leveldb"})
	if !errors.Is(err, engine.ErrInvalidSetting) {
		t.Fatalf("Storage leveldb: %v, want ErrInvalidSetting", err)
	}
	if got := engine.DefaultOptions().Storage; got != engine.StoragePebble {
		t.Errorf("default store %q, want %q", got, engine.StoragePebble)
	}
}

// TestStorageMemUsed: a pebble bucket reports the memory its store holds
// (memtables at once, the block cache once reads fill it), within its
// budget its quota sets; bbolt and memory-only buckets hold none of their own.
func TestStorageMemUsed(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		kind    string
		typ     engine.BucketType
		quotaMB int64
		budget  int64
	}{
		// The default 100 MiB quota: the smallest cache (8 MiB) and,
		// below 256 MiB, memtables of a 128th (2 × 800 KiB).
		{engine.StoragePebble, engine.Couchbase, 0, 8<<20 + 2*(100<<20)/128},
		// A sixteenth and two sixty-fourths of 320 MiB.
		{engine.StoragePebble, engine.Couchbase, 320, 30 << 20},
		// Memtables of at least 512 KiB.
		{engine.StoragePebble, engine.Couchbase, 32, 8<<20 + 1<<20},
		// The largest: 32 MiB of cache, 2 × 16 MiB of memtables.
		{engine.StoragePebble, engine.Couchbase, 4096, 64 << 20},
		{engine.StorageBolt, engine.Couchbase, 0, 0},
		{engine.StoragePebble, engine.Ephemeral, 0, 0},
	} {
		t.Run(fmt.Sprintf("%s/%s/%dMiB", tc.kind, tc.typ, tc.quotaMB), func(t *testing.T) {
			eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8, NoSync: true, Storage: tc.kind})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeChecked(t, eng) })
			b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: tc.typ, RAMQuotaMB: tc.quotaMB})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprint("k", i), []byte(`{"v":1}`), nil); err != nil {
					t.Fatal(err)
				}
			}
			used := b.Stats().StorageMemUsed
			if got := b.StorageMemBudget(); got != tc.budget {
				t.Errorf("StorageMemBudget %d, want %d", got, tc.budget)
			}
			if tc.budget == 0 && used != 0 || tc.budget > 0 && (used <= 0 || used > tc.budget) {
				t.Errorf("StorageMemUsed %d, want within (0, %d] (0 for no budget)", used, tc.budget)
			}
		})
	}
}
