package chaostest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// figures are one system's measurements over its phases.
type figures struct {
	elapsed             time.Duration
	ops, writes         int64
	rangeLat, reduceLat []time.Duration
}

// runFigures measures the same load, without kills, against a single
// `mayfly serve` (no --peers) and the three-node cluster, both running,
// in alternating phases of dur/4 (single, cluster, single, cluster): the
// register clients, two typed writers and one view reader asking, back to
// back, a 20-row range (reduce=false&limit=20) and a group_level=1 reduce,
// with stale=ok, of random nodes. It logs operations and acknowledged
// writes per second and the queries' p50/p99 of each, and their ratios.
func runFigures(t *testing.T, bin string, dur time.Duration) {
	ctx := context.Background()
	loadBefore := loadavg()
	sDir, cDir := newLogDir(t), newLogDir(t)
	single := startNodes(t, []*node{newSingle(t, bin, sDir)}, nil, sDir)
	nodes, peers := newCluster(t, bin, cDir)
	clustered := startNodes(t, nodes, peers, cDir)
	for _, r := range []*run{single, clustered} {
		if err := r.putDesignDoc(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var fs [2]figures
	for phase := range 4 {
		r := []*run{single, clustered}[phase%2]
		if err := r.measure(ctx, dur/4, &fs[phase%2]); err != nil {
			t.Fatal(err)
		}
	}
	rate := func(n int64, d time.Duration) float64 { return float64(n) / d.Seconds() }
	p := func(ds []time.Duration, q float64) time.Duration {
		slices.Sort(ds)
		if len(ds) == 0 {
			return 0
		}
		return ds[min(len(ds)-1, int(q*float64(len(ds))))].Round(10 * time.Microsecond)
	}
	for i, name := range []string{"one node", "three nodes"} {
		f := fs[i]
		t.Logf("figures, %s: %.0f ops/s (register clients), %.0f writes acknowledged/s (register and typed); view range p50/p99 %v/%v (%d), group_level=1 p50/p99 %v/%v (%d)",
			name, rate(f.ops, f.elapsed), rate(f.writes, f.elapsed), p(f.rangeLat, .5), p(f.rangeLat, .99), len(f.rangeLat),
			p(f.reduceLat, .5), p(f.reduceLat, .99), len(f.reduceLat))
	}
	ratio := func(a, b float64) string { return fmt.Sprintf("%.2fx", a/b) }
	t.Logf("figures, three nodes against one: ops %s, writes %s, range p99 %s, group_level=1 p99 %s; load average %s before, %s after",
		ratio(rate(fs[1].ops, fs[1].elapsed), rate(fs[0].ops, fs[0].elapsed)),
		ratio(rate(fs[1].writes, fs[1].elapsed), rate(fs[0].writes, fs[0].elapsed)),
		ratio(float64(p(fs[1].rangeLat, .99)), float64(p(fs[0].rangeLat, .99))),
		ratio(float64(p(fs[1].reduceLat, .99)), float64(p(fs[0].reduceLat, .99))), loadBefore, loadavg())
}

// measure runs the figures' load on r for d and adds what it measured to f.
func (r *run) measure(ctx context.Context, d time.Duration, f *figures) error {
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	before := len(r.hist.ops)
	start := time.Now() // wall clock: the phase's length
	var wg sync.WaitGroup
	failures := r.startRegisterClients(runCtx, &wg)
	var typed atomic.Int64
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.typedWriter(runCtx, w, &typed)
		}()
	}
	var mu sync.Mutex
	var queryErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(5, uint64(start.UnixNano())))
		for i := 0; runCtx.Err() == nil; i++ {
			n := r.nodes[rng.IntN(len(r.nodes))]
			q := "reduce=false&stale=ok&limit=20&startkey=" + `["b"]`
			if i%2 == 1 {
				q = "stale=ok&group_level=1"
			}
			t0 := time.Now() // wall clock: a query's latency, a figure
			_, err := r.queryView(runCtx, n, "sum", q)
			lat := time.Since(t0)
			if err != nil {
				if runCtx.Err() == nil {
					mu.Lock()
					queryErr = err
					mu.Unlock()
				}
				return
			}
			mu.Lock()
			if i%2 == 0 {
				f.rangeLat = append(f.rangeLat, lat)
			} else {
				f.reduceLat = append(f.reduceLat, lat)
			}
			mu.Unlock()
		}
	}()
	wg.Wait()
	f.elapsed += time.Since(start)
	close(failures)
	for err := range failures {
		return err
	}
	if queryErr != nil {
		return queryErr
	}
	r.hist.mu.Lock()
	ops := r.hist.ops[before:]
	r.hist.mu.Unlock()
	for _, op := range ops {
		in, out := op.Input.(input), op.Output.(output)
		f.ops++
		if in.kind != opGet && out.kind == outOK {
			f.writes++
		}
	}
	f.writes += typed.Load()
	return nil
}

// loadavg is the machine's load average (the first three fields of
// /proc/loadavg), "?" where there is none.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
