package views_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/views"
)

// BenchmarkStaleFalseUnderWrites loads MAYFLY_BENCH_SF_DOCS documents
// (50,000 by default), builds the view of BenchmarkViews (paged, as serve's
// default, through a cache of MAYFLY_BENCH_VIEW_CACHE_MB MiB, 64 by
// default; in memory at 0), then keeps a steady stream of upserts
// of those documents going (4 writers; MAYFLY_BENCH_WRITE_RATE writes/s in
// all, as fast as they can when unset or 0) while one client runs 10-row
// stale=false queries one after another, one due every
// MAYFLY_BENCH_QUERY_EVERY_MS (5) ms, for MAYFLY_BENCH_SECONDS (10): the
// same queries on every build compared (fewer when they fall behind, as
// they do when the writes outrun the indexer), each one's latency counted from
// when it was due, so that a long wait counts for the queries it held
// back. The index follows the feed on its own (views' default). It
// reports the queries' latency p50, p99 and max, queries run, the
// writes/s reached and the changes the index lacked at the end: a
// stale=false query must answer once the index reaches the bucket's
// position at its start, however long the indexer's catch-up that applied
// it runs on.
func BenchmarkStaleFalseUnderWrites(b *testing.B) {
	n := 50_000
	if v, err := strconv.Atoi(os.Getenv("MAYFLY_BENCH_SF_DOCS")); err == nil && v > 0 {
		n = v
	}
	secs := 10
	if v, err := strconv.Atoi(os.Getenv("MAYFLY_BENCH_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	rate, _ := strconv.Atoi(os.Getenv("MAYFLY_BENCH_WRITE_RATE"))
	every := 5 * time.Millisecond
	if v, err := strconv.Atoi(os.Getenv("MAYFLY_BENCH_QUERY_EVERY_MS")); err == nil && v > 0 {
		every = time.Duration(v) * time.Millisecond
	}
	ctx := context.Background()
	eng, err := engine.Open(b.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default")); err != nil {
		b.Fatal(err)
	}
	loadBench(b, eng, n, 0)
	opts := &views.Options{IndexCache: index.NewPageCache(64 << 20)}
	if mb, err := strconv.Atoi(os.Getenv("MAYFLY_BENCH_VIEW_CACHE_MB")); err == nil && mb >= 0 {
		opts.IndexCache = nil
		if mb > 0 {
			opts.IndexCache = index.NewPageCache(int64(mb) << 20)
		}
	}
	svc, err := views.New(ctx, eng, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { svc.Close(); eng.Close() }()
	if _, err := svc.PutDesignDoc(ctx, "default", "bench", []byte(benchDDoc)); err != nil {
		b.Fatal(err)
	}
	runQuery(b, svc, "stale=false&limit=0")
	bk, err := eng.Bucket("default")
	if err != nil {
		b.Fatal(err)
	}
	coll := bk.DefaultCollection()

	for i := range b.N {
		var stop atomic.Bool
		var writes atomic.Int64
		var wg sync.WaitGroup
		const writers = 4
		start := time.Now()
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(i), uint64(w)))
				var gap time.Duration // between two writes of this writer
				if rate > 0 {
					gap = time.Duration(writers) * time.Second / time.Duration(rate)
				}
				for j := 0; !stop.Load(); j++ {
					if gap > 0 {
						if d := time.Until(start.Add(time.Duration(j) * gap)); d > 0 {
							time.Sleep(d) // the write rate asked for
						}
					}
					k := rng.IntN(n)
					v := fmt.Sprintf(`{"type":"t%d","n":%d,"v":%d.5}`, k%10, k, j%100)
					if _, err := coll.Upsert(ctx, fmt.Sprintf("doc%07d", k), []byte(v), nil); err != nil {
						b.Error(err)
						return
					}
					writes.Add(1)
				}
			}()
		}
		var lats []time.Duration
		run := time.Duration(secs) * time.Second
		for j := 0; ; j++ {
			t := start.Add(time.Duration(j) * every) // when the query is due
			if t.Sub(start) >= run || time.Since(start) >= run {
				break
			}
			if d := time.Until(t); d > 0 {
				time.Sleep(d) // the query rate
			}
			runQuery(b, svc, "stale=false&reduce=false&limit=10")
			lats = append(lats, time.Since(t)) // from when it was due: a stall counts for every query it holds back
		}
		el := time.Since(start)
		stop.Store(true)
		wg.Wait()
		info, err := svc.Info(ctx, "default", "bench")
		if err != nil {
			b.Fatal(err)
		}
		slices.Sort(lats)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(lats[len(lats)/2]), "p50-ms")
		b.ReportMetric(ms(lats[len(lats)*99/100]), "p99-ms")
		b.ReportMetric(ms(lats[len(lats)-1]), "max-ms")
		b.ReportMetric(float64(len(lats)), "queries")
		b.ReportMetric(float64(writes.Load())/el.Seconds(), "writes/s")
		b.ReportMetric(float64(info.Pending), "lag-changes")
		runQuery(b, svc, "stale=false&limit=0") // the next round starts caught up
	}
}
