package engine

import (
	"flag"
	"math"
	"testing"
	"time"
)

// backfillDocs is how many documents BenchmarkChangesBackfill stores.
var backfillDocs = flag.Int("bfdocs", 20_000, "documents BenchmarkChangesBackfill stores")

// BenchmarkChangesBackfill: a fullEviction pebble bucket of 1,024
// partitions holding -bfdocs documents (a tenth deleted), every item out of
// memory whole, read from 0 as a _changes window reads it (partition by
// partition, 1,000 versions a read). It reports the time and the stored
// documents read for each document of the bucket, each partition
// backfilled with a pass of its own (how the engine read before
// ChangeScan.ReadAhead) and with the later partitions read ahead in one
// pass, measured alternately in one run.
func BenchmarkChangesBackfill(b *testing.B) {
	const parts = 1024
	n := *backfillDocs
	bk, cs := backfillBucket(b, parts, n)
	measure := func(readAhead int) (time.Duration, int64) {
		cs.read.Store(0)
		start := time.Now() // wall clock: a benchmark's measure
		if seen := readWindow(b, bk, 1000, readAhead); len(seen) != n {
			b.Fatalf("%d documents seen, want %d", len(seen), n)
		}
		return time.Since(start), cs.read.Load() // wall clock: a benchmark's measure
	}
	var tEach, tAhead time.Duration
	var rEach, rAhead int64
	b.ResetTimer()
	for range b.N {
		d, r := measure(0)
		tEach, rEach = tEach+d, rEach+r
		d, r = measure(math.MaxInt)
		tAhead, rAhead = tAhead+d, rAhead+r
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) / float64(n) }
	reads := func(r int64) float64 { return float64(r) / float64(b.N) / float64(n) }
	b.ReportMetric(per(tEach), "each-ns/doc")
	b.ReportMetric(per(tAhead), "ahead-ns/doc")
	b.ReportMetric(reads(rEach), "each-reads/doc")
	b.ReportMetric(reads(rAhead), "ahead-reads/doc")
}
