package index_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/index"
)

// benchCacheBytes is the page cache of BenchmarkPaged's paged index.
const benchCacheBytes = 32 << 20

// BenchmarkPaged builds the 1,000,000-row benchmark view (see benchBatches)
// into a persisted index with its trees in memory ("memory") and into a
// paged one under a page cache of 32 MiB ("paged"), in the same run, and
// reports for each: the build rate ("rows/s"), the heap the open index
// holds per row with its cache full, after a reopen, 20,000 queries and
// two reduces: the heap then less the heap once it is closed at the end
// ("heap-B/row", the cache counted), or less the heap before the reopen
// ("heap-B/row-from-reopen", the earlier measure, which some of the
// build's garbage still in the heap then lowers), the file per row
// ("file-B/row"), the time to reopen ("open-ms"), 100-row range queries
// from random keys (p50 and p99 of 20,000, "p50-ns", "p99-ns"), a
// group_level=1 reduce of the whole view once reductions are cached
// ("group1-ms"), and updates of 5 batches of 4096 random documents
// ("upd-docs/s"), and with the Close that follows ("upd+close-docs/s").
// The build's rate is also reported with its Close ("rows+close/s": a
// paged index writes back then) and per CPU second of the process, Close
// included ("rows/cpu-s", "upd+close-docs/cpu-s": steadier than wall time
// on a shared machine, but blind to waits for the disk). "paged" holds
// dirty leaves up to the cache's budget, "paged-dirty128" up to 128 MiB
// (see PageCache.SetDirtyBudget); "paged-cache64" has a cache and a dirty
// budget of 64 MiB.
func BenchmarkPaged(b *testing.B) {
	batches := benchBatches()
	for _, tc := range []struct {
		name         string
		cache, dirty int64
	}{{"memory", 0, 0}, {"paged", benchCacheBytes, benchCacheBytes}, {"paged-dirty128", benchCacheBytes, 128 << 20},
		{"paged-cache64", 2 * benchCacheBytes, 2 * benchCacheBytes}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				runPagedBench(b, batches, tc.cache, tc.dirty)
			}
		})
	}
}

func runPagedBench(b *testing.B, batches [][]index.DocUpdate, cacheBytes, dirtyBytes int64) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "ix")
	cfg := benchConfig(path)
	if cacheBytes > 0 {
		cfg.Cache = index.NewPageCache(cacheBytes).SetDirtyBudget(dirtyBytes)
	}
	ix, err := index.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	start, cpu := time.Now(), cpuTime()
	for _, batch := range batches {
		if err := ix.Apply(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(benchRows/time.Since(start).Seconds(), "rows/s")
	if err := ix.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(benchRows/time.Since(start).Seconds(), "rows+close/s")
	b.ReportMetric(benchRows/(cpuTime()-cpu).Seconds(), "rows/cpu-s")
	ix = nil // the built index is garbage now: the reopened one is measured
	base := heapInUse()
	if cacheBytes > 0 {
		cfg.Cache = index.NewPageCache(cacheBytes).SetDirtyBudget(dirtyBytes)
	}
	start = time.Now()
	ix, err = index.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "open-ms")
	rng := rand.New(rand.NewPCG(5, 6))
	times := make([]time.Duration, 0, 20000)
	for range cap(times) {
		t := time.Now()
		n := 0
		err := ix.Query(ctx, "v", index.Range{StartKey: benchKey(rng)}, func(index.Row) error {
			if n++; n == 100 {
				return index.ErrStop
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t))
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds()), "p99-ns")
	group := func() {
		groups := 0
		if err := ix.Reduce(ctx, "v", index.Range{}, index.Grouping{Level: 1}, func(_, _ []byte) error {
			groups++
			return nil
		}); err != nil || groups != benchGroups {
			b.Fatalf("group_level=1: %d groups, %v", groups, err)
		}
	}
	group() // computes the cached reductions
	t := time.Now()
	group()
	b.ReportMetric(float64(time.Since(t).Microseconds())/1000, "group1-ms")
	after := heapInUse()
	b.ReportMetric(float64(after-base)/benchRows, "heap-B/row-from-reopen")
	if cfg.Cache != nil {
		st := cfg.Cache.Stats()
		b.Logf("cache: %d of %d bytes, %d pages, %d hits, %d misses", st.Used, st.Budget, st.Pages, st.Hits, st.Misses)
	}
	urng := rand.New(rand.NewPCG(3, 4))
	docs := 0
	t, cpu = time.Now(), cpuTime()
	for range 5 {
		batch := make([]index.DocUpdate, benchBatch)
		for i := range batch {
			batch[i] = index.DocUpdate{
				DocID: fmt.Sprintf("doc%07d", urng.IntN(benchRows)),
				Rows:  map[string][]index.Emit{"v": {{Key: benchKey(urng), Value: []byte("1")}}},
			}
		}
		if err := ix.Apply(ctx, batch); err != nil {
			b.Fatal(err)
		}
		docs += len(batch)
	}
	b.ReportMetric(float64(docs)/time.Since(t).Seconds(), "upd-docs/s")
	if err := ix.Close(); err != nil { // a paged index leaves fewer than 65,536 logged documents in the log
		b.Fatal(err)
	}
	b.ReportMetric(float64(docs)/time.Since(t).Seconds(), "upd+close-docs/s")
	b.ReportMetric(float64(docs)/(cpuTime()-cpu).Seconds(), "upd+close-docs/cpu-s")
	if cfg.Cache != nil {
		cfg.Cache.Stats() // the cache stays reachable to here
	}
	b.ReportMetric(float64(int64(after)-int64(heapInUse()))/benchRows, "heap-B/row")
	if fi, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(fi.Size())/benchRows, "file-B/row")
	}
}
