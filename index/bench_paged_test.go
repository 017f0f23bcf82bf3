package index_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
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

// BenchmarkPagedWriteBackPeak builds the 1,000,000-row benchmark view into
// a paged index (cache and dirty budget of 32 MiB, as "paged" above), its
// documents' ids scattered as a build's in partition order are (see
// benchBatchesOrder), with each write-back in one transaction ("onetx", as
// before the split), in transactions of at most 16 MiB of pages after the
// deletion of the pages freed earlier in bounded transactions too, the back
// index's changes in the final transaction ("split-backfinal", as before
// the back index's split), and with the back index's changes in bounded
// transactions too ("split", the default), and
// reports the peaks, sampled every 2 ms over the build and its Close, of
// the live heap as the last collection marked it ("peak-live-MiB": the
// benchmark's 1M documents, about 400 MiB of it, are held throughout), of the process's resident
// file-backed memory, which is mostly the index file's map
// ("peak-rssfile-MiB"), of the index file's map alone, from
// /proc/self/smaps ("peak-map-MiB"), and of its whole resident memory
// ("peak-rss-MiB"), beside the build rate ("rows+close/s", and per CPU
// second of the process, the sampler's included: "rows/cpu-s"), the
// transactions the write-backs committed before their final ones
// ("page-txs") and the releases of the map ("map-releases"), both before
// the Close. Run them
// alternately in one run (-count N) on a shared machine.
func BenchmarkPagedWriteBackPeak(b *testing.B) {
	batches := benchBatchesOrder(true)
	for _, tc := range []struct {
		name      string
		txBytes   int64
		backFinal bool
	}{{"onetx", -1, false}, {"split-backfinal", 0, true}, {"split", 0, false}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				runtime.GC()
				ctx := context.Background()
				path := filepath.Join(b.TempDir(), "ix")
				cfg := benchConfig(path)
				cfg.Cache = index.NewPageCache(benchCacheBytes).SetDirtyBudget(benchCacheBytes)
				ix, err := index.Open(ctx, cfg)
				if err != nil {
					b.Fatal(err)
				}
				index.SetWriteBackTxBytes(ix, tc.txBytes)
				index.SetBackInFinalTx(ix, tc.backFinal)
				stop := make(chan struct{})
				peaks := make(chan [4]uint64)
				go func() {
					var peak [4]uint64
					sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
					tick := time.NewTicker(2 * time.Millisecond)
					defer tick.Stop()
					for {
						metrics.Read(sample)
						rss, file := procRSS()
						peak[0] = max(peak[0], sample[0].Value.Uint64())
						peak[1], peak[2] = max(peak[1], file), max(peak[2], rss)
						if mapped, _, err := smapsRSS(path); err == nil {
							peak[3] = max(peak[3], uint64(mapped))
						}
						select {
						case <-stop:
							peaks <- peak
							return
						case <-tick.C:
						}
					}
				}()
				start, cpu := time.Now(), cpuTime()
				for _, batch := range batches {
					if err := ix.Apply(ctx, batch); err != nil {
						b.Fatal(err)
					}
				}
				txs := index.WriteBackPageTxs(ix)
				releases, _ := index.MapReleases(ix)
				if err := ix.Close(); err != nil {
					b.Fatal(err)
				}
				elapsed, cpuUsed := time.Since(start), cpuTime()-cpu
				close(stop)
				peak := <-peaks
				b.ReportMetric(benchRows/elapsed.Seconds(), "rows+close/s")
				b.ReportMetric(benchRows/cpuUsed.Seconds(), "rows/cpu-s")
				b.ReportMetric(float64(peak[0])/(1<<20), "peak-live-MiB")
				b.ReportMetric(float64(peak[1])/(1<<20), "peak-rssfile-MiB")
				b.ReportMetric(float64(peak[2])/(1<<20), "peak-rss-MiB")
				b.ReportMetric(float64(peak[3])/(1<<20), "peak-map-MiB")
				b.ReportMetric(float64(txs), "page-txs")
				b.ReportMetric(float64(releases), "map-releases")
			}
		})
	}
}

// procRSS returns the process's resident memory and its file-backed part,
// in bytes, from /proc/self/status (0, 0 where there is none).
func procRSS() (rss, file uint64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		var kb uint64
		if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &kb); err == nil {
			rss = kb << 10
		} else if _, err := fmt.Sscanf(line, "RssFile: %d kB", &kb); err == nil {
			file = kb << 10
		}
	}
	return rss, file
}

// smapsRSS returns the resident bytes of this process's mappings of path
// (/proc/self/smaps), and whether it is mapped at all.
func smapsRSS(path string) (rss int64, found bool, err error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") { // a mapping's header
			in = fields[len(fields)-1] == path
			found = found || in
			continue
		}
		if in && fields[0] == "Rss:" && len(fields) >= 2 {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, false, fmt.Errorf("smaps: %w", err)
			}
			rss += kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return 0, false, fmt.Errorf("smaps: %w", err)
	}
	return rss, found, nil
}

// BenchmarkPagedWriteBack times one write-back of the kind a view build
// leaves for the feed's quiet (WriteBack): the 1,000,000-row benchmark view
// is built into a paged index once (cache and dirty budget of 32 MiB,
// documents scattered as a build's), then each iteration re-emits 200,000
// of its documents (a new random key each, so most leaves hold a delta) under a
// dirty budget large enough to hold them all, outside the timing, and
// times the WriteBack that writes them. Run with -benchmem: its allocations are
// the collector's work while gets are served beside it.
func BenchmarkPagedWriteBack(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "ix")
	cfg := benchConfig(path)
	cache := index.NewPageCache(benchCacheBytes).SetDirtyBudget(benchCacheBytes)
	cfg.Cache = cache
	ix, err := index.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	for _, batch := range benchBatchesOrder(true) {
		if err := ix.Apply(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := ix.WriteBack(); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const docs = 200_000
	for b.Loop() {
		b.StopTimer()
		cache.SetDirtyBudget(4 << 30)
		for start := 0; start < docs; start += benchBatch {
			batch := make([]index.DocUpdate, 0, benchBatch)
			for range min(benchBatch, docs-start) {
				i := rng.IntN(benchRows)
				batch = append(batch, index.DocUpdate{
					DocID:     benchDocID(i, true),
					Partition: uint16(i % 1024),
					Seq:       uint64(1_000_000 + start),
					Rows:      map[string][]index.Emit{"v": {{Key: benchKey(rng), Value: []byte("1")}}},
				})
			}
			if err := ix.Apply(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		b.StartTimer()
		if err := ix.WriteBack(); err != nil {
			b.Fatal(err)
		}
	}
}
