package views_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/views"
)

// benchDocs is the data set size; MAYFLY_BENCH_DOCS overrides it for a quick run.
func benchDocs() int {
	if n, err := strconv.Atoi(os.Getenv("MAYFLY_BENCH_DOCS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

const benchDDoc = `{"views":{"v":{"map":"function (doc, meta) { emit([doc.type, doc.n], doc.v); }","reduce":"_sum"}}}`

// loadBench fills a persistent bucket with n documents like
// {"type":"t3","n":123,"v":4.5}, from many writers so group commit batches
// them. With expireEvery > 0, every expireEvery-th document expires in 60 s.
func loadBench(b *testing.B, eng *engine.Engine, n, expireEvery int) {
	bk, err := eng.Bucket("default")
	if err != nil {
		b.Fatal(err)
	}
	c := bk.DefaultCollection()
	var wg sync.WaitGroup
	const writers = 64
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += writers {
				v := fmt.Sprintf(`{"type":"t%d","n":%d,"v":%d.5}`, i%10, i, i%100)
				var o engine.WriteOptions
				if expireEvery > 0 && i%expireEvery == 0 {
					o.Expiry = 60
				}
				if _, err := c.Upsert(context.Background(), fmt.Sprintf("doc%07d", i), []byte(v), &o); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func runQuery(b *testing.B, svc *views.Service, params string) {
	q, _ := url.ParseQuery(params)
	p, err := views.ParseParams(q, nil)
	if err != nil {
		b.Fatal(err)
	}
	prep, err := svc.Prepare(context.Background(), "default", "bench", "v", p)
	if err != nil {
		b.Fatal(err)
	}
	if err := prep.Run(context.Background(), io.Discard); err != nil {
		b.Fatal(err)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkViews builds the view `emit([doc.type, doc.n], doc.v)` with _sum
// over 1,000,000 documents from a cold index, then measures full-range and
// group_level=1 reduces, 100-row range queries and reopening the index.
func BenchmarkViews(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1,000,000-document bucket")
	}
	n := benchDocs()
	dir := b.TempDir()
	opts := &engine.Options{Clock: engine.NewFakeClock(t0), NoSync: true}
	eng, err := engine.Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default")); err != nil {
		b.Fatal(err)
	}
	loadBench(b, eng, n, 0)
	svc, err := views.New(context.Background(), eng, &views.Options{NoAutoUpdate: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { svc.Close(); eng.Close() }()

	b.Run("build", func(b *testing.B) {
		for i := range b.N {
			before := heapInUse()
			name := "bench"
			if i > 0 {
				svc.DeleteDesignDoc(context.Background(), "default", name)
			}
			start := time.Now()
			if _, err := svc.PutDesignDoc(context.Background(), "default", name, []byte(benchDDoc)); err != nil {
				b.Fatal(err)
			}
			runQuery(b, svc, "stale=false&limit=0")
			el := time.Since(start)
			b.ReportMetric(float64(n)/el.Seconds(), "docs/s")
			b.ReportMetric(float64(heapInUse()-before)/float64(n), "heap-bytes/row")
		}
		bk, _ := eng.Bucket("default")
		if st, err := os.Stat(views.IndexPath(bk, "_design/bench")); err == nil {
			b.ReportMetric(float64(st.Size())/float64(n), "disk-bytes/row")
		}
	})
	b.Run("reduce_full", func(b *testing.B) {
		for range b.N {
			runQuery(b, svc, "stale=ok")
		}
	})
	b.Run("reduce_group_level_1", func(b *testing.B) {
		for range b.N {
			runQuery(b, svc, "stale=ok&group_level=1")
		}
	})
	b.Run("range_100", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(1, 2))
		lat := make([]time.Duration, 0, max(b.N, 1000))
		for i := 0; i < max(b.N, 1000); i++ {
			k := rng.IntN(n)
			start := time.Now()
			runQuery(b, svc, fmt.Sprintf("stale=ok&reduce=false&limit=100&startkey=%%5B%%22t%d%%22,%d%%5D", k%10, k))
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	})
	b.Run("reopen", func(b *testing.B) {
		for range b.N {
			svc.Close()
			eng.Close()
			start := time.Now()
			if eng, err = engine.Open(dir, opts); err != nil {
				b.Fatal(err)
			}
			engOpen := time.Since(start)
			if svc, err = views.New(context.Background(), eng, &views.Options{NoAutoUpdate: true}); err != nil {
				b.Fatal(err)
			}
			runQuery(b, svc, "stale=ok")
			b.ReportMetric(float64(engOpen.Milliseconds()), "engine-open-ms")
			b.ReportMetric(float64((time.Since(start) - engOpen).Milliseconds()), "index-open-ms")
		}
	})
}

// BenchmarkPagerPurgeWithViews: a bucket (persistent, then ephemeral) of 1,000,000 documents
// indexed by the benchmark view, of which 100,000 have expired. One pager run
// purges them while the view index, following the change feed as in the
// server, drops their rows; a stale=false query then waits for the index to
// have seen every purge. The figures are expired documents per second for
// both together, and for the pager alone.
func BenchmarkPagerPurgeWithViews(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1,000,000-document bucket")
	}
	for _, typ := range []engine.BucketType{engine.Couchbase, engine.Ephemeral} {
		b.Run(string(typ), func(b *testing.B) { benchPagerPurgeWithViews(b, typ) })
	}
}

func benchPagerPurgeWithViews(b *testing.B, typ engine.BucketType) {
	n := benchDocs()
	expired := n / 10
	for range b.N {
		clk := engine.NewFakeClock(t0)
		eng, err := engine.Open(b.TempDir(), &engine.Options{Clock: clk})
		if err != nil {
			b.Fatal(err)
		}
		st := engine.DefaultBucketSettings("default")
		st.Type = typ
		bk, err := eng.CreateBucket(context.Background(), st)
		if err != nil {
			b.Fatal(err)
		}
		loadBench(b, eng, n, n/expired)
		// Indexes follow the feed on their own, as in the server: view rows
		// go while the pager is still purging.
		svc, err := views.New(context.Background(), eng, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := svc.PutDesignDoc(context.Background(), "default", "bench", []byte(benchDDoc)); err != nil {
			b.Fatal(err)
		}
		runQuery(b, svc, "stale=false&limit=0")
		if typ == engine.Couchbase {
			// Let the build's background work (an index checkpoint) finish
			// before timing the pager: reopen the views, as after a restart.
			// (An ephemeral bucket's index lives in memory only: it has no
			// such work, and reopening would rebuild it.)
			svc.Close()
			if svc, err = views.New(context.Background(), eng, nil); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		clk.Advance(61)
		b.ResetTimer()
		start := time.Now()
		purged := 0
		for {
			p, more, err := bk.ExpireBatch(context.Background(), 1000)
			if err != nil {
				b.Fatal(err)
			}
			purged += p
			if !more {
				break
			}
		}
		if err := bk.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		pagerOnly := time.Since(start)
		runQuery(b, svc, "stale=false&limit=0")
		total := time.Since(start)
		b.StopTimer()
		if purged != expired {
			b.Fatalf("purged %d, want %d", purged, expired)
		}
		b.ReportMetric(float64(purged)/pagerOnly.Seconds(), "pager-docs/s")
		b.ReportMetric(float64(purged)/total.Seconds(), "with-views-docs/s")
		svc.Close()
		eng.Close()
	}
}
