package feed

import (
	"math"
	"runtime/metrics"
)

// A catch-up reads smaller batches while the process's memory is near Go's
// soft memory limit (debug.SetMemoryLimit, which mayfly serve sets to the
// buckets' quotas plus an overhead): the pipeline holds two batches at a
// time (their documents' values and what the sink made of them), and a
// collector that falls behind a build's allocations lets the heap pass the
// limit by up to a few such batches (BENCHMARKS.md, issue 19).
const (
	// pressureMargin: the memory is near the limit once it is within
	// limit/pressureMargin of it. The margin must hold what the batches in
	// flight add before the next look (two of views' 20,000-document
	// batches of 1 KiB documents hold ~40 MiB of values alone, beside
	// their mapped rows) plus the collector's overshoot (0-90 MiB over the
	// 5M build's 1,632 MiB limit): an eighth of that limit is 204 MiB. A
	// larger margin would shrink batches of processes the limit does not
	// pace: with GOGC's goal twice the live heap, the memory stays under
	// 7/8 of the limit, and batches full, while the live heap is under
	// about 7/16 of it.
	pressureMargin = 8
	// pressureDivisor: a batch read under pressure holds BatchSize /
	// pressureDivisor changes (at least one). A quarter of views' 20,000
	// is the 5,000 that kept the 5M build's heap under its limit in each
	// of its runs (5-16 % slower when used throughout, hence only under
	// pressure).
	pressureDivisor = 4
)

// batchSize is the most changes the next batch holds: size (0: no limit)
// or, when near reports that memory is near its limit, a quarter of it (at
// least 1).
func batchSize(size int, near func() bool) int {
	if size <= 0 || near == nil || !near() {
		return size
	}
	return max(size/pressureDivisor, 1)
}

// memoryProbe reports whether the Go runtime's memory, as its memory limit
// counts it (all it maps, less the heap memory given back to the system),
// is within an eighth of that limit (debug.SetMemoryLimit, which the
// /gc/gomemlimit metric reads); without a limit (math.MaxInt64) it never
// is. A consumer calls it once before each batch it reads; it must not be
// called concurrently (one producer reads the feed at a time).
type memoryProbe struct {
	samples [3]metrics.Sample // total, released, limit
}

func newMemoryProbe() *memoryProbe {
	p := &memoryProbe{}
	p.samples[0].Name = "/memory/classes/total:bytes"
	p.samples[1].Name = "/memory/classes/heap/released:bytes"
	p.samples[2].Name = "/gc/gomemlimit:bytes"
	return p
}

// near reports whether memory is near its limit.
func (p *memoryProbe) near() bool {
	metrics.Read(p.samples[:])
	var v [len(p.samples)]uint64
	for i, s := range p.samples {
		if s.Value.Kind() != metrics.KindUint64 {
			return false // a runtime without the metric: no pressure known
		}
		v[i] = s.Value.Uint64()
	}
	return nearLimit(v[0]-min(v[1], v[0]), v[2])
}

// nearLimit reports whether used bytes are within limit/pressureMargin of
// limit (math.MaxInt64: none, never near).
func nearLimit(used, limit uint64) bool {
	if limit >= math.MaxInt64 {
		return false
	}
	return used > limit-limit/pressureMargin
}
