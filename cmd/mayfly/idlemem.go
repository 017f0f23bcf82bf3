package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The heap figures releaseFreeMemory reads (runtime/metrics).
var idleMetrics = [...]string{
	"/memory/classes/heap/free:bytes",    // free, still resident
	"/memory/classes/heap/objects:bytes", // objects, live or garbage not yet collected
	"/gc/heap/live:bytes",                // live at the last collection
	"/gc/heap/allocs:bytes",              // allocated since the process started
}

// idleReleaseBytes is how much reclaimable heap (free or garbage)
// releaseIdleMemory lets stay resident at least; idleReleaseShare, the
// share of the live heap it lets stay beside it (an eighth), so that an
// idle server of a large heap, whose own few allocations add up to the
// least in a minute, does not pay a collection of all of it that often.
// A server of a thousand small keys (the memcached benchmark) lives in
// 6-8 MB of heap: 8 MiB let as much again stay resident after a burst. A
// Go heap keeps 2-3 MB free that it does not give back (its spans' free
// ends): less than that would collect at every look.
const (
	idleReleaseBytes = 4 << 20
	idleReleaseShare = 8
)

// releaseLimit is how much reclaimable heap may stay resident beside a
// live heap of live bytes.
func releaseLimit(live uint64) uint64 { return max(idleReleaseBytes, live/idleReleaseShare) }

// The release's cadence. Every idleCheckInterval releaseIdleMemory looks at
// how much the heap allocated since its last look: less than quietAllocBytes
// (a few hundred small requests' worth) means the burst is over, and the
// heap's reclaimable memory goes back to the system then, rather than up to
// an idleForceInterval later. A busy server, which never looks quiet, still
// gives it back every idleForceInterval. Measured (BENCHMARKS.md, "The
// memory overhead's default, measured"): a build's 400-500 MiB of freed heap
// stayed resident until the next force with Go's limit a GiB away.
const (
	idleCheckInterval = 5 * time.Second
	idleForceInterval = 30 * time.Second
	quietAllocBytes   = 4 << 20
)

// heapFigures are the runtime's figures idleMemory reads.
type heapFigures struct {
	reclaimable uint64 // free heap still resident plus garbage not yet collected
	live        uint64 // live at the last collection
	allocs      uint64 // allocated since the process started
}

// readHeap reads the heap's figures; ok is false when this runtime does
// not measure them.
func readHeap() (f heapFigures, ok bool) {
	var s [len(idleMetrics)]metrics.Sample
	for i, name := range idleMetrics {
		s[i].Name = name
	}
	metrics.Read(s[:])
	for _, v := range s {
		if v.Value.Kind() != metrics.KindUint64 {
			return heapFigures{}, false
		}
	}
	free, objects, live := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
	return heapFigures{reclaimable: free + objects - min(live, objects), live: live, allocs: s[3].Value.Uint64()}, true
}

// reclaimable returns the heap's free memory that is still resident plus its
// garbage not yet collected.
func reclaimable() uint64 {
	f, _ := readHeap()
	return f.reclaimable
}

// shouldRelease reports whether idle memory goes back to the system now:
// more than limit is reclaimable (releaseLimit), and either the heap allocated
// less than quietAllocBytes since the last look (the burst is over) or the
// last release was at least idleForceInterval ago.
func shouldRelease(reclaimable, limit, allocatedSince uint64, sinceRelease time.Duration) bool {
	if reclaimable <= limit {
		return false
	}
	return allocatedSince < quietAllocBytes || sinceRelease >= idleForceInterval
}

// releaseFreeMemory collects the heap and gives its free memory back to the
// system when more than limit bytes are reclaimable, and reports whether it
// did. After a burst of load the heap goal stays at twice the burst's live
// heap and the burst's garbage uncollected until the next collection, which
// an idle server does not run for two minutes: the memory stays resident
// all that while (BENCHMARKS.md, issue 20).
func releaseFreeMemory(limit uint64) bool {
	if reclaimable() <= limit {
		return false
	}
	debug.FreeOSMemory()
	return true
}

// releaseIdleMemory gives the heap's reclaimable memory back to the system
// (a collection and debug.FreeOSMemory) when shouldRelease says so, looking
// every idleCheckInterval, until ctx ends. An idle server pays one
// collection within idleCheckInterval of a burst's end and none after; a
// busy one at most one collection an idleForceInterval beside its own.
// Every idleForceInterval it also takes the executable's pages out of the
// process (binaryPages): those the server used since (a login's, a
// burst's) leave, and those it keeps using come back at a minor fault
// each, a few hundred faults an interval.
func releaseIdleMemory(ctx context.Context, bin *binaryPages, log *slog.Logger) {
	t := time.NewTicker(idleCheckInterval)
	defer t.Stop()
	prev, _ := readHeap()
	var sinceRelease, sinceBinary time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sinceRelease += idleCheckInterval
		sinceBinary += idleCheckInterval
		f, ok := readHeap()
		if ok && shouldRelease(f.reclaimable, releaseLimit(f.live), f.allocs-min(prev.allocs, f.allocs), sinceRelease) {
			debug.FreeOSMemory()
			sinceRelease = 0
			f, _ = readHeap() // FreeOSMemory's own collection allocates little, but count from here
		}
		prev = f
		if sinceBinary >= idleForceInterval {
			sinceBinary = 0
			logBinaryRelease(bin, log)
		}
	}
}

// logBinaryRelease releases the executable's pages, logging what it did.
func logBinaryRelease(bin *binaryPages, log *slog.Logger) {
	n, err := bin.release()
	if err != nil {
		log.Warn("releasing the executable's pages", "err", err)
		return
	}
	log.Debug("released the executable's pages", "bytes", n)
}
