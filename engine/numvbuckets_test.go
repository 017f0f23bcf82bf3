package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestNumVBuckets: a bucket created with numVBuckets has that many
// partitions, keys hash within them, the count outlives a restart, and no
// update changes it (one that leaves it unset keeps it); a bucket created
// without takes the engine's NumPartitions.
func TestNumVBuckets(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *engine.Engine {
		eng, err := engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 32, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	eng := open()
	for _, n := range []int{-1, engine.MaxVBuckets + 1} {
		if _, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "bad", NumVBuckets: n}); !errors.Is(err, engine.ErrInvalidSetting) {
			t.Errorf("numVBuckets %d: err = %v, want ErrInvalidSetting", n, err)
		}
	}
	small, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "small", NumVBuckets: 5})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if small.NumPartitions() != 5 || small.Settings().NumVBuckets != 5 {
		t.Fatalf("small: %d partitions, numVBuckets %d, want 5", small.NumPartitions(), small.Settings().NumVBuckets)
	}
	if plain.NumPartitions() != 32 || plain.Settings().NumVBuckets != 32 {
		t.Fatalf("plain: %d partitions, numVBuckets %d, want the engine's 32", plain.NumPartitions(), plain.Settings().NumVBuckets)
	}
	seen := map[int]bool{}
	for i := range 200 {
		key := string(rune('a'+i%26)) + string(rune('a'+i/26))
		if _, err := small.DefaultCollection().Upsert(ctx, key, []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
		p := small.PartitionOf(key)
		if p < 0 || p >= 5 {
			t.Fatalf("key %s hashes to partition %d of 5", key, p)
		}
		seen[p] = true
	}
	if len(seen) != 5 {
		t.Errorf("200 keys reached %d of 5 partitions", len(seen))
	}
	if _, _, err := small.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.NumVBuckets = 6; return nil }); !errors.Is(err, engine.ErrInvalidSetting) {
		t.Fatalf("numVBuckets changed: err = %v, want ErrInvalidSetting", err)
	}
	if _, upd, err := small.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.NumVBuckets, s.MaxTTL = 0, 60; return nil }); err != nil || upd.NumVBuckets != 5 || upd.MaxTTL != 60 {
		t.Fatalf("update leaving numVBuckets unset: %+v, %v; want 5 kept, maxTTL 60", upd, err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	eng = open()
	defer closeChecked(t, eng)
	small, err = eng.Bucket("small")
	if err != nil {
		t.Fatal(err)
	}
	if small.NumPartitions() != 5 || small.Settings().NumVBuckets != 5 || small.Stats().CurrItems != 200 {
		t.Fatalf("after a restart: %d partitions, numVBuckets %d, %d items; want 5, 5, 200",
			small.NumPartitions(), small.Settings().NumVBuckets, small.Stats().CurrItems)
	}
}
