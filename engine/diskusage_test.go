package engine_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// A bucket's DiskUsage counts every file in its folder (diskUsed), and
// the same less the pebble store's full-disk reserve (dataUsed), which
// holds zeros rather than data; a bucket that keeps nothing on disk uses
// none.
func TestBucketDiskUsage(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "travel", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if _, err := b.DefaultCollection().Upsert(ctx, k, []byte(`{"v":1}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var files, reserve int64
	filepath.WalkDir(b.Dir(), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				files += info.Size()
			}
		}
		return nil
	})
	if info, err := os.Stat(filepath.Join(b.Dir(), "pebble", "mayfly.reserve")); err == nil {
		reserve = info.Size()
	}
	if reserve == 0 {
		t.Log("the store holds no reserve here (too little free space): dataUsed equals diskUsed")
	}
	disk, data := b.DiskUsage()
	if disk != files || data != files-reserve || data <= 0 {
		t.Errorf("DiskUsage %d, %d; the folder's files hold %d bytes, %d of them the reserve", disk, data, files, reserve)
	}
	cache, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "cache", Type: engine.Ephemeral})
	if err != nil {
		t.Fatal(err)
	}
	if disk, data := cache.DiskUsage(); disk != 0 || data != 0 {
		t.Errorf("an ephemeral bucket's DiskUsage: %d, %d, want 0", disk, data)
	}
}
