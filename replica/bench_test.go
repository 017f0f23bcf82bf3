package replica

import (
	"context"
	"fmt"
	"os"
	"slices"
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
			benchPropose(b, 64, 4, !sync, nil)
		})
	}
}

// benchPropose runs perGroup proposers a group on their leaders; more,
// if set, changes the hosts' options further.
func benchPropose(b *testing.B, groups, perGroup int, noSync bool, more func(*Options)) {
	c := newTestCluster(b, groups, func(o *Options) {
		o.test.noSync = noSync
		if more != nil {
			more(o)
		}
	}, false)
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

// BenchmarkLeaderRead reads a key on its group's leader, as a cluster
// node answers a read it leads: from memory alone (the code before the
// read index), or after Host.ReadIndex (a heartbeat round to the
// followers, shared by concurrent readers), 1 or 64 readers over 64
// groups, or 64 readers of one group, on three hosts. It reports reads a second and, with the read
// index, reads per read-index round. 64 readers of one group show the
// rounds shared.
func BenchmarkLeaderRead(b *testing.B) {
	for _, rg := range [][2]int{{1, 64}, {64, 64}, {64, 1}} {
		for _, barrier := range []bool{false, true} {
			b.Run(fmt.Sprintf("readers=%d/groups=%d/readindex=%v", rg[0], rg[1], barrier), func(b *testing.B) {
				benchLeaderRead(b, rg[1], rg[0], barrier)
			})
		}
	}
}

func benchLeaderRead(b *testing.B, groups, readers int, barrier bool) {
	c := newTestCluster(b, groups, func(o *Options) { o.test.noSync = true }, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	leaders := make([]string, groups)
	for g := range GroupID(groups) {
		if _, err := c.propose(ctx, "n1", g, "k=v"); err != nil {
			b.Fatal(err)
		}
		for {
			l, ok := c.host("n1").Leader(g)
			if ok && c.sm(l, g) != nil {
				if v, _ := c.sm(l, g).get("k"); v == "v" {
					leaders[g] = l
					break
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var before uint64
	for _, n := range testNodes {
		before += c.host(n).Stats().ReadIndexRounds
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	b.ResetTimer()
	start := time.Now() // wall clock: a rate
	for w := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(w); next.Add(1) <= int64(b.N); i++ {
				g := GroupID(i % int64(groups))
				h := c.host(leaders[g])
				if barrier {
					if err := h.ReadIndex(ctx, g); err != nil {
						errs <- err
						return
					}
				} else if l, ok := h.Leader(g); !ok || l != h.Node() {
					errs <- fmt.Errorf("group %d: %s no longer leads", g, h.Node())
					return
				}
				if v, _ := c.sm(h.Node(), g).get("k"); v != "v" {
					errs <- fmt.Errorf("group %d: read %q", g, v)
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
	var rounds uint64
	for _, n := range testNodes {
		rounds += c.host(n).Stats().ReadIndexRounds
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "reads/s")
	if barrier {
		b.ReportMetric(float64(b.N)/float64(rounds-before), "reads/round")
	}
}

// BenchmarkReadBarrier341: one ReadBarrier over the 341 groups of a
// 1024-group bucket that another node leads (what a view coverer whose
// preferred leadership moved makes current for a stale=false query), or
// that this node leads, on three hosts; awake (barriers back to back) or
// quiet (every group quiet before each barrier: an idle cluster's
// query). It reports the barrier's p50 and p99.
func BenchmarkReadBarrier341(b *testing.B) {
	const groups = 1024
	c := newTestCluster(b, groups, func(o *Options) { o.test.noSync = os.Getenv("BARRIER_SYNC") == "" }, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	led := map[string][]GroupID{}
	for g := range GroupID(groups) {
		if _, err := c.propose(ctx, testNodes[int(g)%3], g, "k=v"); err != nil {
			b.Fatal(err)
		}
	}
	// Preferred leaders round robin, as a placed map has them.
	for g := range GroupID(groups) {
		for _, n := range testNodes {
			if err := c.host(n).SetTarget(g, nil, testNodes[int(g)%3]); err != nil {
				b.Fatal(err)
			}
		}
	}
	for g := GroupID(0); g < groups; {
		if l, ok := c.host("n1").Leader(g); ok && l == testNodes[int(g)%3] {
			led[l] = append(led[l], g)
			g++
			continue
		}
		if ctx.Err() != nil {
			b.Fatal(ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
	quiet := func() {
		for ctx.Err() == nil {
			all := true
			for _, n := range testNodes {
				all = all && c.host(n).Quiesced() == groups
			}
			if all {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, as := range []string{"follower", "leader"} {
		ids := append(slices.Clone(led["n2"]), led["n3"]...)
		if as == "leader" {
			ids = led["n1"]
		}
		ids = ids[:min(len(ids), 341)]
		for _, q := range []bool{false, true} {
			b.Run(fmt.Sprintf("as=%s/groups=%d/quiet=%v", as, len(ids), q), func(b *testing.B) {
				h := c.host("n1")
				took := make([]time.Duration, 0, b.N)
				for range b.N {
					if q {
						b.StopTimer()
						quiet()
						b.StartTimer()
					}
					start := time.Now() // wall clock: a latency
					if err := h.ReadBarrier(ctx, ids); err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(start))
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
			})
		}
	}
}
