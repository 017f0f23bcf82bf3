//go:build unix

package replica

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkIdle1024Groups measures what 1024 idle groups (a bucket's
// partitions) cost three hosts in one process: once every group has a
// leader and one entry, the process's CPU time over a few seconds of
// nothing but ticks and heartbeats, as cores kept busy.
func BenchmarkIdle1024Groups(b *testing.B) {
	c := newTestCluster(b, 1024, nil, false)
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
		cpu0 := cpuTime(b)
		start := time.Now() // wall clock: a rate
		time.Sleep(5 * time.Second)
		b.ReportMetric((cpuTime(b)-cpu0).Seconds()/time.Since(start).Seconds(), "cores")
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
