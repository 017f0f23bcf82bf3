package main

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// sink keeps the burst's allocations from being optimised away.
var sink [][]byte

// TestReleaseFreeMemory: the garbage of a burst, collected or not, stays
// resident; releaseFreeMemory gives it back.
func TestReleaseFreeMemory(t *testing.T) {
	for range 64 {
		sink = append(sink, make([]byte, 1<<20))
		sink[len(sink)-1][0] = 1
	}
	sink = nil
	if r := reclaimable(); r <= idleReleaseBytes {
		t.Skipf("the runtime already returned the burst (%d bytes reclaimable)", r)
	}
	if !releaseFreeMemory(idleReleaseBytes) {
		t.Fatal("releaseFreeMemory did nothing with 64 MiB of garbage")
	}
	// The burst's 64 MiB went back. What other tests' goroutines, still
	// winding down, allocate meanwhile is not counted against it: the
	// figure once read 4,268,032 bytes against the 4 MiB under which
	// releaseFreeMemory does nothing.
	if r := reclaimable(); r > 16<<20 {
		t.Fatalf("after the release %d bytes are reclaimable, want a quarter of the burst's 64 MiB at most", r)
	}
}

// TestShouldRelease: reclaimable memory goes back as soon as the heap goes
// quiet after a burst, and at the latest every idleForceInterval while it
// stays busy; a heap with little to give back is left alone.
func TestShouldRelease(t *testing.T) {
	const big = 400 << 20 // a view build's freed heap
	cases := []struct {
		name         string
		reclaimable  uint64
		allocated    uint64
		sinceRelease time.Duration
		want         bool
	}{
		{"burst over: quiet, much to give back", big, 1 << 20, idleCheckInterval, true},
		{"still busy, released recently", big, 200 << 20, idleCheckInterval, false},
		{"still busy, force interval reached", big, 200 << 20, idleForceInterval, true},
		{"quiet but little to give back", idleReleaseBytes, 0, idleForceInterval, false},
		{"just under quiet", big, quietAllocBytes - 1, idleCheckInterval, true},
		{"just busy", big, quietAllocBytes, idleForceInterval - idleCheckInterval, false},
	}
	for _, c := range cases {
		if got := shouldRelease(c.reclaimable, idleReleaseBytes, c.allocated, c.sinceRelease); got != c.want {
			t.Errorf("%s: shouldRelease(%d, %d, %d, %v) = %v, want %v", c.name, c.reclaimable, idleReleaseBytes, c.allocated, c.sinceRelease, got, c.want)
		}
	}
}

// TestReleaseLimit: a small heap gives back all but 4 MiB; a large one
// keeps an eighth of its live heap reclaimable, so that its idle
// allocations do not make it collect all of it every few seconds.
func TestReleaseLimit(t *testing.T) {
	for _, c := range []struct{ live, want uint64 }{
		{0, 4 << 20},
		{8 << 20, 4 << 20},
		{32 << 20, 4 << 20},
		{1 << 30, 128 << 20},
	} {
		if got := releaseLimit(c.live); got != c.want {
			t.Errorf("releaseLimit(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}

// TestReleaseIdleMemoryAfterBurst: a burst's garbage is given back within a
// few checks once the heap goes quiet, well before the force interval.
func TestReleaseIdleMemoryAfterBurst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		releaseIdleMemory(ctx, nil, slog.New(slog.DiscardHandler))
	}()
	defer func() { cancel(); <-done }()
	for range 64 {
		sink = append(sink, make([]byte, 1<<20))
		sink[len(sink)-1][0] = 1
	}
	sink = nil
	// Quiet from here: the first check sees the burst's allocations, the
	// next (or the one after, on a busy machine) a quiet heap.
	deadline := time.Now().Add(idleForceInterval - idleCheckInterval) // wall clock: the releaser runs on real time; a deadline to catch it not releasing
	for time.Now().Before(deadline) {                                 // wall clock: as above
		if reclaimable() <= idleReleaseBytes {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%d bytes still reclaimable %v after a burst, want <= %d", reclaimable(), idleForceInterval-idleCheckInterval, idleReleaseBytes)
}
