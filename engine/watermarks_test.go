package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestWaterMarksSettable: a bucket's water marks are set in bytes
// (cbepctl's mem_high_wat / mem_low_wat), checked (at most the quota, low
// below high), used by eviction at once, moved in proportion by a change
// of the quota, and kept across a restart.
func TestWaterMarksSettable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng, err := engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 64, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "m", Type: engine.Memcached, RAMQuotaMB: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	for i := 0; b.Stats().MemUsed < 1<<20; i++ {
		if _, err := c.Upsert(ctx, memKey(i), memValue(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.Stats(); st.Evictions != 0 || st.MemHighWat != 2<<20*85/100 || st.MemLowWat != 2<<20*75/100 {
		t.Fatalf("before: evictions %d, marks %d/%d, want none and the defaults", st.Evictions, st.MemHighWat, st.MemLowWat)
	}
	set := func(high, low int64) error {
		_, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error {
			s.MemHighWat, s.MemLowWat = high, low
			return nil
		})
		return err
	}
	for _, bad := range [][2]int64{{3 << 20, 0}, {0, 3 << 20}, {600 << 10, 700 << 10}, {600 << 10, 600 << 10}, {1 << 20, 0}, {-1, 0}} {
		if err := set(bad[0], bad[1]); !errors.Is(err, engine.ErrInvalidSetting) {
			t.Errorf("mem_high_wat %d, mem_low_wat %d: %v, want ErrInvalidSetting", bad[0], bad[1], err)
		}
	}
	// Lowered under mem_used: the bucket evicts down to the new low mark
	// at once.
	if err := set(800<<10, 600<<10); err != nil {
		t.Fatal(err)
	}
	st := b.Stats()
	if st.MemHighWat != 800<<10 || st.MemLowWat != 600<<10 {
		t.Errorf("marks %d/%d, want %d/%d", st.MemHighWat, st.MemLowWat, 800<<10, 600<<10)
	}
	if st.Evictions == 0 || st.MemUsed > 600<<10 {
		t.Errorf("high-water mark lowered under mem_used: evictions %d, mem_used %d, want it at most %d", st.Evictions, st.MemUsed, 600<<10)
	}
	// The quota doubled: the marks keep their share of it.
	if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.SetRAMQuotaMB(4); return nil }); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.MemHighWat != 1600<<10 || st.MemLowWat != 1200<<10 {
		t.Errorf("quota 2 → 4 MiB: marks %d/%d, want %d/%d", st.MemHighWat, st.MemLowWat, 1600<<10, 1200<<10)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	eng, err = engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 64, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, eng)
	b, err = eng.Bucket("m")
	if err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.MemHighWat != 1600<<10 || st.MemLowWat != 1200<<10 {
		t.Errorf("after a restart: marks %d/%d, want %d/%d", st.MemHighWat, st.MemLowWat, 1600<<10, 1200<<10)
	}
	// 0 is the default again.
	if err := set(0, 0); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.MemHighWat != 4<<20*85/100 || st.MemLowWat != 4<<20*75/100 {
		t.Errorf("reset: marks %d/%d, want the defaults", st.MemHighWat, st.MemLowWat)
	}
}
