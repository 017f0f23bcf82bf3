package replica

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkPropose64Groups proposes small mutations to 64 groups on three
// hosts on loopback, 4 writers a group, each through the group's leader;
// it reports acknowledged proposals a second, batch commits (fsync'd
// unless noSync) per Ready round, and entries written per commit summed
// over the three replicas.
func BenchmarkPropose64Groups(b *testing.B) {
	for _, sync := range []bool{true, false} {
		b.Run(fmt.Sprintf("fsync=%v", sync), func(b *testing.B) {
			benchPropose(b, 64, 4, !sync)
		})
	}
}

func benchPropose(b *testing.B, groups, perGroup int, noSync bool) {
	c := newTestCluster(b, groups, func(o *Options) { o.test.noSync = noSync }, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	leaders := make([]string, groups)
	for g := range GroupID(groups) {
		if _, err := c.propose(ctx, "n1", g, "warm=1"); err != nil {
			b.Fatal(err)
		}
		l, ok := c.host("n1").Leader(g)
		if !ok {
			b.Fatalf("group %d: no leader", g)
		}
		leaders[g] = l
	}
	var before [3]Stats
	for i, n := range testNodes {
		before[i] = c.host(n).Stats()
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, groups*perGroup)
	b.ResetTimer()
	start := time.Now() // wall clock: a rate
	for w := range groups * perGroup {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := GroupID(w % groups)
			h := c.host(leaders[g])
			for next.Add(1) <= int64(b.N) {
				if _, err := h.Propose(ctx, g, []byte("k=v")); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	var rounds, syncs uint64
	for i, n := range testNodes {
		st := c.host(n).Stats()
		rounds += st.Rounds - before[i].Rounds
		syncs += st.Syncs - before[i].Syncs
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
	b.ReportMetric(float64(syncs)/float64(rounds), "syncs/round")
	b.ReportMetric(float64(b.N)*3/float64(syncs), "replica-writes/commit")
}
