package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// freeHeapMetric is the heap memory that is free but still resident: what
// Go keeps for future allocations until its scavenger returns it, which it
// does only down to the heap goal of the last collection.
const freeHeapMetric = "/memory/classes/heap/free:bytes"

// idleReleaseBytes is how much free, resident heap releaseIdleMemory lets
// stay.
const idleReleaseBytes = 8 << 20

// releaseFreeMemory gives the heap's free memory back to the system when
// more than limit bytes of it are resident, and reports whether it did. After
// a burst of load the heap goal stays at twice the burst's live heap until
// the next collection, which an idle server does not run for two minutes:
// the memory stays resident all that while (BENCHMARKS.md, issue 20).
func releaseFreeMemory(limit uint64) bool {
	s := []metrics.Sample{{Name: freeHeapMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[0].Value.Uint64() <= limit {
		return false
	}
	debug.FreeOSMemory()
	return true
}

// releaseIdleMemory runs releaseFreeMemory every interval until ctx ends.
// Once released, the memory is not resident: the next round finds nothing to
// do until another burst, so a steady server pays nothing.
func releaseIdleMemory(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		releaseFreeMemory(idleReleaseBytes)
	}
}
