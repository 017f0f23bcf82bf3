package main

import (
	"testing"
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
	if r := reclaimable(); r > idleReleaseBytes {
		t.Fatalf("after the release %d bytes are reclaimable, want <= %d", r, idleReleaseBytes)
	}
}
