package views_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/views"
)

// benchHeadroomMB is how far above the live heap after the load the
// build's memory limit is set; MAYFLY_BENCH_HEADROOM_MB overrides it.
func benchHeadroomMB() int64 {
	if n, err := strconv.ParseInt(os.Getenv("MAYFLY_BENCH_HEADROOM_MB"), 10, 64); err == nil && n > 0 {
		return n
	}
	return 64
}

// memorySampler records the highest the runtime's memory, as Go's memory
// limit counts it (all it maps, less the heap given back), reached while it
// ran, and how long it was past limit.
type memorySampler struct {
	stop chan struct{}
	done chan struct{}
	peak uint64
	over time.Duration
}

func sampleMemory(limit uint64, every time.Duration) *memorySampler {
	s := &memorySampler{stop: make(chan struct{}), done: make(chan struct{})}
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			metrics.Read(samples)
			used := samples[0].Value.Uint64() - samples[1].Value.Uint64()
			s.peak = max(s.peak, used)
			if used > limit {
				s.over += every
			}
		}
	}()
	return s
}

func (s *memorySampler) end() {
	close(s.stop)
	<-s.done
}

// BenchmarkBuildNearMemoryLimit builds a view over documents of 1 KiB, most
// of them ejected (the bucket's 100 MiB quota holds a third of 300,000),
// with Go's memory limit set a little above the live heap after the load
// (MAYFLY_BENCH_HEADROOM_MB, 64 by default), as mayfly serve sets it: the
// collector is then paced by the limit and the build's batches are what it
// must keep up with (issue 19). It reports the build's rate, its memory's
// peak over the limit (sampled every 2 ms: Go's memory as the limit counts
// it) and how long it was past the limit.
func BenchmarkBuildNearMemoryLimit(b *testing.B) {
	if testing.Short() {
		b.Skip("loads 300,000 documents of 1 KiB")
	}
	n := 300_000
	if os.Getenv("MAYFLY_BENCH_DOCS") != "" {
		n = benchDocs()
	}
	eng, err := engine.Open(b.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	bk, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default"))
	if err != nil {
		b.Fatal(err)
	}
	pad := strings.Repeat("x", 960)
	var wg sync.WaitGroup
	const writers = 16
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += writers {
				v := fmt.Sprintf(`{"type":"t%d","n":%d,"v":%d.5,"pad":"%s"}`, i%10, i, i%100, pad)
				if _, err := bk.DefaultCollection().Upsert(context.Background(), fmt.Sprintf("doc%07d", i), []byte(v), nil); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := bk.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	svc, err := views.New(context.Background(), eng, &views.Options{NoAutoUpdate: true})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		if i > 0 {
			if err := svc.DeleteDesignDoc(context.Background(), "default", "bench"); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		limit := ms.HeapAlloc + uint64(benchHeadroomMB())<<20
		debug.SetMemoryLimit(int64(limit))
		s := sampleMemory(limit, 2*time.Millisecond)
		b.StartTimer()
		start := time.Now()
		if _, err := svc.PutDesignDoc(context.Background(), "default", "bench", []byte(benchDDoc)); err != nil {
			b.Fatal(err)
		}
		runQuery(b, svc, "stale=false&limit=0")
		el := time.Since(start)
		b.StopTimer()
		s.end()
		debug.SetMemoryLimit(prev)
		b.ReportMetric(float64(n)/el.Seconds(), "docs/s")
		b.ReportMetric(float64(limit)/(1<<20), "limit-MiB")
		b.ReportMetric((float64(s.peak)-float64(limit))/(1<<20), "peak-over-limit-MiB")
		b.ReportMetric(s.over.Seconds(), "s-over-limit")
		b.StartTimer()
	}
}
