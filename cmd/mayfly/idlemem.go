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
}

// idleReleaseBytes is how much reclaimable heap (free or garbage)
// releaseIdleMemory lets stay resident.
const idleReleaseBytes = 8 << 20

// reclaimable returns the heap's free memory that is still resident plus its
// garbage not yet collected.
func reclaimable() uint64 {
	var s [len(idleMetrics)]metrics.Sample
	for i, name := range idleMetrics {
		s[i].Name = name
	}
	metrics.Read(s[:])
	for _, v := range s {
		if v.Value.Kind() != metrics.KindUint64 {
			return 0 // not measured by this runtime: do nothing
		}
	}
	free, objects, live := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
	return free + objects - min(live, objects)
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

// releaseIdleMemory runs releaseFreeMemory every interval until ctx ends.
// An idle server pays one collection after a burst and none after; a busy
// one at most one collection an interval beside its own. Each interval it
// also takes the executable's pages out of the process
// (binaryPages): those the server used since (a login's, a burst's)
// leave, and those it keeps using come back at a minor fault each, a few
// hundred faults an interval.
func releaseIdleMemory(ctx context.Context, interval time.Duration, bin *binaryPages, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		releaseFreeMemory(idleReleaseBytes)
		logBinaryRelease(bin, log)
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
