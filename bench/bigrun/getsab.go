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
	"slices"
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

// getsAB alternates servers on the reused data directory: A is -bin with
// -serve-args, B (C, ...) -gets-ab with each of -gets-ab-args's variants
// (separated by |; a variant's leading NAME=VALUE words are environment
// variables, e.g. GOMAXPROCS=4; a leading bin=PATH word runs that
// binary instead of -gets-ab's, to compare more than two). Each round starts each afresh, waits for
// its warm-up and times the random gets after the page cache drop, then
// stops it; it reports each side's figures together.
func (b *bench) getsAB(bucket string) error {
	type side struct {
		name, bin, args string
		figs            []getsFigures
	}
	sides := []*side{{name: "A", bin: b.bin, args: b.serveArgs}}
	for i, v := range strings.Split(b.getsABArgs, "|") {
		sd := &side{name: string(rune('B' + i)), bin: b.getsABBin, args: strings.TrimSpace(v)}
		// A leading bin=PATH word runs that binary for this variant.
		if f := strings.Fields(sd.args); len(f) > 0 && strings.HasPrefix(f[0], "bin=") {
			sd.bin, sd.args = strings.TrimPrefix(f[0], "bin="), strings.Join(f[1:], " ")
		}
		sides = append(sides, sd)
	}
	for _, sd := range sides {
		b.rep.add("gets-ab", sd.name, "%s %q", sd.bin, sd.args)
	}
	for r := range b.getsABRounds {
		order := append([]*side(nil), sides...)
		if r%2 == 1 {
			slices.Reverse(order)
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

// splitEnv splits a variant's leading NAME=VALUE words off its serve flags.
func splitEnv(args string) (env []string, flags string) {
	f := strings.Fields(args)
	for len(f) > 0 && !strings.HasPrefix(f[0], "-") && strings.Contains(f[0], "=") {
		env, f = append(env, f[0]), f[1:]
	}
	return env, strings.Join(f, " ")
}

// getsOnce starts bin with args on the reused data directory, waits for its
// warm-up, times the random gets and stops it.
func (b *bench) getsOnce(bucket, phase, bin, args string) (getsFigures, error) {
	env, args := splitEnv(args)
	srv, err := b.newServer(bin, b.reuse, b.serveFlags(args))
	if err != nil {
		return getsFigures{}, err
	}
	srv.env = env
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
	at, err := srv.waitFor("warm-up", b.warmupTimeout, srv.healthy(context.Background(), bucket))
	if err != nil {
		return getsFigures{}, err
	}
	b.rep.add(phase, "warm-up done", "%.2f s after the process started", at.Seconds())
	b.memFigures(srv, phase, "warm")
	if err := b.buildAgain(srv, bucket, phase); err != nil {
		return getsFigures{}, err
	}
	return b.randomGets(srv, phase, "")
}

// buildAgain, with -view-again, builds a view over the bucket anew (a
// design document of a new name with the big phase's map) and waits for
// it (stale=false): the gets after it find the server as the first run's
// gets found it, right after a build.
func (b *bench) buildAgain(srv *server, bucket, phase string) error {
	if !b.viewAgain {
		return nil
	}
	ctx := context.Background()
	ddoc := fmt.Sprintf("again%d", time.Now().UnixNano()) // wall clock: a new name
	t0 := time.Now()                                      // wall clock: the benchmark times a real server
	// A warm server may still be opening its indexes: it refuses a new
	// design document until then.
	if _, err := srv.waitFor("design document", b.warmupTimeout, func() error { return srv.putDesignDoc(ctx, bucket, ddoc, bigDDoc) }); err != nil {
		return err
	}
	vctx, cancel := context.WithTimeout(ctx, b.viewWait)
	defer cancel()
	if _, err := srv.query(vctx, bucket, ddoc, "n", "stale=false"); err != nil {
		return fmt.Errorf("view build again: %w", err)
	}
	b.rep.add(phase, "view built again ("+ddoc+")", "%.1f s", time.Since(t0).Seconds())
	b.memFigures(srv, phase, "after the view built again")
	return nil
}
