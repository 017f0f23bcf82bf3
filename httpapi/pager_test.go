package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// stats reads GET .../stats.
func (f *fixture) stats() map[string]int64 {
	f.t.Helper()
	_, _, body := f.do("GET", "/pools/default/buckets/default/stats", "", "")
	var m map[string]int64
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		f.t.Fatalf("stats: %s", body)
	}
	return m
}

// tick lets the pager do whatever is due at the fake clock's time.
func (f *fixture) tick() {
	f.t.Helper()
	if err := f.pager.Tick(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

// TestCouchbaseExpiryScenario is the scenario of Couchbase's documentation on
// how expiration impacts views: 20 players' scores, a view emitting
// doc.score with _stats, 10 of them short-lived. Until the pager runs the
// reduce still counts 20 and include_docs shows "doc": null for the 10; after
// it runs, everything is right.
func TestCouchbaseExpiryScenario(t *testing.T) {
	f := newFixture(t)
	f.do("PUT", "/default/_design/players", "application/json",
		`{"views":{"scores":{"map":"function (doc, meta) { if (doc.type === 'player') emit(meta.id, doc.score); }","reduce":"_stats"}}}`)
	for i := range 20 {
		expiry := ""
		if i%2 == 1 {
			expiry = "?expiry=30"
		}
		// Short-lived players score 1000, the others i*10.
		score := i * 10
		if i%2 == 1 {
			score = 1000
		}
		f.do("PUT", fmt.Sprintf("/default/docs/player%02d%s", i, expiry), "", fmt.Sprintf(`{"type":"player","score":%d}`, score))
	}
	// Set the pager interval to 60 s (over HTTP), then let the expiries pass.
	if st, _, body := f.do("POST", "/pools/default/buckets/default/settings/expiryPager", "application/x-www-form-urlencoded", "exp_pager_stime=60"); st != 200 {
		t.Fatalf("set exp_pager_stime: %d %s", st, body)
	}
	f.clk.Advance(31)
	f.tick() // not due yet: the pager runs at +60

	_, _, body := f.do("GET", "/default/_design/players/_view/scores?stale=false", "", "")
	// sum = 10*1000 + (0+20+...+180) = 10000 + 900
	if !strings.Contains(body, `"value":{"sum":10900,"count":20,"min":0,"max":1000,`) {
		t.Fatalf("before the pager: the reduce must still count all 20: %s", body)
	}
	_, _, body = f.do("GET", "/default/_design/players/_view/scores?stale=false&reduce=false&include_docs=true", "", "")
	if n := strings.Count(body, `"doc":null`); n != 10 {
		t.Fatalf("before the pager: %d rows with doc null, want 10: %s", n, body)
	}
	if st := f.stats(); st["curr_items"] != 20 || st["ep_expired_pager"] != 0 {
		t.Fatalf("before the pager: %v", st)
	}

	f.clk.Advance(29) // now 60 s after the settings change: the run is due
	f.tick()
	_, _, body = f.do("GET", "/default/_design/players/_view/scores?stale=false", "", "")
	if !strings.Contains(body, `"value":{"sum":900,"count":10,"min":0,"max":180,"sumsqr":`) {
		t.Fatalf("after the pager: reduce not corrected: %s", body)
	}
	_, _, body = f.do("GET", "/default/_design/players/_view/scores?stale=false&reduce=false&include_docs=true", "", "")
	if strings.Contains(body, `"doc":null`) || !strings.Contains(body, `"total_rows":10`) {
		t.Fatalf("after the pager: expired rows remain: %s", body)
	}
	st := f.stats()
	if st["ep_expired_pager"] != 10 || st["ep_num_expiry_pager_runs"] != 1 || st["curr_items"] != 10 || st["ep_expired"] != 10 {
		t.Fatalf("after the pager: %v", st)
	}
	_, _, metrics := f.do("GET", "/metrics", "", "")
	if !strings.Contains(metrics, `mayfly_expired_total{bucket="default",how="pager"} 10`) {
		t.Fatalf("metrics: %s", metrics)
	}
}

// TestLowerPagerIntervalReschedules: lowering exp_pager_stime from 3600 to
// 10 over HTTP brings the next run to within 10 s, and it is audited.
func TestLowerPagerIntervalReschedules(t *testing.T) {
	f := newFixture(t)
	f.tick() // the pager meets the bucket: next run at +3600
	_, _, body := f.do("GET", "/pools/default/buckets/default/settings/expiryPager", "", "")
	var st struct {
		Stime   int64 `json:"exp_pager_stime"`
		Hour    int   `json:"exp_pager_initial_run_time"`
		NextRun int64 `json:"next_run"`
	}
	json.Unmarshal([]byte(body), &st)
	if st.Stime != 3600 || st.Hour != -1 || st.NextRun != t0+3600 {
		t.Fatalf("defaults: %s", body)
	}
	f.do("PUT", "/default/docs/a?expiry=5", "", `1`)
	if code, _, body := f.do("POST", "/pools/default/buckets/default/settings/expiryPager", "application/json", `{"exp_pager_stime":10}`); code != 200 {
		t.Fatalf("POST: %d %s", code, body)
	}
	_, _, body = f.do("GET", "/pools/default/buckets/default/settings/expiryPager", "", "")
	json.Unmarshal([]byte(body), &st)
	if st.Stime != 10 || st.NextRun != t0+10 {
		t.Fatalf("after lowering to 10: %s", body)
	}
	f.clk.Advance(10)
	f.tick()
	if s := f.stats(); s["ep_num_expiry_pager_runs"] != 1 || s["ep_expired_pager"] != 1 {
		t.Fatalf("no run 10 s after lowering the interval: %v", s)
	}
	for _, bad := range []string{"exp_pager_stime=-1", "exp_pager_stime=ten", "exp_pager_initial_run_time=24", "exp_pager_initial_run_time=-2", ""} {
		code, _, body := f.do("POST", "/pools/default/buckets/default/settings/expiryPager", "application/x-www-form-urlencoded", bad)
		if code != 400 || jsonOf(t, body)["reason"] == "" {
			t.Fatalf("bad value %q: %d %s", bad, code, body)
		}
	}
	if s := f.stats(); s["ep_exp_pager_stime"] != 10 {
		t.Fatalf("a refused value changed the setting: %v", s)
	}
	f.do("POST", "/pools/default/buckets/default", "application/x-www-form-urlencoded", "maxTTL=99")
	logged, _ := os.ReadFile(f.audit)
	lines := strings.Split(strings.TrimSpace(string(logged)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"action":"pager.settings","bucket":"default","target":"","before":{"exp_pager_stime":3600},"after":{"exp_pager_stime":10}`) ||
		!strings.Contains(lines[1], `"action":"bucket.settings","bucket":"default","target":"","before":{"maxTTL":0},"after":{"maxTTL":99}`) || !strings.Contains(lines[1], `"remote":"127.0.0.1:`) {
		t.Fatalf("audit log:\n%s", logged)
	}
	// runExpiryPager runs it now and answers with what it purged.
	f.do("PUT", "/default/docs/b?expiry=1", "", `1`)
	f.clk.Advance(1)
	code, _, body := f.do("POST", "/pools/default/buckets/default/controller/runExpiryPager", "", "")
	if code != 200 || jsonOf(t, body)["purged"] != float64(1) {
		t.Fatalf("runExpiryPager: %d %s", code, body)
	}
}
