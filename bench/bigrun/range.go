package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
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
	client := "net/http's Client"
	if b.rangeRaw {
		client = "raw HTTP/1.1 (-range-raw)"
	}
	b.rep.add(phase, "load generator", "%d clients, %s", b.rangeClients, client)
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
		res, err := b.rangeRun(ctx, srv, bucket, clients, b.rangeTime)
		if err != nil {
			return err
		}
		lat, qps := res.lat, res.qps
		p50, p99, p999 := percentiles(lat)
		b.rep.add(phase, fmt.Sprintf("c=%d: 100-row range queries", clients), "%d in %v: %.0f queries/s; p50 %s, p99 %s, p99.9 %s", len(lat), b.rangeTime, qps, ms(p50), ms(p99), ms(p999))
		b.rep.add(phase, fmt.Sprintf("c=%d: CPU per query, server / load generator", clients), "%s", res.cpu())
		b.rep.add(phase, fmt.Sprintf("c=%d: slow queries", clients), "%s", res.slow())
		if clients > 1 {
			qps16 = qps
			ratio := float64(p99) / float64(p50)
			b.rep.add(phase, fmt.Sprintf("c=%d: p99 / p50 (target <= 3)", clients), "%.1f: %s", ratio, metMissed(ratio <= 3))
		}
		b.rep.add(phase, fmt.Sprintf("c=%d: peak RSS", clients), "%.0f MiB", mb(b.smp.peakRSS(fmt.Sprintf("range c=%d", clients))))
	}
	b.rep.add(phase, "queries/s vs the issue's baseline (target >= 1.5x)", "%.0f / %.0f = %.2fx: %s", qps16, b.rangeBaselineQPS, qps16/b.rangeBaselineQPS, metMissed(qps16 >= 1.5*b.rangeBaselineQPS))
	b.memFigures(srv, phase, "after queries")
	if b.rangeAB != "" {
		return b.rangeCompare(ctx, srv, bucket)
	}
	return nil
}

// rangeCompare restarts the range phase's server on its data directory
// with -bin and -range-ab in turn, -range-rounds times, and runs the
// c=-range-clients queries on each: a before/after in one run, each
// binary's rounds beside the other's, so that the machine's load (shared,
// changing) weighs on both alike.
func (b *bench) rangeCompare(ctx context.Context, srv *server, bucket string) error {
	const phase = "range-ab"
	bins := []string{b.bin, b.rangeAB}
	type figures struct{ p50, p99 []time.Duration }
	per := make([]figures, len(bins))
	for round := 1; round <= b.rangeRounds; round++ {
		for i, bin := range bins {
			if srv.exited() == nil {
				if _, err := srv.stop(syscall.SIGTERM, 5*time.Minute); err != nil {
					return err
				}
			}
			srv.bin = bin
			if err := srv.start(""); err != nil {
				return err
			}
			// Queries only once the warm-up is over: its loading would
			// weigh on the first binary's rounds alone otherwise.
			if _, err := srv.waitFor("warm-up", b.warmupTimeout, srv.healthy(ctx, bucket)); err != nil {
				return err
			}
			// The bucket is healthy before its view indexes are open
			// (their queries answer 503 until then).
			if _, err := srv.waitFor("view open", b.warmupTimeout, func() error {
				_, err := srv.query(ctx, bucket, "bench", "v", "stale=ok&reduce=false&limit=1")
				return err
			}); err != nil {
				return err
			}
			// A first pass fills the page caches (the index's, the OS's).
			if _, err := b.rangeRun(ctx, srv, bucket, b.rangeClients, 5*time.Second); err != nil {
				return err
			}
			name := fmt.Sprintf("%s round %d", filepath.Base(bin), round)
			b.smp.watch(srv, name)
			res, err := b.rangeRun(ctx, srv, bucket, b.rangeClients, b.rangeTime)
			if err != nil {
				return err
			}
			p50, p99, p999 := percentiles(res.lat)
			per[i].p50, per[i].p99 = append(per[i].p50, p50), append(per[i].p99, p99)
			b.rep.add(phase, fmt.Sprintf("%s c=%d", name, b.rangeClients), "%.0f queries/s; p50 %s, p99 %s, p99.9 %s: p99/p50 %.1f; CPU/query %s; peak RSS %.0f MiB",
				res.qps, ms(p50), ms(p99), ms(p999), float64(p99)/float64(p50), res.cpu(), mb(b.smp.peakRSS(name)))
			b.rep.add(phase, name+": slow queries", "%s", res.slow())
		}
	}
	for i, bin := range bins {
		p50, p99 := median(per[i].p50), median(per[i].p99)
		b.rep.add(phase, fmt.Sprintf("%s: median of %d rounds", filepath.Base(bin), b.rangeRounds), "p50 %s, p99 %s: p99/p50 %.1f", ms(p50), ms(p99), float64(p99)/float64(p50))
	}
	return nil
}

// median returns the middle value of ds (the upper one of an even count).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// rangeResult is one rangeRun: every query's latency, queries/s, and the
// CPU time the server and this process (the load generator) used meanwhile.
type rangeResult struct {
	lat            []time.Duration
	qps            float64
	srvCPU, genCPU time.Duration
	genGCs         uint32 // the generator's own collections meanwhile
	// srvHist is the server's own count of the answers within each bound
	// (seconds) of its latency histogram, over the run; nil if unread.
	srvHist map[float64]float64
}

// tailBounds are the latencies (seconds, bounds of the server's
// histogram) over which slow shares compares the client's and the
// server's counts.
var tailBounds = []float64{0.005, 0.01, 0.025, 0.05}

// slow formats the share of queries slower than each of tailBounds as the
// load generator timed them (request sent to answer read) and as the
// server's handler did: where the two differ, the time went outside the
// handler (waiting to run, in the network stack, in the generator).
func (r rangeResult) slow() string {
	var client, server []string
	total := r.srvHist[math.Inf(1)]
	for _, le := range tailBounds {
		over := 0
		for _, d := range r.lat {
			if d.Seconds() > le {
				over++
			}
		}
		client = append(client, fmt.Sprintf("%.2f%%", 100*float64(over)/float64(max(len(r.lat), 1))))
		if total > 0 {
			server = append(server, fmt.Sprintf("%.2f%%", 100*(total-r.srvHist[le])/total))
		} else {
			server = append(server, "?")
		}
	}
	secs := float64(len(r.lat)) / max(r.qps, 1)
	return fmt.Sprintf("over %v ms: client %s; server handler %s; server GCs %.0f (%.2f/s); generator GCs %d", []float64{5, 10, 25, 50}, strings.Join(client, " / "), strings.Join(server, " / "), r.srvHist[-1], r.srvHist[-1]/secs, r.genGCs)
}

// cpu formats the CPU time per query of the server and of the generator.
func (r rangeResult) cpu() string {
	n := time.Duration(max(len(r.lat), 1))
	return fmt.Sprintf("%d / %d µs", (r.srvCPU / n).Microseconds(), (r.genCPU / n).Microseconds())
}

// procCPU returns the user plus system CPU time process pid has used
// (/proc/pid/stat's utime and stime, in clock ticks of 10 ms).
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is the 3rd field, utime the 14th, stime the 15th.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// selfCPU returns the user plus system CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rangeRun runs clients HTTP clients, each querying 100 rows from a random
// start key one query after another, for length.
func (b *bench) rangeRun(ctx context.Context, srv *server, bucket string, clients int, length time.Duration) (rangeResult, error) {
	var (
		mu    sync.Mutex
		all   []time.Duration
		first error
		wg    sync.WaitGroup
	)
	hist0, histErr := srv.viewLatency(ctx)
	srv0, srvErr := procCPU(srv.pid())
	gen0 := selfCPU()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gcs0 := ms.NumGC
	start := time.Now() // wall clock: the benchmark times a real server
	end := start.Add(length)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 100))
			var lat []time.Duration
			var err error
			get := func(path []byte) ([]byte, error) {
				var body []byte
				err := srv.call(ctx, "GET", string(path), "", nil, &body)
				return body, err
			}
			if b.rangeRaw {
				rc := &rawClient{addr: srv.http}
				defer rc.close()
				get = rc.get
			}
			lat = make([]time.Duration, 0, 1<<16)
			var path []byte
			for time.Now().Before(end) { // wall clock: the benchmark times a real server
				k := rng.IntN(b.rangeDocs)
				// Built without allocating, as the raw client reads: the
				// generator's own collections would take CPU from the
				// server it shares the cores with.
				path = append(path[:0], "/"...)
				path = append(path, bucket...)
				path = append(path, "/_design/bench/_view/v?stale=ok&reduce=false&limit=100&startkey=%5B%22t"...)
				path = strconv.AppendInt(path, int64(k%10), 10)
				path = append(path, "%22,"...)
				path = strconv.AppendInt(path, int64(k), 10)
				path = append(path, "%5D"...)
				t := time.Now() // wall clock: the benchmark times a real server
				var body []byte
				body, err = get(path)
				lat = append(lat, time.Since(t))
				if err == nil && !bytes.Contains(body, []byte(`"id":`)) {
					err = fmt.Errorf("range query %s: no rows", path)
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
	res := rangeResult{lat: all, qps: float64(len(all)) / time.Since(start).Seconds(), genCPU: selfCPU() - gen0}
	runtime.ReadMemStats(&ms)
	res.genGCs = ms.NumGC - gcs0
	if srv1, err := procCPU(srv.pid()); err == nil && srvErr == nil {
		res.srvCPU = srv1 - srv0
	}
	if hist1, err := srv.viewLatency(ctx); err == nil && histErr == nil {
		res.srvHist = map[float64]float64{}
		for le, n := range hist1 {
			res.srvHist[le] = n - hist0[le]
		}
	}
	return res, first
}

// rawClient is -range-raw's lean HTTP/1.1 client: one kept-alive
// connection, the request written as bytes and the answer read in the
// calling goroutine, without net/http's Transport (its connection pool and
// the two goroutines it runs per connection) and without allocating once
// its buffers have grown, so that the generator takes less of the CPU the
// server shares with it, and no collections.
type rawClient struct {
	addr string
	conn net.Conn
	br   *bufio.Reader
	req  []byte
	body []byte
}

// get sends a GET of path and returns the answer's body, valid until the
// next call; a status other than 200 is an error.
func (c *rawClient) get(path []byte) ([]byte, error) {
	if c.conn == nil {
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			return nil, err
		}
		c.conn, c.br = conn, bufio.NewReaderSize(conn, 64<<10)
	}
	c.req = append(c.req[:0], "GET "...)
	c.req = append(c.req, path...)
	c.req = append(c.req, " HTTP/1.1\r\nHost: "...)
	c.req = append(c.req, c.addr...)
	c.req = append(c.req, "\r\nAuthorization: Basic "...)
	c.req = base64.StdEncoding.AppendEncode(c.req, []byte(adminUser+":"+adminPassword))
	c.req = append(c.req, "\r\n\r\n"...)
	if _, err := c.conn.Write(c.req); err != nil {
		c.close()
		return nil, err
	}
	status, err := c.readResponse()
	if err != nil {
		c.close()
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d: %.300s", path, status, c.body)
	}
	return c.body, nil
}

// readResponse reads one answer: its status line, its headers (of which
// only Content-Length and Transfer-Encoding: chunked matter) and its body
// into c.body.
func (c *rawClient) readResponse() (int, error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	status, ok := parseUint(line[9:12], 10)
	if !ok {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	length, chunked := -1, false
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, ok := parseUint(value, 10)
			if !ok {
				return 0, fmt.Errorf("bad Content-Length %q", value)
			}
			length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		}
	}
	c.body = c.body[:0]
	switch {
	case chunked:
		for {
			line, err := c.br.ReadSlice('\n')
			if err != nil {
				return 0, err
			}
			size, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
			n, ok := parseUint(size, 16)
			if !ok {
				return 0, fmt.Errorf("bad chunk size %q", line)
			}
			if n == 0 { // the trailers, then an empty line
				for {
					line, err := c.br.ReadSlice('\n')
					if err != nil {
						return 0, err
					}
					if len(bytes.TrimRight(line, "\r\n")) == 0 {
						return status, nil
					}
				}
			}
			if err := c.readBody(n + 2); err != nil { // the chunk and its CRLF
				return 0, err
			}
			c.body = c.body[:len(c.body)-2]
		}
	case length >= 0:
		return status, c.readBody(length)
	default:
		return 0, errors.New("an answer with neither a length nor chunks")
	}
}

// parseUint parses b, digits in base 10 or 16, without allocating; it
// reports false for no digits, another character, or a number over 2^31.
func parseUint(b []byte, base int) (int, bool) {
	n := 0
	for _, ch := range b {
		var d int
		switch {
		case ch >= '0' && ch <= '9':
			d = int(ch - '0')
		case base == 16 && ch >= 'a' && ch <= 'f':
			d = int(ch-'a') + 10
		case base == 16 && ch >= 'A' && ch <= 'F':
			d = int(ch-'A') + 10
		default:
			return 0, false
		}
		if n = n*base + d; n > 1<<31 {
			return 0, false
		}
	}
	return n, len(b) > 0
}

// readBody appends n bytes of the connection to c.body.
func (c *rawClient) readBody(n int) error {
	at := len(c.body)
	c.body = slices.Grow(c.body, n)[:at+n]
	_, err := io.ReadFull(c.br, c.body[at:])
	return err
}

func (c *rawClient) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}
