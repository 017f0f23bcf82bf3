package main

import (
	"context"
	"io"
	"log/slog"
	"runtime/debug"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestMemLimitFollowsQuotas: Go's memory limit is the buckets' quotas plus
// the overhead, updated as buckets are created, edited and deleted.
func TestMemLimitFollowsQuotas(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "a", RAMQuotaMB: 100}); err != nil {
		t.Fatal(err)
	}
	var limit int64
	ml := newMemLimit(256, false, func(n int64) int64 { old := limit; limit = n; return old }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ml.storageInHeap = false // TestMemLimitCountsStorageInHeap counts the stores
	if err := eng.Attach(ctx, ml); err != nil {
		t.Fatal(err)
	}
	want := func(step string, mb int64) {
		t.Helper()
		if limit != mb<<20 {
			t.Errorf("%s: limit %d MiB, want %d MiB", step, limit>>20, mb)
		}
	}
	want("one bucket of 100 MiB", 356)
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "m", Type: engine.Memcached, RAMQuotaMB: 50})
	if err != nil {
		t.Fatal(err)
	}
	want("a memcached bucket of 50 MiB created", 406)
	if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.RAMQuotaMB = 20; return nil }); err != nil {
		t.Fatal(err)
	}
	want("its quota lowered to 20 MiB", 376)
	if err := eng.DeleteBucket(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	want("the 100 MiB bucket deleted", 276)
}

// TestAutoMemoryOverhead: the default overhead is 128 MiB plus half of
// what the buckets hold, so that a 1 GiB bucket's limit is 1,664 MiB where
// it was 2,048 (plus the view cache), and a small bucket still has 128 MiB
// of room or more.
func TestAutoMemoryOverhead(t *testing.T) {
	for _, c := range []struct{ heldMB, wantMB int64 }{
		{0, 128},
		{96, 176},
		{256, 256},
		{1024, 640},
		{8192, 4224},
	} {
		if got := autoMemoryOverhead(c.heldMB << 20); got != c.wantMB<<20 {
			t.Errorf("buckets holding %d MiB: overhead %d MiB, want %d", c.heldMB, got>>20, c.wantMB)
		}
	}
}

// TestMemLimitAuto: with the automatic overhead the limit is the buckets'
// quotas, the stated part (serve's view cache) and the overhead of the
// quotas (scaledMemoryOverhead), and follows a quota's change.
func TestMemLimitAuto(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "a", RAMQuotaMB: 256})
	if err != nil {
		t.Fatal(err)
	}
	var limit int64
	ml := newMemLimit(64, true, func(n int64) int64 { old := limit; limit = n; return old }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ml.storageInHeap = false
	if err := eng.Attach(ctx, ml); err != nil {
		t.Fatal(err)
	}
	if want := int64(256+64+128+128) << 20; limit != want {
		t.Errorf("a 256 MiB bucket and 64 MiB stated: limit %d MiB, want %d", limit>>20, want>>20)
	}
	if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.RAMQuotaMB = 1024; return nil }); err != nil {
		t.Fatal(err)
	}
	if want := int64(1024+64+96) << 20; limit != want {
		t.Errorf("its quota raised to 1 GiB: limit %d MiB, want %d (the overhead shrunk to its base)", limit>>20, want>>20)
	}
}

// TestMemLimitCountsStorageInHeap: where a pebble store's block cache and
// memtables are in the Go heap (a build without cgo), each pebble bucket
// adds its budget (9.6 MiB for a 100 MiB quota) to the limit; a memcached bucket, which
// has no store, adds nothing; where they are C memory, nothing is added.
func TestMemLimitCountsStorageInHeap(t *testing.T) {
	ctx := context.Background()
	for _, inHeap := range []bool{true, false} {
		eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 8, NoSync: true, Storage: engine.StoragePebble})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		for _, s := range []engine.BucketSettings{{Name: "a", RAMQuotaMB: 100}, {Name: "m", Type: engine.Memcached, RAMQuotaMB: 50}} {
			if _, err := eng.CreateBucket(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		var limit int64
		ml := newMemLimit(256, false, func(n int64) int64 { old := limit; limit = n; return old }, slog.New(slog.NewTextHandler(io.Discard, nil)))
		ml.storageInHeap = inHeap
		if err := eng.Attach(ctx, ml); err != nil {
			t.Fatal(err)
		}
		want := int64(256+100+50) << 20
		if inHeap {
			want += 8<<20 + 2*(100<<20)/128 // a 100 MiB bucket's: 8 MiB of cache, 2 memtables of a 128th
		}
		if limit != want {
			t.Errorf("storage in the Go heap %v: limit %d MiB, want %d MiB", inHeap, limit>>20, want>>20)
		}
	}
}

// TestServeRestoresGoMemoryPolicy: serve tunes Go's GC percent and memory
// limit while it runs, and when it returns both are as it found them (for
// the next serve in the same process: tests, an embedding program).
func TestServeRestoresGoMemoryPolicy(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("MAYFLY_ADMIN_PASSWORD", "")
	oldPercent := debug.SetGCPercent(77)
	oldLimit := debug.SetMemoryLimit(1 << 40)
	defer func() { debug.SetGCPercent(oldPercent); debug.SetMemoryLimit(oldLimit) }()
	var stdout syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--memcached", "", "--kv", "", "--views", "", "--search", "", "--log-level", "error"}, &stdout, io.Discard)
	}()
	served(t, &stdout, "serving HTTP on http://")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if p, l := debug.SetGCPercent(77), debug.SetMemoryLimit(1<<40); p != 77 || l != 1<<40 {
		t.Fatalf("after serve returned: GC percent %d, memory limit %d; want 77, %d", p, l, int64(1<<40))
	}
}

// TestScaledMemoryOverhead: up to 512 MiB held the automatic overhead is
// autoMemoryOverhead's; from there it shrinks to 96 MiB at 1 GiB
// and stays there, continuous, and the limit it makes (held + overhead)
// never falls as the quota grows.
func TestScaledMemoryOverhead(t *testing.T) {
	for _, c := range []struct{ heldMB, wantMB int64 }{
		{0, 128},
		{256, 256},
		{512, 384},
		{768, 240},
		{1024, 96},
		{8192, 96},
	} {
		if got := scaledMemoryOverhead(c.heldMB << 20); got != c.wantMB<<20 {
			t.Errorf("buckets holding %d MiB: overhead %d MiB, want %d", c.heldMB, got>>20, c.wantMB)
		}
	}
	prev := int64(0)
	for held := int64(0); held <= 4<<30; held += 1 << 20 {
		if got := held + scaledMemoryOverhead(held); got < prev {
			t.Fatalf("held %d MiB: limit %d below the %d of a MiB less", held>>20, got, prev)
		} else {
			prev = got
		}
		if held <= overheadShrinkFrom && scaledMemoryOverhead(held) != autoMemoryOverhead(held) {
			t.Fatalf("held %d MiB: small quotas' overhead changed", held>>20)
		}
	}
}

// TestLiveFloor: the least automatic limit is the live heap and a twelfth,
// in 16 MiB steps.
func TestLiveFloor(t *testing.T) {
	for _, c := range []struct{ liveMB, wantMB uint64 }{
		{0, 0},
		{1, 16},
		{128, 144},
		{1600, 1744},
	} {
		if got := liveFloor(c.liveMB << 20); got != int64(c.wantMB<<20) {
			t.Errorf("live %d MiB: floor %d MiB, want %d", c.liveMB, got>>20, c.wantMB)
		}
	}
}

// TestMemLimitFollowsLiveHeap: with the automatic overhead the limit rises
// above the quotas' when the live heap would pass it (a view build over a
// large bucket) for the whole window of readings, not at one high reading,
// and comes back down at the first low one; a stated overhead is left
// alone.
func TestMemLimitFollowsLiveHeap(t *testing.T) {
	ctx := context.Background()
	for _, auto := range []bool{true, false} {
		eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 8, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		if _, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "a", RAMQuotaMB: 1024}); err != nil {
			t.Fatal(err)
		}
		var limit int64
		ml := newMemLimit(512, auto, func(n int64) int64 { old := limit; limit = n; return old }, slog.New(slog.NewTextHandler(io.Discard, nil)))
		ml.storageInHeap = false
		if err := eng.Attach(ctx, ml); err != nil {
			t.Fatal(err)
		}
		base := int64(1024+512) << 20
		if auto {
			base += 96 << 20
		}
		if limit != base {
			t.Errorf("auto %v, no reading yet: limit %d MiB, want %d", auto, limit>>20, base>>20)
		}
		note := func(mb uint64) {
			ml.mu.Lock()
			ml.lives.note(mb << 20)
			ml.applyLocked()
			ml.mu.Unlock()
		}
		for range liveFloorWindow - 1 {
			note(100)
		}
		note(1600) // one reading high: a collection that marked during a burst
		if limit != base {
			t.Errorf("auto %v, one reading of 1,600 MiB live: limit %d MiB, want %d", auto, limit>>20, base>>20)
		}
		for range liveFloorWindow {
			note(1600)
		}
		want := base
		if auto {
			want = 1744 << 20
		}
		if limit != want {
			t.Errorf("auto %v, live 1,600 MiB: limit %d MiB, want %d", auto, limit>>20, want>>20)
		}
		note(900)
		if limit != base {
			t.Errorf("auto %v, live back at 900 MiB: limit %d MiB, want %d", auto, limit>>20, base>>20)
		}
	}
}
