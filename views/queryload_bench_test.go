package views_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/internal/memtune"
	"github.com/mayflydb/mayfly/views"
)

// BenchmarkQueryLoad builds the view of BenchmarkViews over
// MAYFLY_BENCH_DOCS documents (1,000,000 by default; paged through a cache
// of MAYFLY_BENCH_VIEW_CACHE_MB MiB when set, in memory otherwise), then runs 16 clients
// of 100-row range queries for MAYFLY_BENCH_SECONDS (20) under each heap
// policy in turn (Go's GOGC=100, memtune's at ratios 1.3 and 1.5, then
// both again), reporting per policy the latency p50 and p99, queries/s,
// collections, the collector's share of the CPU used (its marking on idle
// processors left out), and the peak resident memory against the live heap,
// with what the Go runtime held (mapped less released) and the heap's
// objects (live and garbage) at that peak (BENCHMARKS.md, "Resident memory
// against the live heap").
func BenchmarkQueryLoad(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1,000,000-document bucket")
	}
	n := benchDocs()
	secs := 20
	if s, err := strconv.Atoi(os.Getenv("MAYFLY_BENCH_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	eng, err := engine.Open(b.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default")); err != nil {
		b.Fatal(err)
	}
	loadBench(b, eng, n, 0)
	opts := &views.Options{NoAutoUpdate: true}
	if mb, err := strconv.Atoi(os.Getenv("MAYFLY_BENCH_VIEW_CACHE_MB")); err == nil && mb > 0 {
		opts.IndexCache = index.NewPageCache(int64(mb) << 20) // paged, as serve's default
	}
	svc, err := views.New(context.Background(), eng, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { svc.Close(); eng.Close() }()
	if _, err := svc.PutDesignDoc(context.Background(), "default", "bench", []byte(benchDDoc)); err != nil {
		b.Fatal(err)
	}
	runQuery(b, svc, "stale=false&limit=0")

	for _, pol := range []struct {
		name  string
		ratio float64
	}{{"gogc100", 0}, {"ratio1.3", 1.3}, {"ratio1.5", 1.5}, {"gogc100_again", 0}, {"ratio1.3_again", 1.3}} {
		b.Run(pol.name, func(b *testing.B) {
			debug.FreeOSMemory()
			if pol.ratio > 0 {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				memtune.Start(ctx, memtune.Policy{Ratio: pol.ratio, Headroom: memtune.DefaultHeadroom})
			}
			queryLoad(b, svc, n, 16, time.Duration(secs)*time.Second)
		})
	}
}

// queryLoad runs clients goroutines of random 100-row range queries for d
// and reports what BenchmarkQueryLoad lists.
func queryLoad(b *testing.B, svc *views.Service, n, clients int, d time.Duration) {
	samples := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/mark/assist:cpu-seconds"},
		{Name: "/cpu/classes/gc/mark/dedicated:cpu-seconds"}, {Name: "/cpu/classes/gc/pause:cpu-seconds"},
		{Name: "/cpu/classes/user:cpu-seconds"}, {Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	cpu := func() (gc, user float64) {
		return samples[1].Value.Float64() + samples[2].Value.Float64() + samples[3].Value.Float64(), samples[4].Value.Float64()
	}
	metrics.Read(samples)
	cycles0 := samples[0].Value.Uint64()
	gc0, user0 := cpu()

	var stop atomic.Bool
	var peakRSS, peakLive uint64
	var goAtPeak, objectsAtPeak uint64 // the Go runtime's resident memory and heap objects when RSS peaked
	sampled := make(chan struct{})
	go func() { // resident memory and live heap, every 50 ms
		defer close(sampled)
		for !stop.Load() {
			metrics.Read(samples[5:])
			peakLive = max(peakLive, samples[5].Value.Uint64())
			if r := vmRSS(); r > peakRSS {
				peakRSS = r
				goAtPeak = samples[6].Value.Uint64() - samples[7].Value.Uint64()
				objectsAtPeak = samples[8].Value.Uint64()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	lats := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for time.Since(start) < d {
				k := rng.IntN(n)
				t := time.Now()
				runQuery(b, svc, fmt.Sprintf("stale=ok&reduce=false&limit=100&startkey=%%5B%%22t%d%%22,%d%%5D", k%10, k))
				lats[c] = append(lats[c], time.Since(t))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	stop.Store(true)
	<-sampled
	all := slices.Concat(lats...)
	slices.Sort(all)
	metrics.Read(samples)
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(len(all))/el.Seconds(), "queries/s")
	b.ReportMetric(float64(samples[0].Value.Uint64()-cycles0), "gc-cycles")
	gc1, user1 := cpu()
	b.ReportMetric(gc1-gc0, "gc-cpu-s")
	b.ReportMetric(100*(gc1-gc0)/(gc1-gc0+user1-user0), "gc-share-%")
	b.ReportMetric(float64(peakRSS)/(1<<20), "peak-rss-MiB")
	b.ReportMetric(float64(peakLive)/(1<<20), "peak-live-MiB")
	b.ReportMetric(float64(peakRSS)/float64(peakLive), "rss/live")
	b.ReportMetric(float64(goAtPeak)/(1<<20), "go-resident-at-peak-MiB")
	b.ReportMetric(float64(objectsAtPeak)/(1<<20), "heap-objects-at-peak-MiB")
}

// vmRSS returns the process's resident memory in bytes (0 where
// /proc/self/status is missing).
func vmRSS() uint64 {
	s, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(s), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
