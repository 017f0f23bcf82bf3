package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// newServer is newServer with the harness's -profile-dir: the server also
// serves Go's profiles (--pprof) on a free loopback port.
func (b *bench) newServer(bin, data string, extra []string) (*server, error) {
	if b.profileDir != "" {
		a, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		extra = append(append([]string(nil), extra...), "--pprof", a)
		srv, err := newServer(bin, data, b.logPath, extra)
		if err == nil {
			srv.pprof = a
		}
		return srv, err
	}
	return newServer(bin, data, b.logPath, extra)
}

// procCounters are a process's CPU time and the bytes it read from and
// wrote to the disk (/proc/PID/stat and /proc/PID/io).
type procCounters struct {
	cpu           time.Duration
	read, written int64
}

// counters reads the server's procCounters.
func (s *server) counters() (procCounters, error) {
	var c procCounters
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid()))
	if err != nil {
		return c, err
	}
	// The fields after the command's name (in parentheses, which may hold
	// spaces): utime and stime are the 12th and 13th, in clock ticks.
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return c, errors.New("short /proc/PID/stat")
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	c.cpu = time.Duration(ut+st) * time.Second / 100 // USER_HZ
	io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", s.pid()))
	if err != nil {
		return c, err
	}
	for _, line := range strings.Split(string(io), "\n") {
		name, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch name {
		case "read_bytes":
			c.read = n
		case "write_bytes":
			c.written = n
		}
	}
	return c, nil
}

// gcFigures are the server's garbage collections so far and their pauses'
// sum in seconds (go_gc_duration_seconds).
type gcFigures struct{ count, pauseSum float64 }

// gcCounts reads the server's gcFigures from /metrics.
func (s *server) gcCounts(ctx context.Context) (gcFigures, error) {
	var g gcFigures
	err := s.metrics(ctx, func(name, _ string, v float64) {
		switch name {
		case "go_gc_duration_seconds_count":
			g.count = v
		case "go_gc_duration_seconds_sum":
			g.pauseSum = v
		}
	})
	return g, err
}

// startProfiles takes, with -profile-dir, the server's CPU profile and
// runtime trace for -profile-seconds from now; the function it returns
// writes the gets' starts and latencies beside them and waits for the
// profiles. Files are named after phase and the time.
func (b *bench) startProfiles(srv *server, phase string) func(at, lat []time.Duration) {
	if b.profileDir == "" || srv.pprof == "" {
		return func(_, _ []time.Duration) {}
	}
	name := strings.NewReplacer(" ", "-", "/", "-").Replace(phase) + "-" + time.Now().UTC().Format("150405") // wall clock: file names
	base := filepath.Join(b.profileDir, name)
	var wg sync.WaitGroup
	for _, p := range []struct{ path, file string }{
		{"/debug/pprof/profile", ".cpu.pprof"},
		{"/debug/pprof/trace", ".trace"},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fetchTo(fmt.Sprintf("http://%s%s?seconds=%d", srv.pprof, p.path, b.profileSeconds), base+p.file); err != nil {
				fmt.Fprintf(os.Stderr, "bigrun: %s: %v\n", p.path, err)
			}
		}()
	}
	return func(at, lat []time.Duration) {
		if f, err := os.Create(base + ".gets.csv"); err == nil {
			w := bufio.NewWriter(f)
			fmt.Fprintln(w, "start_us,latency_us")
			for i := range lat {
				fmt.Fprintf(w, "%d,%d\n", at[i].Microseconds(), lat[i].Microseconds())
			}
			w.Flush()
			f.Close()
		}
		wg.Wait()
		fmt.Printf("    profiles: %s.{cpu.pprof,trace,gets.csv}\n", base)
	}
}

// fetchTo writes the body of a GET of url to path.
func fetchTo(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// getsAB alternates two servers (-bin with -serve-args, and -gets-ab with
// -gets-ab-args) on the reused data directory: each round starts each
// afresh, waits for its warm-up and times the random gets after the page
// cache drop, then stops it; it reports each side's figures together.
func (b *bench) getsAB(bucket string) error {
	type side struct {
		name, bin, args string
		figs            []getsFigures
	}
	sides := []*side{{name: "A", bin: b.bin, args: b.serveArgs}, {name: "B", bin: b.getsABBin, args: b.getsABArgs}}
	b.rep.add("gets-ab", "A / B", "%s %q / %s %q", sides[0].bin, sides[0].args, sides[1].bin, sides[1].args)
	for r := range b.getsABRounds {
		order := []*side{sides[0], sides[1]}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, sd := range order {
			phase := fmt.Sprintf("gets-ab %s round %d", sd.name, r+1)
			f, err := b.getsOnce(bucket, phase, sd.bin, sd.args)
			if err != nil {
				return fmt.Errorf("%s: %w", phase, err)
			}
			sd.figs = append(sd.figs, f)
		}
	}
	for _, sd := range sides {
		var p50, p99 []string
		for _, f := range sd.figs {
			p50 = append(p50, ms(f.p50))
			p99 = append(p99, ms(f.p99))
		}
		b.rep.add("gets-ab", sd.name+": p50 / p99 by round", "%s / %s", strings.Join(p50, ", "), strings.Join(p99, ", "))
	}
	return nil
}

// getsOnce starts bin with args on the reused data directory, waits for its
// warm-up, times the random gets and stops it.
func (b *bench) getsOnce(bucket, phase, bin, args string) (getsFigures, error) {
	srv, err := b.newServer(bin, b.reuse, b.serveFlags(args))
	if err != nil {
		return getsFigures{}, err
	}
	if err := srv.start(bucket); err != nil {
		return getsFigures{}, err
	}
	defer func() {
		b.smp.watch(nil, "")
		if srv.exited() == nil {
			srv.stop(syscall.SIGTERM, 5*time.Minute)
		}
	}()
	b.smp.watch(srv, phase)
	at, err := srv.waitFor("warm-up", b.warmupTimeout, func() error {
		st, err := srv.nodeStatus(context.Background(), bucket)
		if err == nil && st != "healthy" {
			err = fmt.Errorf("status %q", st)
		}
		return err
	})
	if err != nil {
		return getsFigures{}, err
	}
	b.rep.add(phase, "warm-up done", "%.2f s after the process started", at.Seconds())
	b.memFigures(srv, phase, "warm")
	return b.randomGets(srv, phase, "")
}
