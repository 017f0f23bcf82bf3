package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// sampledStats are the bucket stats the sampler records each second, in
// its CSV's column order.
var sampledStats = []string{"curr_items", "mem_used", "ep_kv_size", "ep_mem_high_wat", "ep_num_value_ejects", "ep_num_non_resident", "vb_active_perc_mem_resident", "ep_bg_fetched", "ep_warmup_state"}

// sampler records the server's VmRSS and its bucket's stats every second
// into a CSV file, and keeps each phase's peak RSS.
type sampler struct {
	mu    sync.Mutex
	srv   *server
	mc    *mcConn // stats connection, dialled when the memcached port is up
	phase string
	peak  map[string]int64
	at    map[string]breakdown // each phase's breakdown at its peak RSS
	last  map[string]string
	out   io.Writer
	t0    time.Time
	stop  chan struct{}
	wg    sync.WaitGroup
}

func newSampler(out io.Writer) *sampler {
	fmt.Fprintf(out, "seconds,phase,load1,rss_mb,%s,%s\n", strings.Join(sampledStats, ","), breakdownHeader)
	s := &sampler{out: out, peak: map[string]int64{}, at: map[string]breakdown{}, t0: time.Now(), stop: make(chan struct{})} // wall clock: the benchmark times a real server
	s.wg.Add(1)
	go s.run()
	return s
}

// watch samples srv from now on, under phase's name (srv nil: none).
func (s *sampler) watch(srv *server, phase string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != srv && s.mc != nil {
		s.mc.Close()
		s.mc = nil
	}
	s.srv, s.phase = srv, phase
}

// peakBreakdown is where the memory was at phase's highest RSS sampled.
func (s *sampler) peakBreakdown(phase string) breakdown {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at[phase]
}

// peakRSS is the highest RSS sampled in phase.
func (s *sampler) peakRSS(phase string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak[phase]
}

func (s *sampler) close() {
	close(s.stop)
	s.wg.Wait()
	s.watch(nil, "")
}

func (s *sampler) run() {
	defer s.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sample()
		}
	}
}

func (s *sampler) sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil || s.srv.exited() != nil {
		return
	}
	rss, err := s.srv.rss()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	bd, bdErr := s.srv.memBreakdown(ctx)
	cancel()
	if rss > s.peak[s.phase] {
		s.peak[s.phase] = rss
		if bdErr == nil {
			s.at[s.phase] = bd
		}
	}
	if s.mc == nil && s.srv.mc != "" {
		s.mc, _ = dialMC(s.srv.mc)
	}
	var st map[string]string
	if s.mc != nil {
		if st, err = s.mc.stats(); err != nil {
			s.mc.Close()
			s.mc = nil
		}
	}
	s.last = st
	row := []string{fmt.Sprintf("%.0f", time.Since(s.t0).Seconds()), s.phase, loadAvg(), fmt.Sprintf("%.1f", mb(rss))}
	for _, k := range sampledStats {
		row = append(row, strings.ReplaceAll(st[k], ",", ";"))
	}
	if bdErr == nil {
		row = append(row, bd.csv())
	}
	fmt.Fprintln(s.out, strings.Join(row, ","))
}

// mb is bytes in MiB.
func mb(b int64) float64 { return float64(b) / (1 << 20) }

// loadAvg is the one-minute load average.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(data))[0]
}

// uptime is the three load averages, as uptime prints them.
func uptime() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:3], " ")
}

// statInt reads a numeric stat (0 when absent).
func statInt(st map[string]string, name string) int64 {
	n, _ := strconv.ParseInt(st[name], 10, 64)
	return n
}

// dropCaches empties the OS page cache of the data directory's files: the
// whole cache when the kernel lets us (root), else each file's pages with
// posix_fadvise(POSIX_FADV_DONTNEED). It returns the method used.
func dropCaches(dir string) (string, error) {
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("1\n"), 0); err == nil {
		return "drop_caches", nil
	}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
	return "posix_fadvise(DONTNEED)", err
}

// percentiles returns the p50, p99 and p99.9 of lat (sorted in place).
func percentiles(lat []time.Duration) (p50, p99, p999 time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	return at(0.50), at(0.99), at(0.999)
}

// ms formats a latency in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }
