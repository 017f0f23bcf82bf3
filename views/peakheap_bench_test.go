package views_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/views"
)

// BenchmarkBuildPeakHeap builds the view `emit(doc.type, doc.n)` over
// large documents (1,500 of 100 KB; 200 of 1 MB) and, to see that they
// build as fast as ever, small ones (100,000 of 1 KB); $MAYFLY_BENCH_BIGDOCS
// scales the counts, in percent; $MAYFLY_BENCH_SETS picks sets by name
// (100KB,1MB,1KB), in a bucket of the default 100 MiB
// quota, most values ejected and read back from disk for the build, with
// batches bounded by documents alone ("off") and by a few byte bounds
// (views.Options.BatchBytes; $MAYFLY_BENCH_BATCHMIB lists them, comma
// separated, in MiB). It reports, per bound, the heap's peak over the
// build (live and unswept objects, sampled every 2 ms after a collection
// before the build: the highest of its runs), the peak above the heap
// before the build, the highest live heap a collection during the build
// found (/gc/heap/live), and the build's rate. Each iteration builds every
// variant, in a rotating order, on one engine loaded once.
func BenchmarkBuildPeakHeap(b *testing.B) {
	if testing.Short() {
		b.Skip("loads 100-200 MB of documents")
	}
	scale := 100
	if v := os.Getenv("MAYFLY_BENCH_BIGDOCS"); v != "" {
		var err error
		if scale, err = strconv.Atoi(v); err != nil || scale < 1 {
			b.Fatalf("MAYFLY_BENCH_BIGDOCS=%q: want a positive percentage", v)
		}
	}
	type variant struct {
		name  string
		bytes int
	}
	variants := []variant{{"off", 1 << 40}}
	mibs := "8,16,32,64"
	if v := os.Getenv("MAYFLY_BENCH_BATCHMIB"); v != "" {
		mibs = v
	}
	for _, f := range strings.Split(mibs, ",") {
		m, err := strconv.Atoi(f)
		if err != nil || m < 1 {
			b.Fatalf("MAYFLY_BENCH_BATCHMIB=%q: want MiB counts, comma separated", mibs)
		}
		variants = append(variants, variant{fmt.Sprint(m, "MiB"), m << 20})
	}
	for _, set := range []struct {
		name string
		n    int
		size int
	}{{"100KB", 1500, 100_000}, {"1MB", 200, 1_000_000}, {"1KB", 100_000, 1000}} {
		if sets := os.Getenv("MAYFLY_BENCH_SETS"); sets != "" && !slices.Contains(strings.Split(sets, ","), set.name) {
			continue
		}
		b.Run(set.name, func(b *testing.B) {
			n := max(set.n*scale/100, 1)
			eng := loadBigDocs(b, n, set.size)
			defer eng.Close()
			type result struct {
				peak, above, live uint64
				took              time.Duration
			}
			results := make([]result, len(variants))
			build := func(v int) {
				ctx := context.Background()
				svc, err := views.New(ctx, eng, &views.Options{NoAutoUpdate: true, NoSync: true, BatchBytes: variants[v].bytes})
				if err != nil {
					b.Fatal(err)
				}
				defer svc.Close()
				runtime.GC()
				sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
				metrics.Read(sample)
				base := sample[0].Value.Uint64()
				var peak, live atomic.Uint64
				stop, done := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(done)
					s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
					t := time.NewTicker(2 * time.Millisecond)
					defer t.Stop()
					for {
						metrics.Read(s)
						if h := s[0].Value.Uint64(); h > peak.Load() {
							peak.Store(h)
						}
						if h := s[1].Value.Uint64(); h > live.Load() {
							live.Store(h)
						}
						select {
						case <-stop:
							return
						case <-t.C:
						}
					}
				}()
				start := time.Now()
				if _, err := svc.PutDesignDoc(ctx, "default", "bench", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(doc.type, doc.n); }"}}}`)); err != nil {
					b.Fatal(err)
				}
				runQuery(b, svc, "stale=false&limit=0")
				took := time.Since(start)
				close(stop)
				<-done
				r := &results[v]
				r.peak = max(r.peak, peak.Load())
				r.above = max(r.above, peak.Load()-min(base, peak.Load()))
				r.live = max(r.live, live.Load())
				r.took += took
				if err := svc.DeleteDesignDoc(ctx, "default", "bench"); err != nil {
					b.Fatal(err)
				}
			}
			for i := 0; b.Loop(); i++ {
				for j := range variants {
					build((i + j) % len(variants))
				}
			}
			for v, r := range results {
				b.ReportMetric(float64(r.peak)/(1<<20), variants[v].name+"-peak-heap-MiB")
				b.ReportMetric(float64(r.above)/(1<<20), variants[v].name+"-peak-above-MiB")
				b.ReportMetric(float64(r.live)/(1<<20), variants[v].name+"-peak-live-MiB")
				b.ReportMetric(float64(n*b.N)/r.took.Seconds(), variants[v].name+"-docs/s")
			}
		})
	}
}

// loadBigDocs opens an engine whose default bucket (100 MiB quota) holds n
// documents of about size bytes: {"type":"t3","n":123,"text":"w17 w4 ..."}.
func loadBigDocs(b *testing.B, n, size int) *engine.Engine {
	b.Helper()
	eng, err := engine.Open(b.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	bk, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default"))
	if err != nil {
		eng.Close()
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	const writers = 4
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 6))
			for i := w; i < n; i += writers {
				var sb strings.Builder
				for sb.Len() < size {
					fmt.Fprintf(&sb, "w%d ", r.IntN(100_000))
				}
				v := fmt.Sprintf(`{"type":"t%d","n":%d,"text":%q}`, i%10, i, sb.String())
				if _, err := bk.DefaultCollection().Upsert(context.Background(), fmt.Sprintf("doc%06d", i), []byte(v), nil); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := bk.Sync(context.Background()); err != nil {
		eng.Close()
		b.Fatal(err)
	}
	return eng
}
