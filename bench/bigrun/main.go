// Command bigrun is issue 19's large-scale run, client and server apart: it
// starts `mayfly serve` (a built binary) on a fresh data directory and free
// loopback ports and measures, over the server's own ports,
//
//   - big: a couchbase bucket (valueOnly) with a -quota-mb quota loaded with
//     -docs JSON documents of -value bytes through the memcached port
//     (pipelined, many connections), the server's VmRSS and the bucket's
//     memory stats sampled every second; a view (emit(doc.n), _count) built
//     with stale=false; random gets after the page cache is dropped (p50,
//     p99, p99.9, ep_bg_fetched); then a SIGTERM and a SIGKILL restart, each
//     timed to its first answers (a get, a stale=ok view query) and to the
//     end of the warm-up;
//   - range: -range-docs small documents ({"type":"t3","n":123,"v":4.5}),
//     the view emit([doc.type, doc.n], doc.v) with _sum, and 100-row range
//     queries (random startkey, limit=100) from 1 and from -range-clients
//     HTTP clients for -range-time each (p50, p99, queries/s, and the CPU
//     time the server and the load generator each spent per query); with
//     -range-ab, then the same server binary and another one alternately on
//     the same data directory, for a before/after in one run.
//
// It prints a table, writes it to -out, every second's sample to
// -out's name with -samples.out (CSV), and the server's log to -server.out.
// `make bench-big` runs it (BENCHMARKS.md, "Large-scale run (issue 19)").
// It is not part of make test.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
)

// config is bigrun's flags.
type config struct {
	bin, workdir, out, phases  string
	reuse, serveArgs           string
	docs, value, quotaMB       int
	conns, depth               int
	gets                       int
	viewCacheMB                int
	noSync, keep, getsInBuild  bool
	rangeDocs, rangeClients    int
	rangeTime, warmupTimeout   time.Duration
	staleFalseWait, stopWait   time.Duration
	viewWait, idleWait         time.Duration
	rangeBaselineQPS           float64
	rangeAB                    string
	rangeRounds                int
	rangeRaw                   bool
	genGOGC, genProcs          int
	indexBudgetMB, allowanceMB int
	noRestarts                 bool
	viewAgain                  bool
	profileDir                 string
	profileSeconds             int
	getsABBin, getsABArgs      string
	getsABRounds               int
}

func main() {
	var c config
	flag.StringVar(&c.bin, "bin", "bin/mayfly", "mayfly binary to run (make build)")
	flag.StringVar(&c.workdir, "workdir", "", "directory for the servers' data directories (default: a new one under $TMPDIR; on a disk, not tmpfs)")
	flag.StringVar(&c.out, "out", "bench-big.out", "file the figures are written to")
	flag.StringVar(&c.phases, "phases", "big,range", "comma-separated phases: big, range")
	flag.StringVar(&c.reuse, "reuse", "", "the big phase reuses this data directory of an earlier run (-keep, or one left by an interrupted run: WORKDIR/big): no load or view build, only the gets and the restarts")
	flag.DurationVar(&c.staleFalseWait, "stale-false-wait", time.Hour, "longest a restart waits for a stale=false answer before reporting it missing")
	flag.DurationVar(&c.viewWait, "view-wait", 6*time.Hour, "longest the big phase waits for its view build (stale=false); the gets and restarts then run beside the build")
	flag.DurationVar(&c.stopWait, "stop-wait", 5*time.Minute, "longest a SIGTERM may take before the server is killed (and that reported)")
	flag.IntVar(&c.docs, "docs", 5_000_000, "documents of the big phase")
	flag.IntVar(&c.value, "value", 1024, "bytes of each big-phase document (JSON)")
	flag.IntVar(&c.quotaMB, "quota-mb", 1024, "ramQuotaMB of the big phase's bucket")
	flag.IntVar(&c.conns, "conns", 16, "memcached connections loading")
	flag.IntVar(&c.depth, "depth", 64, "sets each loading connection sends before reading their replies")
	flag.IntVar(&c.gets, "gets", 20000, "random gets timed after the page cache is dropped; 0 skips the gets and the restarts")
	flag.DurationVar(&c.idleWait, "idle-wait", 0, "after the view build, leave the server idle this long and report its memory at 10 s and at the end (what it gives back after a burst); 0: no wait")
	flag.IntVar(&c.viewCacheMB, "view-cache-mb", 256, "serve --view-cache-mb: the view indexes' page cache, the index budget")
	flag.IntVar(&c.allowanceMB, "allowance-mb", 200, "RSS allowed beyond quota plus index budget (the issue's 200 MB)")
	flag.BoolVar(&c.noSync, "no-sync", false, "serve --no-sync")
	flag.StringVar(&c.serveArgs, "serve-args", "", "more serve flags, space-separated (e.g. \"--memory-overhead-mb 1024\" to compare a setting)")
	flag.BoolVar(&c.keep, "keep", false, "keep the data directories")
	flag.BoolVar(&c.getsInBuild, "gets-in-build", false, "also time the random gets while the view builds (right after the design document's PUT), beside the ones after it")
	flag.IntVar(&c.rangeDocs, "range-docs", 1_000_000, "documents (and view rows) of the range phase")
	flag.IntVar(&c.rangeClients, "range-clients", 16, "concurrent clients of the range phase's second run")
	flag.DurationVar(&c.rangeTime, "range-time", 30*time.Second, "length of each range-query run")
	flag.Float64Var(&c.rangeBaselineQPS, "range-baseline-qps", 2849, "queries/s at 16 clients before issue 19 (the issue's figure); the target is 1.5x")
	flag.StringVar(&c.rangeAB, "range-ab", "", "after the range phase, alternate -bin and this mayfly binary on its data directory, -range-rounds times each, for the c=-range-clients run only (p50, p99, p99/p50 of each, same run)")
	flag.IntVar(&c.rangeRounds, "range-rounds", 3, "rounds of -range-ab")
	flag.BoolVar(&c.rangeRaw, "range-raw", false, "range queries from a lean HTTP/1.1 client (a connection and the answer read in each client's goroutine) instead of net/http's Client, which takes about 40% of the CPU the server gets")
	flag.BoolVar(&c.noRestarts, "no-restarts", false, "after the random gets, skip the restarts (to iterate on the gets of a -reuse store)")
	flag.BoolVar(&c.viewAgain, "view-again", false, "with -reuse: before the gets, build a view again (a design document of a new name, the same map) and time the gets right after it, as the first run's are")
	flag.StringVar(&c.profileDir, "profile-dir", "", "serve with --pprof and, during each run of random gets, write the server's CPU profile and runtime trace (-profile-seconds long) and every get's start and latency (CSV) to this directory")
	flag.IntVar(&c.profileSeconds, "profile-seconds", 10, "length of the CPU profile and trace -profile-dir takes from the start of the gets")
	flag.StringVar(&c.getsABBin, "gets-ab", "", "with -reuse: alternate -bin (A) and this mayfly binary (B) on the reused data directory, -gets-ab-rounds times each, each started afresh, warmed up and timed on random gets after the page cache drop (no restarts); \"same\": B is -bin too (with -gets-ab-args)")
	flag.StringVar(&c.getsABArgs, "gets-ab-args", "", "more serve flags of -gets-ab's B runs instead of -serve-args (space-separated); variants separated by |, each B, C, ...; a variant's leading bin=PATH word runs that mayfly binary")
	flag.IntVar(&c.getsABRounds, "gets-ab-rounds", 3, "rounds of -gets-ab (A then B in odd rounds, B then A in even ones)")
	flag.DurationVar(&c.warmupTimeout, "timeout", 6*time.Hour, "longest any one wait (load, build, warm-up) may take")
	flag.IntVar(&c.genGOGC, "gen-gogc", 100, "the harness's own GOGC (the servers it starts keep theirs): a higher one keeps the load generator's collections, which take CPU from the server sharing its cores, out of the latencies it measures")
	flag.IntVar(&c.genProcs, "gen-procs", 0, "the harness's own GOMAXPROCS, 0: Go's default (the servers it starts keep theirs)")
	flag.Parse()
	debug.SetGCPercent(c.genGOGC)
	if c.genProcs > 0 {
		runtime.GOMAXPROCS(c.genProcs)
	}
	// serve counts the page cache and as much again of dirty leaves (its
	// --view-cache-mb help): the index budget is both.
	c.indexBudgetMB = 2 * c.viewCacheMB
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bigrun:", err)
		os.Exit(1)
	}
}

// report is the figures table.
type report struct {
	mu   sync.Mutex
	rows [][4]string // phase, figure, value, load average
}

func (r *report) add(phase, name, format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.rows = append(r.rows, [4]string{phase, name, v, uptime()})
	r.mu.Unlock()
	fmt.Printf("  %-6s %-48s %s   (load %s)\n", phase, name, v, uptime())
}

func (r *report) write(w io.Writer, head string) {
	fmt.Fprintln(w, head)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tfigure\tvalue\tload average")
	for _, row := range r.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", row[0], row[1], row[2], row[3])
	}
	tw.Flush()
}

// bench is one run's shared state.
type bench struct {
	config
	rep     *report
	smp     *sampler
	logPath string
	rng     *rand.Rand
}

func run(c config) error {
	if _, err := os.Stat(c.bin); err != nil {
		return fmt.Errorf("%w (make build)", err)
	}
	bin, err := filepath.Abs(c.bin)
	if err != nil {
		return err
	}
	c.bin = bin
	if c.rangeAB != "" {
		if c.rangeAB, err = filepath.Abs(c.rangeAB); err != nil {
			return err
		}
		if _, err := os.Stat(c.rangeAB); err != nil {
			return fmt.Errorf("-range-ab: %w", err)
		}
	}
	switch c.getsABBin {
	case "":
	case "same":
		c.getsABBin = c.bin
	default:
		if c.getsABBin, err = filepath.Abs(c.getsABBin); err != nil {
			return err
		}
		if _, err := os.Stat(c.getsABBin); err != nil {
			return fmt.Errorf("-gets-ab: %w", err)
		}
	}
	if c.getsABBin != "" && c.reuse == "" {
		return errors.New("-gets-ab needs -reuse")
	}
	if c.profileDir != "" {
		if err := os.MkdirAll(c.profileDir, 0o755); err != nil {
			return err
		}
	}
	if c.workdir == "" {
		if c.workdir, err = os.MkdirTemp("", "mayfly-bigrun-"); err != nil {
			return err
		}
		if !c.keep {
			defer os.RemoveAll(c.workdir)
		}
	}
	base := strings.TrimSuffix(c.out, filepath.Ext(c.out))
	samples, err := os.Create(base + "-samples.out")
	if err != nil {
		return err
	}
	defer samples.Close()
	b := &bench{config: c, rep: &report{}, smp: newSampler(samples), logPath: base + "-server.out", rng: rand.New(rand.NewPCG(19, 5))}
	os.Remove(b.logPath)
	defer b.smp.close()
	host, _ := os.Hostname()
	head := fmt.Sprintf("bigrun %s on %s: docs=%d value=%d quota=%d MiB view-cache=%d MiB serve-args=%q conns=%dx%d no-sync=%v; range-docs=%d clients=%d for %v; load at start %s",
		time.Now().UTC().Format(time.RFC3339), host, c.docs, c.value, c.quotaMB, c.viewCacheMB, c.serveArgs, c.conns, c.depth, c.noSync, c.rangeDocs, c.rangeClients, c.rangeTime, uptime()) // wall clock: the benchmark times a real server
	fmt.Println(head)
	var runErr error
	for _, p := range strings.Split(c.phases, ",") {
		switch strings.TrimSpace(p) {
		case "big":
			runErr = b.big()
		case "range":
			runErr = b.rangePhase()
		default:
			runErr = fmt.Errorf("unknown phase %q", p)
		}
		if runErr != nil {
			runErr = fmt.Errorf("phase %s: %w", p, runErr)
			break
		}
	}
	f, err := os.Create(c.out)
	if err != nil {
		return err
	}
	defer f.Close()
	if runErr != nil {
		head += "\nFAILED: " + runErr.Error()
	}
	b.rep.write(f, head)
	fmt.Printf("figures: %s; samples: %s; server log: %s\n", c.out, samples.Name(), b.logPath)
	return runErr
}

// serverFor makes a bucket named bucket with quotaMB on a fresh data
// directory (the memcached port serves one bucket, which must exist when
// the server starts: a first start creates it over REST, then the server
// starts again with its memcached port on it).
func (b *bench) serverFor(bucket string, quotaMB int) (*server, error) {
	data := filepath.Join(b.workdir, bucket)
	if err := os.RemoveAll(data); err != nil {
		return nil, err
	}
	srv, err := b.newServer(b.bin, data, b.serveFlags(b.serveArgs))
	if err != nil {
		return nil, err
	}
	if err := srv.start(""); err != nil {
		return nil, err
	}
	ctx := context.Background()
	if _, err := srv.waitFor("HTTP port", time.Minute, func() error { return srv.call(ctx, "GET", "/pools", "", nil, nil) }); err != nil {
		return nil, err
	}
	if err := srv.createBucket(ctx, bucket, quotaMB); err != nil {
		return nil, err
	}
	if _, err := srv.stop(syscall.SIGTERM, time.Minute); err != nil {
		return nil, err
	}
	if err := srv.start(bucket); err != nil {
		return nil, err
	}
	_, err = srv.waitFor("memcached port", time.Minute, func() error {
		m, err := dialMC(srv.mc)
		if err != nil {
			return err
		}
		defer m.Close()
		_, err = m.stats()
		return err
	})
	return srv, err
}

// serveFlags are the serve flags beside the ports and the data directory,
// with args (-serve-args, or -gets-ab-args) last.
func (b *bench) serveFlags(args string) []string {
	extra := []string{"--view-cache-mb", fmt.Sprint(b.viewCacheMB)}
	if b.noSync {
		extra = append(extra, "--no-sync")
	}
	extra = append(extra, strings.Fields(args)...)
	return extra
}

// loadDocs loads n documents, printing progress every 10 s.
func (b *bench) loadDocs(srv *server, n int, key func(int) string, value func(int, []byte) []byte) (time.Duration, int64, error) {
	var progress, refused atomic.Int64
	t0 := time.Now() // wall clock: the benchmark times a real server
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				rss, _ := srv.rss()
				p := progress.Load()
				fmt.Printf("    load: %d/%d (%.0f/s), RSS %.0f MiB, refused %d, load %s\n", p, n, float64(p)/time.Since(t0).Seconds(), mb(rss), refused.Load(), uptime())
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), b.warmupTimeout)
	defer cancel()
	err := load(ctx, srv.mc, n, b.conns, b.depth, key, value, &progress, &refused)
	close(done)
	return time.Since(t0), refused.Load(), err
}

// stats reads the bucket's stats over a new memcached connection.
func (b *bench) stats(srv *server) (map[string]string, error) {
	m, err := dialMC(srv.mc)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	return m.stats()
}

// memFigures reports the memory stats and the Go heap now.
func (b *bench) memFigures(srv *server, phase, when string) {
	st, err := b.stats(srv)
	if err != nil {
		b.rep.add(phase, when+": stats", "error: %v", err)
		return
	}
	rss, _ := srv.rss()
	b.rep.add(phase, when+": RSS / mem_used / high-water", "%.0f / %.0f / %.0f MiB", mb(rss), mb(statInt(st, "mem_used")), mb(statInt(st, "ep_mem_high_wat")))
	b.rep.add(phase, when+": resident % / value ejects / non-resident", "%s%% / %s / %s", st["vb_active_perc_mem_resident"], st["ep_num_value_ejects"], st["ep_num_non_resident"])
	if items := statInt(st, "curr_items"); items > 0 {
		b.rep.add(phase, when+": mem_used per document", "%.0f B (curr_items %d)", float64(statInt(st, "mem_used"))/float64(items), items)
	}
	if bd, err := srv.memBreakdown(context.Background()); err == nil {
		b.rep.add(phase, when+": breakdown", "%v", bd)
	}
	if g, err := srv.goMemStats(context.Background()); err == nil {
		b.rep.add(phase, when+": Go heap alloc / heap in use / Go sys", "%.0f / %.0f / %.0f MiB (GOMEMLIMIT %.0f MiB)",
			g["go_memstats_heap_alloc_bytes"]/(1<<20), g["go_memstats_heap_inuse_bytes"]/(1<<20), g["go_memstats_sys_bytes"]/(1<<20), g["go_gc_gomemlimit_bytes"]/(1<<20))
	}
}

// bigKey and bigValue are the big phase's documents: JSON of exactly
// b.value bytes (when it is at least the fields' length).
func bigKey(i int) string { return fmt.Sprintf("doc%08d", i) }

// The padding is pseudo-random text (6 bits a byte, seeded by i, so a get
// can check what it reads): a repeating pattern would compress to a few
// bytes on disk and make the reads of ejected values unrealistically cheap.
func (b *bench) bigValue(i int, buf []byte) []byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	buf = fmt.Appendf(buf, `{"type":"t%d","n":%d,"pad":"`, i%10, i)
	x := uint64(i)
	for len(buf) < b.value-2 {
		x += 0x9e3779b97f4a7c15 // splitmix64
		z := (x ^ x>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
		for k := 0; k < 10 && len(buf) < b.value-2; k++ {
			buf = append(buf, alphabet[z&63])
			z >>= 6
		}
	}
	return append(buf, `"}`...)
}

const bigDDoc = `{"views":{"n":{"map":"function (doc, meta) { emit(doc.n, null); }","reduce":"_count"}}}`

func (b *bench) big() error {
	const bucket, phase = "big", "big"
	fmt.Printf("big: %d documents of %d B into a %d MiB bucket\n", b.docs, b.value, b.quotaMB)
	if b.reuse != "" {
		return b.reuseBig(bucket)
	}
	srv, err := b.serverFor(bucket, b.quotaMB)
	if err != nil {
		return err
	}
	defer func() {
		if srv.exited() == nil {
			srv.stop(syscall.SIGTERM, 5*time.Minute)
		}
	}()
	ctx := context.Background()
	budget := int64(b.quotaMB+b.indexBudgetMB+b.allowanceMB) << 20

	b.smp.watch(srv, "load")
	took, refused, err := b.loadDocs(srv, b.docs, bigKey, b.bigValue)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	b.rep.add(phase, "load", "%d docs in %.1f s: %.0f docs/s (%d sets refused and resent)", b.docs, took.Seconds(), float64(b.docs)/took.Seconds(), refused)
	peak := b.smp.peakRSS("load")
	b.rep.add(phase, "load: peak RSS vs quota+index budget+allowance", "%.0f MiB vs %.0f MiB: %s", mb(peak), mb(budget), metMissed(peak <= budget))
	b.rep.add(phase, "  at the load's peak", "%v", b.smp.peakBreakdown("load"))
	b.memFigures(srv, phase, "after load")
	b.rep.add(phase, "data directory", "%.0f MiB", mb(dirSize(srv.data)))

	b.smp.watch(srv, "view")
	t0 := time.Now() // wall clock: the benchmark times a real server
	if err := srv.putDesignDoc(ctx, bucket, "big", bigDDoc); err != nil {
		return err
	}
	if b.getsInBuild {
		// The same gets with the build beside them (the later ones run
		// after it, unless it outlasts -view-wait).
		if _, err := b.randomGets(srv, phase, ", the view build beside"); err != nil {
			return err
		}
	}
	vctx, cancel := context.WithTimeout(ctx, b.viewWait)
	a, err := srv.query(vctx, bucket, "big", "n", "stale=false")
	cancel()
	took = time.Since(t0)
	switch {
	case err != nil && vctx.Err() != nil:
		// The rest of the phase runs with the build going on beside it.
		b.rep.add(phase, "view build (stale=false, _count)", "not finished within -view-wait %v", b.viewWait)
	case err != nil:
		return fmt.Errorf("view build: %w", err)
	default:
		count := "?"
		if len(a.Rows) == 1 {
			count = string(a.Rows[0].Value)
		}
		b.rep.add(phase, "view build (stale=false, _count)", "%.1f s: %.0f docs/s, count %s", took.Seconds(), float64(b.docs)/took.Seconds(), count)
		if count != fmt.Sprint(b.docs) {
			return fmt.Errorf("view counts %s rows, want %d", count, b.docs)
		}
	}
	peak = b.smp.peakRSS("view")
	b.rep.add(phase, "view: peak RSS vs quota+index budget+allowance", "%.0f MiB vs %.0f MiB: %s", mb(peak), mb(budget), metMissed(peak <= budget))
	b.rep.add(phase, "  at the build's peak", "%v", b.smp.peakBreakdown("view"))
	b.memFigures(srv, phase, "after view")
	if b.idleWait > 0 {
		b.idle(srv, phase)
	}
	if b.gets == 0 {
		return nil
	}
	return b.getsAndRestarts(srv, phase, bucket)
}

// idle leaves srv alone for b.idleWait and reports its memory 10 s into
// the wait and at its end: what the server gives back once a burst ends.
func (b *bench) idle(srv *server, phase string) {
	b.smp.watch(srv, "idle")
	first := min(10*time.Second, b.idleWait)
	time.Sleep(first)
	b.memFigures(srv, phase, fmt.Sprintf("idle %v after view", first))
	if rest := b.idleWait - first; rest > 0 {
		time.Sleep(rest)
		b.memFigures(srv, phase, fmt.Sprintf("idle %v after view", b.idleWait))
	}
}

// reuseBig starts the server on the data directory of an earlier big phase
// (-reuse: its load and view build are not repeated) and runs the random
// gets and the restarts. Its view may still be building: the gets then
// share the machine with it.
func (b *bench) reuseBig(bucket string) error {
	if b.getsABBin != "" {
		return b.getsAB(bucket)
	}
	srv, err := b.newServer(b.bin, b.reuse, b.serveFlags(b.serveArgs))
	if err != nil {
		return err
	}
	if err := srv.start(bucket); err != nil {
		return err
	}
	defer func() {
		if srv.exited() == nil {
			srv.stop(syscall.SIGTERM, 5*time.Minute)
		}
	}()
	b.smp.watch(srv, "reuse start")
	at, err := srv.waitFor("warm-up", b.warmupTimeout, srv.healthy(context.Background(), bucket))
	if err != nil {
		return err
	}
	b.rep.add("big", "reused "+b.reuse+": warm-up done", "%.2f s after the process started", at.Seconds())
	b.memFigures(srv, "big", "reused, warm")
	if err := b.buildAgain(srv, bucket, "big"); err != nil {
		return err
	}
	if b.gets == 0 {
		return nil
	}
	return b.getsAndRestarts(srv, "big", bucket)
}

// getsAndRestarts times the random gets of ejected documents, then the
// restarts after SIGTERM and after kill -9.
func (b *bench) getsAndRestarts(srv *server, phase, bucket string) error {
	b.smp.watch(srv, "gets")
	if _, err := b.randomGets(srv, phase, ""); err != nil {
		return err
	}
	if b.noRestarts {
		b.smp.watch(nil, "")
		return nil
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if err := b.restart(srv, sig, bucket); err != nil {
			return err
		}
	}
	b.smp.watch(nil, "")
	return nil
}

func metMissed(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// getsFigures are a run of random gets' latencies.
type getsFigures struct{ p50, p99, p999 time.Duration }

// randomGets drops the page cache and times b.gets gets of random keys
// over one connection, checking each value. It also reports what the
// server did meanwhile (CPU time, disk bytes read and written, garbage
// collections), and with -profile-dir takes its profiles.
func (b *bench) randomGets(srv *server, phase, beside string) (getsFigures, error) {
	before, err := b.stats(srv)
	if err != nil {
		return getsFigures{}, err
	}
	method, err := dropCaches(srv.data)
	if err != nil {
		b.rep.add(phase, "page cache drop", "%s failed: %v", method, err)
	}
	m, err := dialMC(srv.mc)
	if err != nil {
		return getsFigures{}, err
	}
	defer m.Close()
	ctx := context.Background()
	procBefore, _ := srv.counters()
	gcBefore, _ := srv.gcCounts(ctx)
	stopProfiles := b.startProfiles(srv, phase)
	lat := make([]time.Duration, 0, b.gets)
	at := make([]time.Duration, 0, b.gets)
	t0 := time.Now() // wall clock: the benchmark times a real server
	for range b.gets {
		i := b.rng.IntN(b.docs)
		t := time.Now() // wall clock: the benchmark times a real server
		v, err := m.get(bigKey(i))
		lat = append(lat, time.Since(t))
		at = append(at, t.Sub(t0))
		if err != nil {
			return getsFigures{}, err
		}
		if want := b.bigValue(i, nil); string(v) != string(want) {
			return getsFigures{}, fmt.Errorf("get %s: %d bytes, not the %d stored", bigKey(i), len(v), len(want))
		}
	}
	took := time.Since(t0)
	procAfter, _ := srv.counters()
	gcAfter, _ := srv.gcCounts(ctx)
	stopProfiles(at, lat)
	after, err := b.stats(srv)
	if err != nil {
		return getsFigures{}, err
	}
	fetched := statInt(after, "ep_bg_fetched") - statInt(before, "ep_bg_fetched")
	var slow2, slow10 int
	for _, d := range lat {
		if d > 2*time.Millisecond {
			slow2++
		}
		if d > 10*time.Millisecond {
			slow10++
		}
	}
	p50, p99, p999 := percentiles(lat)
	b.rep.add(phase, "random gets after "+method+", one client"+beside, "%d in %.1f s; p50 %s, p99 %s, p99.9 %s (target p99 <= 2 ms: %s)", b.gets, took.Seconds(), ms(p50), ms(p99), ms(p999), metMissed(p99 <= 2*time.Millisecond))
	b.rep.add(phase, "  of which read from disk (ep_bg_fetched)", "%d (%.0f%%); resident before %s%%", fetched, 100*float64(fetched)/float64(b.gets), before["vb_active_perc_mem_resident"])
	b.rep.add(phase, "  gets over 2 ms / over 10 ms", "%d / %d", slow2, slow10)
	b.rep.add(phase, "  server meanwhile: CPU / disk read / disk written / GCs / GC pauses", "%.2f s / %.0f MiB / %.0f MiB / %.0f / %.1f ms",
		(procAfter.cpu - procBefore.cpu).Seconds(), mb(procAfter.read-procBefore.read), mb(procAfter.written-procBefore.written),
		gcAfter.count-gcBefore.count, 1000*(gcAfter.pauseSum-gcBefore.pauseSum))
	return getsFigures{p50, p99, p999}, nil
}

// restart stops srv with sig, starts it again and times, from the start of
// the process, the first answers and the warm-up's end.
func (b *bench) restart(srv *server, sig syscall.Signal, bucket string) error {
	phase := "restart after " + map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGKILL: "kill -9"}[sig]
	b.smp.watch(nil, "")
	stopped, err := srv.stop(sig, b.stopWait)
	if sig == syscall.SIGTERM {
		if err != nil {
			b.rep.add(phase, "clean shutdown", "%v", err)
		} else {
			b.rep.add(phase, "clean shutdown took", "%.2f s", stopped.Seconds())
		}
	} else if err != nil {
		return err
	}
	if err := srv.start(bucket); err != nil {
		return err
	}
	b.smp.watch(srv, phase)
	ctx := context.Background()
	key := bigKey(b.rng.IntN(b.docs))
	type result struct {
		name string
		at   time.Duration
		err  error
	}
	waits := []struct {
		name string
		f    func() error
	}{
		{"first get (memcached port)", func() error {
			m, err := dialMC(srv.mc)
			if err != nil {
				return err
			}
			defer m.Close()
			_, err = m.get(key)
			return err
		}},
		{"first document read (HTTP GET /big/docs/K)", func() error {
			return srv.call(ctx, "GET", "/"+bucket+"/docs/"+url.PathEscape(key), "", nil, nil)
		}},
		{"first stale=ok view answer", func() error {
			_, err := srv.query(ctx, bucket, "big", "n", "stale=ok&reduce=false&limit=1")
			return err
		}},
		{"warm-up done (nodes[].status healthy)", srv.healthy(ctx, bucket)},
	}
	results := make(chan result, len(waits))
	for _, w := range waits {
		go func() {
			at, err := srv.waitFor(w.name, b.warmupTimeout, w.f)
			results <- result{w.name, at, err}
		}()
	}
	got := map[string]result{}
	for range waits {
		r := <-results
		got[r.name] = r
	}
	for _, w := range waits {
		r := got[w.name]
		if r.err != nil {
			return r.err
		}
		b.rep.add(phase, w.name, "%.2f s after the process started", r.at.Seconds())
	}
	first := min(got[waits[0].name].at, got[waits[1].name].at)
	b.rep.add(phase, "first answer (a get) <= 1 s", "%.2f s: %s", first.Seconds(), metMissed(first <= time.Second))
	sctx, cancel := context.WithTimeout(ctx, b.staleFalseWait)
	defer cancel()
	at, err := srv.waitFor("stale=false", b.staleFalseWait, func() error {
		a, err := srv.query(sctx, bucket, "big", "n", "stale=false")
		if err == nil && (len(a.Rows) != 1 || string(a.Rows[0].Value) != fmt.Sprint(b.docs)) {
			return fmt.Errorf("stale=false answered %d rows, want a count of %d", len(a.Rows), b.docs)
		}
		return err
	})
	if err != nil {
		b.rep.add(phase, "stale=false answered (every document)", "not within %v: %v", b.staleFalseWait, err)
	} else {
		b.rep.add(phase, "stale=false answered (every document)", "%.2f s", at.Seconds())
	}
	if st, err := b.stats(srv); err == nil {
		b.rep.add(phase, "ep_warmup_time / state", "%.2f s / %s", float64(statInt(st, "ep_warmup_time"))/1e6, st["ep_warmup_state"])
	}
	b.rep.add(phase, "peak RSS during warm-up", "%.0f MiB", mb(b.smp.peakRSS(phase)))
	b.memFigures(srv, phase, "warm")
	return nil
}
