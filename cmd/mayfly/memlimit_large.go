package main

import (
	"time"

	"github.com/mayflydb/mayfly/internal/memtune"
)

// Large quotas. autoMemoryOverhead's half of the quotas was measured at a
// 256 MiB bucket; at 1 GiB it let the Go heap fill 640 MiB beyond the
// quota and the view cache, and a 5,000,000-document load peaked at
// 2,141-2,174 MiB of resident memory (1,080-1,225 MiB of heap in use, the
// rest freed between collections and still resident) against the issue's
// quota + index budget + 200 MB = 1,736 (BENCHMARKS.md, "Large quotas:
// the memory limit, bloom filters"). What a large bucket holds beside its
// quota does not grow with the quota the way a small one's slack does, so
// from overheadShrinkFrom the automatic overhead shrinks, linearly, to
// largeOverhead at overheadShrinkTo and above: the limit still grows with
// the quota, and the overhead is continuous where it starts to shrink.
//
// largeOverhead was 128 MiB (autoOverheadBase) until a 5,000,000-document
// view build at a 1 GiB quota was measured at the bound on
// resident memory: with the index file's map kept small its peak was the
// Go heap at its limit plus what lies outside the heap (the binary's
// pages, the store's C memory, the runtime's metadata: 85-95 MiB), 1,761
// MiB against quota + view budget + 200 = 1,736; with 96 MiB, and the
// live floor at a twelfth, 1,712, the build no slower (BENCHMARKS.md,
// "The memory limit at large quotas, again").
const (
	overheadShrinkFrom = 512 << 20
	overheadShrinkTo   = 1 << 30
	// largeOverhead is the automatic overhead from overheadShrinkTo up.
	largeOverhead = 96 << 20
)

// scaledMemoryOverhead returns the overhead --memory-overhead-mb auto adds
// to buckets that hold held bytes: autoMemoryOverhead's up to
// overheadShrinkFrom, then less, down to largeOverhead.
func scaledMemoryOverhead(held int64) int64 {
	auto := autoMemoryOverhead(held)
	if held <= overheadShrinkFrom {
		return auto
	}
	if held >= overheadShrinkTo {
		return largeOverhead
	}
	from := autoMemoryOverhead(overheadShrinkFrom)
	return from - (from-largeOverhead)*(held-overheadShrinkFrom)/(overheadShrinkTo-overheadShrinkFrom)
}

// A limit near the live heap makes the collector run back to back: a view
// build over a 5,000,000-document bucket keeps ~1.6 GB live (the engine's
// ~1.1 GB for a 1 GiB quota, the index's cache and dirty leaves), above a
// limit of quota + view cache + 96 MiB. So the automatic limit is never
// below the live heap plus a liveFloorShare of it: the garbage a
// collection cycle may leave stays a twelfth of the live heap at most
// (an eighth until the measurement above),
// whatever the quota. The live heap is what the last collection marked,
// which counts what was allocated while it marked: under a load's stream
// of sets it read 1.0-1.6 GB from one collection to the next for 1.0 GB
// truly live, and a floor on each reading let the limit climb with it
// (1,792 MiB where 1,664 was meant; BENCHMARKS.md). So the floor is on the
// least reading of the last liveFloorWindow, read every liveFloorInterval,
// and moves in steps of liveFloorStep so that a heap that breathes does
// not reset the limit at every look.
const (
	liveFloorShare    = 12
	liveFloorStep     = 16 << 20
	liveFloorInterval = time.Second
	liveFloorWindow   = 10 // readings
)

// liveWindow keeps the last liveFloorWindow readings of the live heap.
type liveWindow struct {
	r [liveFloorWindow]uint64
	n int // readings noted (the next goes to r[n%len(r)])
}

// note adds a reading.
func (w *liveWindow) note(live uint64) {
	w.r[w.n%len(w.r)] = live
	w.n++
}

// least returns the least reading of the window; 0 before the window is
// full (a server's first seconds have no floor).
func (w *liveWindow) least() uint64 {
	if w.n < len(w.r) {
		return 0
	}
	m := w.r[0]
	for _, v := range w.r[1:] {
		m = min(m, v)
	}
	return m
}

// liveFloor returns the least limit for a live heap of live bytes: live
// plus a liveFloorShare, rounded up to a liveFloorStep.
func liveFloor(live uint64) int64 {
	f := int64(live + live/liveFloorShare)
	return (f + liveFloorStep - 1) / liveFloorStep * liveFloorStep
}

// readLiveHeap returns the live heap the last collection found.
func readLiveHeap() uint64 { return memtune.ReadHeap().Live }
