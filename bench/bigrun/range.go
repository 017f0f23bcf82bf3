package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"
)

// rangeDDoc is the views benchmark's view (views/bench_test.go), on which
// the 16-client figures were measured.
const rangeDDoc = `{"views":{"v":{"map":"function (doc, meta) { emit([doc.type, doc.n], doc.v); }","reduce":"_sum"}}}`

func rangeKey(i int) string { return fmt.Sprintf("doc%07d", i) }

func rangeValue(i int, buf []byte) []byte {
	return fmt.Appendf(buf, `{"type":"t%d","n":%d,"v":%d.5}`, i%10, i, i%100)
}

// rangePhase loads b.rangeDocs small documents, builds the view and runs
// 100-row range queries from one client, then from b.rangeClients.
func (b *bench) rangePhase() error {
	const bucket, phase = "range", "range"
	fmt.Printf("range: %d documents, 100-row range queries from 1 and %d clients\n", b.rangeDocs, b.rangeClients)
	srv, err := b.serverFor(bucket, 1024)
	if err != nil {
		return err
	}
	defer func() {
		b.smp.watch(nil, "")
		if srv.exited() == nil {
			srv.stop(syscall.SIGTERM, 5*time.Minute)
		}
	}()
	b.smp.watch(srv, "range load")
	took, _, err := b.loadDocs(srv, b.rangeDocs, rangeKey, rangeValue)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	b.rep.add(phase, "load", "%d docs in %.1f s: %.0f docs/s", b.rangeDocs, took.Seconds(), float64(b.rangeDocs)/took.Seconds())
	ctx := context.Background()
	b.smp.watch(srv, "range view")
	t0 := time.Now() // wall clock: the benchmark times a real server
	if err := srv.putDesignDoc(ctx, bucket, "bench", rangeDDoc); err != nil {
		return err
	}
	if _, err := srv.query(ctx, bucket, "bench", "v", "stale=false&limit=1"); err != nil {
		return fmt.Errorf("view build: %w", err)
	}
	took = time.Since(t0)
	b.rep.add(phase, "view build (stale=false)", "%.1f s: %.0f docs/s", took.Seconds(), float64(b.rangeDocs)/took.Seconds())
	b.memFigures(srv, phase, "after view")

	var qps16 float64
	for _, clients := range []int{1, b.rangeClients} {
		b.smp.watch(srv, fmt.Sprintf("range c=%d", clients))
		lat, qps, err := b.rangeRun(ctx, srv, bucket, clients)
		if err != nil {
			return err
		}
		p50, p99, p999 := percentiles(lat)
		b.rep.add(phase, fmt.Sprintf("c=%d: 100-row range queries", clients), "%d in %v: %.0f queries/s; p50 %s, p99 %s, p99.9 %s", len(lat), b.rangeTime, qps, ms(p50), ms(p99), ms(p999))
		if clients > 1 {
			qps16 = qps
			ratio := float64(p99) / float64(p50)
			b.rep.add(phase, fmt.Sprintf("c=%d: p99 / p50 (target <= 3)", clients), "%.1f: %s", ratio, metMissed(ratio <= 3))
		}
		b.rep.add(phase, fmt.Sprintf("c=%d: peak RSS", clients), "%.0f MiB", mb(b.smp.peakRSS(fmt.Sprintf("range c=%d", clients))))
	}
	b.rep.add(phase, "queries/s vs the issue's baseline (target >= 1.5x)", "%.0f / %.0f = %.2fx: %s", qps16, b.rangeBaselineQPS, qps16/b.rangeBaselineQPS, metMissed(qps16 >= 1.5*b.rangeBaselineQPS))
	b.memFigures(srv, phase, "after queries")
	return nil
}

// rangeRun runs clients HTTP clients, each querying 100 rows from a random
// start key one query after another, for b.rangeTime; it returns every
// query's latency and the queries per second.
func (b *bench) rangeRun(ctx context.Context, srv *server, bucket string, clients int) ([]time.Duration, float64, error) {
	var (
		mu    sync.Mutex
		all   []time.Duration
		first error
		wg    sync.WaitGroup
	)
	start := time.Now() // wall clock: the benchmark times a real server
	end := start.Add(b.rangeTime)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 100))
			var lat []time.Duration
			var err error
			for time.Now().Before(end) { // wall clock: the benchmark times a real server
				k := rng.IntN(b.rangeDocs)
				q := fmt.Sprintf("stale=ok&reduce=false&limit=100&startkey=%%5B%%22t%d%%22,%d%%5D", k%10, k)
				t := time.Now() // wall clock: the benchmark times a real server
				var body []byte
				err = srv.call(ctx, "GET", "/"+bucket+"/_design/bench/_view/v?"+q, "", nil, &body)
				lat = append(lat, time.Since(t))
				if err == nil && !bytes.Contains(body, []byte(`"id":`)) {
					err = fmt.Errorf("range query %s: no rows", q)
				}
				if err != nil {
					break
				}
			}
			mu.Lock()
			all = append(all, lat...)
			if first == nil {
				first = err
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, float64(len(all)) / time.Since(start).Seconds(), first
}
