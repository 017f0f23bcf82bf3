//go:build unix

package replica

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkIdle1024Groups measures what 1024 idle groups (a bucket's
// partitions) cost three hosts in one process: once every group has a
// leader and one entry, the process's CPU time over a few seconds of
// nothing but ticks and heartbeats (none once quiet), as cores kept busy,
// and the messages sent a second. quiesce=false is the code before
// quiescing (-count runs each one that many times in a row; alternate
// by running the benchmark again).
func BenchmarkIdle1024Groups(b *testing.B) {
	for _, q := range []bool{false, true} {
		b.Run(fmt.Sprintf("quiesce=%v", q), func(b *testing.B) { benchIdle(b, q) })
	}
}

func benchIdle(b *testing.B, quiesce bool) {
	c := newTestCluster(b, 1024, func(o *Options) { o.test.noQuiesce = !quiesce }, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 1024)
	for g := range GroupID(1024) {
		wg.Go(func() {
			if _, err := c.propose(ctx, testNodes[int(g)%3], g, "warm=1"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	time.Sleep(2 * time.Second) // let the warm-up's stragglers settle
	b.ResetTimer()
	for range b.N {
		cpu0, sent0 := cpuTime(b), c.sentByAll()
		start := time.Now() // wall clock: a rate
		time.Sleep(5 * time.Second)
		secs := time.Since(start).Seconds()
		b.ReportMetric((cpuTime(b)-cpu0).Seconds()/secs, "cores")
		b.ReportMetric(float64(c.sentByAll()-sent0)/secs, "msgs/s")
	}
	quiet := 0
	for _, n := range testNodes {
		quiet += c.host(n).Quiesced()
	}
	b.ReportMetric(float64(quiet)/3, "quiet-groups/host")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
