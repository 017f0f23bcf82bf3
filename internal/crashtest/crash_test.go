package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// config is what the environment asks of TestCrash.
type config struct {
	soak  time.Duration // >0: run rounds until it has passed
	kills int           // otherwise: this many kills
	keys  int
	seed  uint64
	keep  bool
	// level is the bucket's durabilityMinLevel (MAYFLY_CRASH_LEVEL): at
	// persistToMajority (the default) and majorityAndPersistActive no
	// acknowledged write may be lost; at none and majority a kill may take
	// back the writes acknowledged after the last commit the harness saw
	// complete had started (workload.lossSince), and no others.
	level string
	// flush is the server's --flush-interval (MAYFLY_CRASH_FLUSH_INTERVAL).
	flush time.Duration
	// viewCacheMB is the server's --view-cache-mb (MAYFLY_CRASH_VIEW_CACHE_MB):
	// -1, when unset, leaves serve's default (paged); 0 keeps view indexes in
	// memory; N > 0 pages them through N MiB.
	viewCacheMB int
	// eviction is the bucket's evictionPolicy (MAYFLY_CRASH_EVICTION):
	// "" keeps serve's default bucket (valueOnly); fullEviction starts
	// serve without it and creates the bucket with that policy, so whole
	// items leave memory and come back from disk through every kill.
	eviction string
}

// defaultFlushInterval is mayfly serve's default --flush-interval.
const defaultFlushInterval = 2 * time.Millisecond

// persists reports whether writes at the level are acknowledged only once
// on disk.
func (c config) persists() bool {
	return c.level == "persistToMajority" || c.level == "majorityAndPersistActive"
}

func configFromEnv(t *testing.T) config {
	c := config{kills: 5, keys: 2000, seed: uint64(time.Now().UnixNano()), viewCacheMB: -1}
	if v := os.Getenv("MAYFLY_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("MAYFLY_SOAK=%q: want a positive duration such as 10m", v)
		}
		c.soak, c.keys = d, 4000
	}
	if v := os.Getenv("MAYFLY_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("MAYFLY_CRASH_KILLS=%q: want a positive integer", v)
		}
		c.kills = n
	}
	if v := os.Getenv("MAYFLY_CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("MAYFLY_CRASH_SEED=%q: want an unsigned integer", v)
		}
		c.seed = n
	}
	c.keep = os.Getenv("MAYFLY_CRASH_KEEP") != ""
	c.level = "persistToMajority"
	if v := os.Getenv("MAYFLY_CRASH_LEVEL"); v != "" {
		switch v {
		case "none", "majority", "majorityAndPersistActive", "persistToMajority":
			c.level = v
		default:
			t.Fatalf("MAYFLY_CRASH_LEVEL=%q: want none, majority, majorityAndPersistActive or persistToMajority", v)
		}
	}
	c.flush = defaultFlushInterval
	if v := os.Getenv("MAYFLY_CRASH_FLUSH_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("MAYFLY_CRASH_FLUSH_INTERVAL=%q: want a positive duration such as 5ms", v)
		}
		c.flush = d
	}
	if v := os.Getenv("MAYFLY_CRASH_VIEW_CACHE_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("MAYFLY_CRASH_VIEW_CACHE_MB=%q: want a non-negative integer", v)
		}
		c.viewCacheMB = n
	}
	switch v := os.Getenv("MAYFLY_CRASH_EVICTION"); v {
	case "", "valueOnly":
	case "fullEviction":
		c.eviction = v
	default:
		t.Fatalf("MAYFLY_CRASH_EVICTION=%q: want valueOnly or fullEviction", v)
	}
	return c
}

// totals are the run's counts.
type totals struct {
	kills, checked, lost, mismatches, hangs, readErrors int
	allowedLost, allowedKeys                            int           // lost within the level's window
	maxWindow                                           time.Duration // the widest loss window of a round
	acked, ops, inflight, errorsBeforeKill, anomalies   int64
	pagerRuns, ddocPuts, rounds, queries                int64
	details                                             []string
}

func (tt *totals) detail(t *testing.T, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	t.Log(s)
	if len(tt.details) < 12 {
		tt.details = append(tt.details, s)
	}
}

// TestCrash kills `mayfly serve` with SIGKILL at random moments under a
// concurrent write load and checks, after each restart, that every
// acknowledged write survived and that stale=false views agree with the
// documents. See the package documentation.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills the server repeatedly; skipped with -short")
	}
	cfg := configFromEnv(t)
	t.Logf("seed %d (MAYFLY_CRASH_SEED=%d repeats the choices); durability %s, flush interval %v", cfg.seed, cfg.seed, cfg.level, cfg.flush)
	rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x9e3779b97f4a7c15))

	tmp := t.TempDir()
	if cfg.keep {
		var err error
		if tmp, err = os.MkdirTemp("", "mayfly-crash-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("MAYFLY_CRASH_KEEP: data and log kept in %s", tmp)
	}
	bin := buildServer(t)
	dataDir := filepath.Join(tmp, "data")
	logPath := filepath.Join(tmp, "server.log")

	var srv *server
	t.Cleanup(func() { srv.kill() }) // no orphan, whatever happens

	m := newModel(cfg.keys)
	var seq, ddocVer atomic.Int64
	var tot totals
	start := time.Now()
	ctx := context.Background()
	forceReplace := true // the first round puts the design document
	// Each hang costs queryTimeout: after maxHangProbes of them, stop
	// probing for more (one is enough to fail the short run).
	maxHangProbes := 1
	if cfg.soak > 0 {
		maxHangProbes = 3
	}

	restart := func() {
		var err error
		args := []string{"--flush-interval", cfg.flush.String()}
		if cfg.viewCacheMB >= 0 {
			args = append(args, "--view-cache-mb", strconv.Itoa(cfg.viewCacheMB))
		}
		if cfg.eviction != "" {
			args = append(args, "--default-bucket", "")
		}
		if srv, err = startServer(bin, dataDir, logPath, args...); err != nil {
			t.Fatalf("%v\n%s", err, logTail(logPath))
		}
	}
	restart()
	if cfg.eviction != "" {
		// The policy is set when the bucket is created (and kept through
		// every kill, as the bucket's other settings are).
		form := "name=" + bucket + "&bucketType=couchbase&ramQuota=" + strconv.Itoa(crashQuotaMB) + "&evictionPolicy=" + cfg.eviction
		if st, body, _, err := srv.do(ctx, http.MethodPost, "/pools/default/buckets?"+form, nil, queryTimeout); err != nil || st/100 != 2 {
			t.Fatalf("creating bucket %s with evictionPolicy=%s: status %d %s err %v\n%s", bucket, cfg.eviction, st, body, err, logTail(logPath))
		}
	}
	// The level is the bucket's setting, stored with it through every kill.
	if st, body, _, err := srv.do(ctx, http.MethodPost, "/pools/default/buckets/"+bucket+"?durabilityMinLevel="+cfg.level, nil, queryTimeout); err != nil || st != http.StatusOK {
		t.Fatalf("setting durabilityMinLevel=%s: status %d %s err %v", cfg.level, st, body, err)
	}
	// The full-text index lives through every kill; it is checked like the
	// views after each restart.
	if err := putSearchIndex(ctx, srv); err != nil {
		t.Fatalf("creating the search index: %v\n%s", err, logTail(logPath))
	}
	// A tiny quota keeps value eviction active throughout: acknowledged
	// writes, views and search are checked over ejected values read back
	// from disk.
	if st, body, _, err := srv.do(ctx, http.MethodPost, "/pools/default/buckets/"+bucket, []byte(`{"ramQuota":`+strconv.Itoa(crashQuotaMB)+`}`), queryTimeout); err != nil || st != http.StatusOK {
		t.Fatalf("setting ramQuota=%d: status %d %s err %v\n%s", crashQuotaMB, st, body, err, logTail(logPath))
	}
	// pagerStime is the round's exp_pager_stime; setPager sets it on the server.
	pagerStime := 3600
	setPager := func(round, stime int) {
		st, body, _, err := srv.do(ctx, http.MethodPost, "/pools/default/buckets/"+bucket+"/settings/expiryPager?exp_pager_stime="+strconv.Itoa(stime), nil, queryTimeout)
		if err != nil || st != http.StatusOK {
			tot.detail(t, "round %d: setting exp_pager_stime=%d: status %d %s err %v", round, stime, st, body, err)
		}
	}
	for round := 0; ; round++ {
		tot.rounds++
		// Setup: the design document, the pager's interval.
		if forceReplace || rng.Float64() < 0.15 {
			v := int(ddocVer.Add(1))
			st, body, _, err := srv.do(ctx, http.MethodPut, "/"+bucket+"/_design/"+ddocName, ddocBody(v), queryTimeout)
			switch {
			case isTimeout(err):
				tot.hangs++
				tot.detail(t, "round %d: HANG: design document PUT (version %d) did not answer in %v", round, v, queryTimeout)
			case err != nil || st/100 != 2:
				t.Fatalf("round %d: design document PUT: status %d %s err %v\n%s", round, st, body, err, logTail(logPath))
			default:
				forceReplace = false
				tot.ddocPuts++
			}
		}
		if rng.Float64() < 0.3 {
			pagerStime = []int{0, 1, 2, 3600}[rng.IntN(4)]
		}
		setPager(round, pagerStime)

		// The round: writers, side traffic, then SIGKILL.
		burst := rng.Float64() < 0.2
		w := &workload{
			srv: srv, m: m, nkeys: cfg.keys, writers: 8 + rng.IntN(9),
			round: round, seq: &seq, stats: &roundStats{}, pager: rng.Float64() < 0.5,
			ddocVer: &ddocVer, queries: rng.Float64() < 0.5, pollCommits: !cfg.persists(),
		}
		killAfter := time.Duration(float64(2*time.Second) * rng.Float64() * rng.Float64())
		killAfter = max(killAfter, time.Duration(2+rng.IntN(20))*time.Millisecond)
		if burst {
			w.writers = lanes
			killAfter = time.Duration(1+rng.IntN(3000)) * time.Millisecond
		}
		if rng.Float64() < 0.25 {
			w.replaceAt = time.Duration(1 + rng.Int64N(int64(killAfter)))
			// Half the replacements are probes: the kill waits for the
			// replacement and a concurrent stale=false query to answer.
			w.probe = rng.Float64() < 0.5 && tot.hangs < maxHangProbes
			w.queries = w.queries || w.probe
		}
		roundStart := time.Now()
		w.run(rng, killAfter)
		tot.kills++
		st := w.stats
		tot.ops += st.ops.Load()
		tot.acked += st.acked.Load()
		tot.inflight += st.inflightAtKill.Load()
		tot.errorsBeforeKill += st.errorsBeforeKill.Load()
		tot.anomalies += st.liveAnomalies.Load()
		tot.pagerRuns += st.pagerRuns.Load()
		tot.ddocPuts += st.ddocPuts.Load()
		tot.queries += st.queries.Load()
		for _, h := range st.hangs {
			tot.hangs++
			tot.detail(t, "round %d: HANG: %s", round, h)
		}
		for _, n := range st.notes {
			tot.detail(t, "round %d: %s", round, n)
		}
		if st.liveAnomalies.Load() > 0 {
			tot.lost += int(st.liveAnomalies.Load())
		}
		t.Logf("round %d: %d writers%s%s, killed after %v: %d ops, %d acknowledged, %d in flight at the kill, %d pager runs, %d stale=false queries, %d design document replacements",
			round, w.writers, map[bool]string{true: " (burst)"}[burst], map[bool]string{true: " (replacement probe)"}[w.probe],
			time.Since(roundStart).Round(time.Millisecond),
			st.ops.Load(), st.acked.Load(), st.inflightAtKill.Load(), st.pagerRuns.Load(), st.queries.Load(), st.ddocPuts.Load())

		// Restart and check. The pager is stopped while checking, after one
		// run that purges what expired while the server was down: a purge
		// between two of the check's queries would make them disagree.
		t0 := time.Now()
		restart()
		up := time.Since(t0)
		setPager(round, 0)
		if st, body, _, err := srv.do(ctx, http.MethodPost, "/pools/default/buckets/"+bucket+"/controller/runExpiryPager", nil, queryTimeout); err != nil || st != http.StatusOK {
			tot.detail(t, "round %d: runExpiryPager before the check: status %d %s err %v", round, st, body, err)
		}
		var lossSince time.Time
		if !cfg.persists() {
			lossSince = w.lossSince(roundStart)
			tot.maxWindow = max(tot.maxWindow, w.killedAt.Sub(lossSince))
		}
		res := checkDocs(ctx, srv, m, cfg.keys, lossSince)
		tot.allowedLost += res.allowedLost
		tot.allowedKeys += res.allowedKeys
		checkViews(ctx, srv, m, res)
		checkSearch(ctx, srv, m, res)
		tot.checked += res.checked
		tot.lost += len(res.lost)
		tot.mismatches += len(res.mismatches)
		tot.hangs += len(res.hang)
		tot.readErrors += len(res.readErrors)
		t.Logf("round %d: restarted in %v; checked %d acknowledged keys, %d view rows and search hits expected exactly; lost %d, view and search mismatches %d, hangs %d, read errors %d; lost within the %s window %d (%d keys); %s",
			round, up.Round(time.Millisecond), res.checked, res.expectedRow, len(res.lost), len(res.mismatches), len(res.hang), len(res.readErrors), cfg.level, res.allowedLost, res.allowedKeys, memoryStats(ctx, srv))
		for i, l := range res.lost {
			if i == 5 {
				tot.detail(t, "round %d: ... and %d more lost", round, len(res.lost)-5)
				break
			}
			tot.detail(t, "round %d: LOST %s", round, l)
		}
		for _, mm := range res.mismatches {
			tot.detail(t, "round %d: VIEW OR SEARCH MISMATCH %s", round, mm)
		}
		for _, h := range res.hang {
			tot.detail(t, "round %d: HANG %s", round, h)
		}
		for i, e := range res.readErrors {
			if i == 3 {
				break
			}
			tot.detail(t, "round %d: READ ERROR %s", round, e)
		}
		if len(res.mismatches) > 0 || len(res.hang) > 0 {
			forceReplace = true // rebuild, so later rounds start from a correct index
		}
		if len(res.hang) > 0 || len(res.readErrors) > 0 {
			// The server may be stuck: dump its stacks, start a fresh one.
			srv.dumpAndKill()
			restart()
		}

		done := cfg.soak == 0 && tot.kills >= cfg.kills || cfg.soak > 0 && time.Since(start) >= cfg.soak
		if done {
			break
		}
	}
	srv.kill()

	elapsed := time.Since(start).Round(time.Second)
	fmt.Printf("crash soak: kills=%d acknowledged_writes_checked=%d lost=%d view_mismatches=%d\n",
		tot.kills, tot.checked, tot.lost, tot.mismatches)
	fmt.Printf("crash soak: hangs=%d read_errors=%d ops=%d acknowledged_ops=%d in_flight_at_kill=%d errors_before_kill=%d pager_runs=%d stale_false_queries=%d ddoc_replacements=%d elapsed=%v seed=%d\n",
		tot.hangs, tot.readErrors, tot.ops, tot.acked, tot.inflight, tot.errorsBeforeKill, tot.pagerRuns, tot.queries, tot.ddocPuts, elapsed, cfg.seed)
	fmt.Printf("crash soak: durability=%s flush_interval=%v lost_within_window=%d keys_with_loss=%d widest_window=%v (lost counts only losses beyond it)\n",
		cfg.level, cfg.flush, tot.allowedLost, tot.allowedKeys, tot.maxWindow)
	if tot.lost > 0 || tot.mismatches > 0 || tot.hangs > 0 || tot.readErrors > 0 {
		extra := "server log (tail):\n" + logTail(logPath)
		if tot.hangs > 0 {
			extra = "goroutines of the first hung server (SIGQUIT dump) in views and index:\n" + hungStacks(logPath)
		}
		t.Errorf("after %d kills: %d lost acknowledged writes, %d view or search mismatches, %d hangs, %d read errors; first details:\n  %s\n%s",
			tot.kills, tot.lost, tot.mismatches, tot.hangs, tot.readErrors, strings.Join(tot.details, "\n  "), extra)
	}
}

// logTail returns the last lines of the server's log.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// hungStacks returns, from the first goroutine dump in the server's log, the
// goroutines in Mayfly's views and index packages.
func hungStacks(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	text := string(b)
	i := strings.Index(text, "SIGQUIT")
	if i < 0 {
		return "(no goroutine dump in " + path + ")"
	}
	text = text[i:]
	if j := strings.Index(text, "=== start"); j >= 0 {
		text = text[:j]
	}
	var out []string
	for _, g := range strings.Split(text, "\n\n") {
		if !strings.HasPrefix(g, "goroutine ") || !strings.Contains(g, "mayflydb/mayfly/views.") && !strings.Contains(g, "mayflydb/mayfly/index.") {
			continue
		}
		var keep []string // function names and file:line, without the frame addresses
		for _, line := range strings.Split(g, "\n") {
			if i := strings.Index(line, " fp=0x"); i >= 0 {
				line = line[:i]
			}
			keep = append(keep, line)
		}
		out = append(out, strings.Join(keep, "\n"))
	}
	s := strings.Join(out, "\n\n")
	if len(s) > 12000 {
		s = s[:12000] + "\n... (cut; the whole dump is in " + path + " with MAYFLY_CRASH_KEEP=1)"
	}
	return s
}

// crashQuotaMB is the bucket's ramQuota during the crash test: small enough
// that its documents' values are ejected and read back from disk.
const crashQuotaMB = 1

// memoryStats returns the bucket's memory statistics since the server
// started, for the log.
func memoryStats(ctx context.Context, srv *server) string {
	st, body, _, err := srv.do(ctx, http.MethodGet, "/pools/default/buckets/"+bucket+"/stats", nil, queryTimeout)
	if err != nil || st != http.StatusOK {
		return fmt.Sprintf("stats: status %d, %v", st, err)
	}
	var m map[string]int64
	if err := json.Unmarshal(body, &m); err != nil {
		return fmt.Sprintf("stats: %v", err)
	}
	return fmt.Sprintf("mem_used %d of %d, ep_num_value_ejects %d, ep_bg_fetched %d, vb_active_perc_mem_resident %d",
		m["mem_used"], m["ep_max_size"], m["ep_num_value_ejects"], m["ep_bg_fetched"], m["vb_active_perc_mem_resident"])
}
