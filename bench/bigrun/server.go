package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// adminUser and adminPassword log the harness in; the server listens on
// loopback only.
const (
	adminUser     = "Administrator"
	adminPassword = "bigrun-password"
)

// server is one `mayfly serve` process on a data directory, with the
// addresses of its ports.
type server struct {
	bin, data, logPath string
	extra              []string // more serve flags (--view-cache-mb, --no-sync)
	http, mc           string   // host:port
	pprof              string   // --pprof host:port, "" when off
	env                []string // NAME=VALUE beside the harness's environment
	ports              map[string]string

	cmd     *exec.Cmd
	procID  atomic.Int64 // the running process's id, 0 before the first start (read by the sampler)
	started time.Time
	done    chan error
}

// freePort returns a loopback address nobody listens on at the moment.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// newServer picks free ports for every port flag of serve.
func newServer(bin, data, logPath string, extra []string) (*server, error) {
	s := &server{bin: bin, data: data, logPath: logPath, extra: extra, ports: map[string]string{}}
	for _, p := range []string{"http", "memcached", "kv", "views", "search"} {
		a, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		s.ports[p] = a
	}
	s.http, s.mc = s.ports["http"], s.ports["memcached"]
	return s, nil
}

// start runs serve; memcachedBucket "" turns the memcached port off (the
// bucket it serves must exist at start).
func (s *server) start(memcachedBucket string) error {
	mc := ""
	args := []string{"serve", "--data", s.data, "--default-bucket", "",
		"--admin-user", adminUser, "--admin-password", adminPassword,
		"--http", s.http, "--kv", s.ports["kv"], "--kv-tls", "",
		"--views", s.ports["views"], "--search", s.ports["search"],
		"--write-timeout", "6h", "--read-timeout", "6h"}
	if memcachedBucket != "" {
		mc = s.mc
		args = append(args, "--memcached-bucket", memcachedBucket)
	}
	args = append(args, "--memcached", mc)
	args = append(args, s.extra...)
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "\n--- %s %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(args, " ")) // wall clock: the benchmark times a real server
	s.cmd = exec.Command(s.bin, args...)
	if len(s.env) > 0 {
		s.cmd.Env = append(os.Environ(), s.env...)
	}
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.started = time.Now() // wall clock: the benchmark times a real server
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	s.procID.Store(int64(s.cmd.Process.Pid))
	s.done = make(chan error, 1)
	go func() { s.done <- s.cmd.Wait(); logf.Close() }()
	return nil
}

// pid is the server process's id (the last one started; 0 before the
// first start). The sampler reads it while the harness restarts the server.
func (s *server) pid() int { return int(s.procID.Load()) }

// stop sends sig and waits for the process to end, returning how long it
// took.
func (s *server) stop(sig syscall.Signal, wait time.Duration) (time.Duration, error) {
	t := time.Now() // wall clock: the benchmark times a real server
	if err := s.cmd.Process.Signal(sig); err != nil {
		return 0, err
	}
	select {
	case <-s.done:
		return time.Since(t), nil
	case <-time.After(wait):
		s.cmd.Process.Kill()
		<-s.done
		return time.Since(t), fmt.Errorf("server did not stop within %v after %v; killed", wait, sig)
	}
}

// exited reports an early exit of the server, if it happened.
func (s *server) exited() error {
	select {
	case err := <-s.done:
		s.done <- err
		return fmt.Errorf("server exited: %v (see %s)", err, s.logPath)
	default:
		return nil
	}
}

// waitFor calls f every 10 ms until it succeeds, the server exits or
// timeout passes; it returns the time since the server started.
// healthy returns a check for waitFor: nil once bucket's node status is
// healthy (its warm-up done).
func (s *server) healthy(ctx context.Context, bucket string) func() error {
	return func() error {
		st, err := s.nodeStatus(ctx, bucket)
		if err == nil && st != "healthy" {
			err = fmt.Errorf("status %q", st)
		}
		return err
	}
}

func (s *server) waitFor(what string, timeout time.Duration, f func() error) (time.Duration, error) {
	deadline := time.Now().Add(timeout) // wall clock: the benchmark times a real server
	for {
		err := f()
		if err == nil {
			return time.Since(s.started), nil
		}
		if e := s.exited(); e != nil {
			return 0, fmt.Errorf("%s: %w", what, e)
		}
		if time.Now().After(deadline) { // wall clock: the benchmark times a real server
			return 0, fmt.Errorf("%s: not within %v: %w", what, timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rss is the server's resident memory (VmRSS), bytes.
func (s *server) rss() (int64, error) {
	pid := s.pid()
	if pid == 0 {
		return 0, errors.New("not started")
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// httpClient has no overall timeout: a stale=false query over millions of
// documents may take many minutes; callers bound with contexts.
var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// call sends a request to the HTTP port and decodes a JSON answer into out
// (nil: the body is read and dropped; a *[]byte: the body as it is). A status other than 2xx is an error.
func (s *server) call(ctx context.Context, method, path, ctype string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+s.http+path, body)
	if err != nil {
		return err
	}
	req.SetBasicAuth(adminUser, adminPassword)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %.300s", method, path, resp.Status, data)
	}
	switch out := out.(type) {
	case nil:
		return nil
	case *[]byte:
		*out = data
		return nil
	default:
		return json.Unmarshal(data, out)
	}
}

// createBucket makes a couchbase bucket over REST.
func (s *server) createBucket(ctx context.Context, name string, quotaMB int) error {
	f := url.Values{"name": {name}, "bucketType": {"couchbase"}, "ramQuotaMB": {strconv.Itoa(quotaMB)}, "evictionPolicy": {"valueOnly"}}
	return s.call(ctx, http.MethodPost, "/pools/default/buckets", "application/x-www-form-urlencoded", strings.NewReader(f.Encode()), nil)
}

// putDesignDoc stores a design document.
func (s *server) putDesignDoc(ctx context.Context, bucket, ddoc, body string) error {
	return s.call(ctx, http.MethodPut, "/"+bucket+"/_design/"+ddoc, "application/json", strings.NewReader(body), nil)
}

// viewAnswer is the part of a view query's answer the harness reads.
type viewAnswer struct {
	TotalRows int `json:"total_rows"`
	Rows      []struct {
		Key   json.RawMessage `json:"key"`
		Value json.RawMessage `json:"value"`
	} `json:"rows"`
}

// query runs a view query with the given query string.
func (s *server) query(ctx context.Context, bucket, ddoc, view, params string) (*viewAnswer, error) {
	var a viewAnswer
	err := s.call(ctx, http.MethodGet, "/"+bucket+"/_design/"+ddoc+"/_view/"+view+"?"+params, "", nil, &a)
	return &a, err
}

// nodeStatus is nodes[0].status of GET /pools/default/buckets/{b}
// ("warmup" until the bucket's warm-up is done, then "healthy").
func (s *server) nodeStatus(ctx context.Context, bucket string) (string, error) {
	var b struct {
		Nodes []struct {
			Status string `json:"status"`
		} `json:"nodes"`
	}
	if err := s.call(ctx, http.MethodGet, "/pools/default/buckets/"+bucket, "", nil, &b); err != nil {
		return "", err
	}
	if len(b.Nodes) == 0 {
		return "", errors.New("no nodes")
	}
	return b.Nodes[0].Status, nil
}

// goMemStats reads the Go runtime's memory gauges and the stores' own
// memory (mayfly_storage_mem_used_bytes, summed over the buckets) from
// /metrics: name → bytes.
func (s *server) goMemStats(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	err := s.metrics(ctx, func(name, _ string, v float64) {
		if strings.HasPrefix(name, "go_memstats_") || strings.HasPrefix(name, "process_resident") || strings.HasPrefix(name, "go_gc_gogc") || strings.HasPrefix(name, "go_gc_gomemlimit") || strings.HasPrefix(name, "mayfly_storage_mem_used_bytes") {
			out[name] += v // a bucket's gauge: summed over the buckets
		}
	})
	return out, err
}

// viewLatency reads the server's histogram of view-query answer times
// (mayfly_http_request_duration_seconds of GETs of a view, measured from
// the handler's start to its return): upper bound in seconds → count of
// answers that took no longer; and, under -1, the garbage collections the
// server has run.
func (s *server) viewLatency(ctx context.Context) (map[float64]float64, error) {
	out := map[float64]float64{}
	err := s.metrics(ctx, func(name, labels string, v float64) {
		if name == "go_gc_duration_seconds_count" {
			out[-1] = v
			return
		}
		if name != "mayfly_http_request_duration_seconds_bucket" || !strings.Contains(labels, `method="GET"`) || !strings.Contains(labels, `route="/{bucket}/_design/{ddoc}/_view/{view}"`) {
			return
		}
		_, le, ok := strings.Cut(labels, `le="`)
		le, _, _ = strings.Cut(le, `"`)
		if bound, err := strconv.ParseFloat(le, 64); ok && err == nil {
			out[bound] = v
		}
	})
	return out, err
}

// metrics calls fn with each sample of the server's /metrics: the metric's
// name, its labels ("" or `{a="x",...}`) and its value.
func (s *server) metrics(ctx context.Context, fn func(name, labels string, v float64)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.http+"/metrics", nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(adminUser, adminPassword)
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name, labels, _ := strings.Cut(line[:i], "{")
		if labels != "" {
			labels = "{" + labels
		}
		fn(name, labels, v)
	}
	return sc.Err()
}

// dirSize sums the sizes of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
