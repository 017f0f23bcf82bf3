package main

import (
	"runtime"
	"runtime/metrics"
	"testing"
)

// TestReleaseFreeMemory: garbage of a burst, once collected, is free heap
// that stays resident; releaseFreeMemory gives it back.
func TestReleaseFreeMemory(t *testing.T) {
	free := func() uint64 {
		s := []metrics.Sample{{Name: freeHeapMetric}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	var keep [][]byte
	for range 64 {
		keep = append(keep, make([]byte, 1<<20))
	}
	for _, b := range keep {
		b[0] = 1
	}
	keep = nil
	runtime.GC()
	if f := free(); f <= idleReleaseBytes {
		t.Skipf("the scavenger already returned the burst (%d bytes free and resident)", f)
	}
	if !releaseFreeMemory(idleReleaseBytes) {
		t.Fatal("releaseFreeMemory did nothing with 64 MiB of free, resident heap")
	}
	if f := free(); f > idleReleaseBytes {
		t.Fatalf("after the release %d bytes of free heap stay resident, want <= %d", f, idleReleaseBytes)
	}
}
