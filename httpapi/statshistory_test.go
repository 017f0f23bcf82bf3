package httpapi_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/logtest"
)

// statsHistory is GET .../stats/history's answer.
type statsHistory struct {
	Op struct {
		Samples      map[string][]int64 `json:"samples"`
		SamplesCount int                `json:"samplesCount"`
		LastTStamp   int64              `json:"lastTStamp"`
		Interval     int64              `json:"interval"`
		Now          int64              `json:"now"`
	} `json:"op"`
}

func (f *fixture) statsHistory(bucket string) statsHistory {
	f.t.Helper()
	st, _, body := f.do("GET", "/pools/default/buckets/"+bucket+"/stats/history", "", "")
	if st != 200 {
		f.t.Fatalf("stats/history of %s: %d %s", bucket, st, body)
	}
	var h statsHistory
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		f.t.Fatalf("stats/history: %v: %s", err, body)
	}
	return h
}

// A StatsHistory keeps the last samples of each bucket's statistics, at
// most its limit, in Couchbase's shape (one array per statistic, plus the
// timestamps), and forgets a deleted bucket's.
func TestStatsHistory(t *testing.T) {
	hist := httpapi.NewStatsHistory(3, 0)
	f := newOptionsFixture(t, nil, func(o *httpapi.Options) { o.StatsHistory = hist })
	if h := f.statsHistory("default"); h.Op.SamplesCount != 0 || len(h.Op.Samples["curr_items"]) != 0 || h.Op.Interval != 3000 {
		t.Fatalf("before any sample: %+v", h)
	}
	for i := range 5 {
		if st, _, body := f.do("PUT", "/default/docs/d"+strconv.Itoa(i), "application/json", `{}`); st >= 300 {
			t.Fatalf("PUT: %d %s", st, body)
		}
		hist.Sample()
	}
	h := f.statsHistory("default")
	if got := h.Op.Samples["curr_items"]; h.Op.SamplesCount != 3 || len(got) != 3 || got[0] != 3 || got[1] != 4 || got[2] != 5 {
		t.Fatalf("the last 3 samples of curr_items, want [3 4 5]: %+v", h)
	}
	ts := h.Op.Samples["timestamp"]
	if len(ts) != 3 || ts[0] > ts[1] || ts[1] > ts[2] || h.Op.LastTStamp != ts[2] || h.Op.Now < ts[2] {
		t.Fatalf("timestamps %v, last %d, now %d", ts, h.Op.LastTStamp, h.Op.Now)
	}
	for _, name := range []string{"ep_expired", "ep_items_with_expiry", "ep_expired_unpurged", "ep_tombstones", "ep_queue_size",
		"mem_used", "vb_active_perc_mem_resident", "ep_num_value_ejects", "ep_bg_fetched"} {
		if len(h.Op.Samples[name]) != 3 {
			t.Errorf("%s: %v, want 3 samples", name, h.Op.Samples[name])
		}
	}
	// The memory charts' series: each document written adds to mem_used,
	// and every value is resident.
	if m := h.Op.Samples["mem_used"]; len(m) == 3 && !(m[0] > 0 && m[0] < m[1] && m[1] < m[2]) {
		t.Errorf("mem_used over three writes: %v, want it rising", m)
	}
	if r := h.Op.Samples["vb_active_perc_mem_resident"]; len(r) == 3 && r[2] != 100 {
		t.Errorf("vb_active_perc_mem_resident: %v, want 100 with nothing ejected", r)
	}
	if st, _, _ := f.doAs("", "", "GET", "/pools/default/buckets/default/stats/history", "", ""); st != 401 {
		t.Fatalf("without credentials: %d", st)
	}
	// Deleted and created again: the new bucket starts with no samples.
	if st, _, body := f.do("DELETE", "/pools/default/buckets/default", "", ""); st != 200 {
		t.Fatalf("DELETE bucket: %d %s", st, body)
	}
	hist.Sample()
	if st, _, body := f.do("POST", "/pools/default/buckets", "application/x-www-form-urlencoded", "name=default"); st != 202 {
		t.Fatalf("create bucket: %d %s", st, body)
	}
	if h := f.statsHistory("default"); h.Op.SamplesCount != 0 {
		t.Fatalf("a new bucket under a deleted one's name shows its samples: %+v", h)
	}
	hist.Sample()
	if h := f.statsHistory("default"); h.Op.SamplesCount != 1 || h.Op.Samples["curr_items"][0] != 0 {
		t.Fatalf("the new bucket's first sample: %+v", h)
	}

	// Without a StatsHistory the answer has no samples.
	g := newOptionsFixture(t, nil, nil)
	if h := g.statsHistory("default"); h.Op.SamplesCount != 0 || h.Op.Samples["curr_items"] == nil {
		t.Fatalf("without a StatsHistory: %+v", h)
	}
}

// /favicon.ico, which browsers ask for on every page, is answered without
// credentials and without a log line.
func TestFavicon(t *testing.T) {
	var logs logtest.Buffer
	f := newOptionsFixture(t, nil, func(o *httpapi.Options) { o.Logger = logs.Logger() })
	st, _, body := f.doAs("", "", "GET", "/favicon.ico", "", "")
	if st != 204 || body != "" {
		t.Fatalf("GET /favicon.ico: %d %q", st, body)
	}
	if l := logs.String(); l != "" {
		t.Errorf("GET /favicon.ico logged %s", l)
	}
	// The API around it still authenticates, and says so in the log.
	if st, _, _ := f.doAs("", "", "GET", "/pools/default/buckets", "", ""); st != 401 {
		t.Fatalf("without credentials: %d", st)
	}
	if !strings.Contains(logs.String(), "authentication failed") {
		t.Errorf("a refused request is not logged: %q", logs.String())
	}
}

// GET /whoami says who the caller is, in Couchbase's shape; POST
// /pools/default/checkPermissions says which permissions the caller holds.
// Both answer any authenticated user about themself.
func TestWhoamiAndCheckPermissions(t *testing.T) {
	f := newFixture(t)
	if st, _, body := f.do("PUT", "/settings/rbac/users/local/ann", "application/x-www-form-urlencoded", "password=ann-password&name=Ann+Lee&roles=data_reader[default],views_admin[*]"); st != 200 {
		t.Fatalf("creating ann: %d %s", st, body)
	}
	st, _, body := f.doAs("ann", "ann-password", "GET", "/whoami", "", "")
	if st != 200 || body != `{"id":"ann","domain":"local","name":"Ann Lee","roles":[{"role":"data_reader","bucket_name":"default"},{"role":"views_admin","bucket_name":"*"}]}`+"\n" {
		t.Fatalf("whoami as ann: %d %s", st, body)
	}
	if st, _, body := f.do("GET", "/whoami", "", ""); st != 200 || !strings.Contains(body, `"domain":"admin"`) || !strings.Contains(body, `{"role":"admin"}`) {
		t.Fatalf("whoami as the administrator: %d %s", st, body)
	}
	if st, _, _ := f.doAs("", "", "GET", "/whoami", "", ""); st != 401 {
		t.Fatalf("whoami without credentials: %d", st)
	}

	perms := "cluster.bucket[default].data.docs!read, cluster.bucket[default].data.docs!write,cluster.buckets!create,cluster.bucket[other].views!write,cluster.bucket[default].settings!write"
	st, _, body = f.doAs("ann", "ann-password", "POST", "/pools/default/checkPermissions", "text/plain", perms)
	var got map[string]bool
	if st != 200 || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("checkPermissions as ann: %d %s", st, body)
	}
	want := map[string]bool{
		"cluster.bucket[default].data.docs!read": true, "cluster.bucket[default].data.docs!write": false,
		"cluster.buckets!create": false, "cluster.bucket[other].views!write": true, "cluster.bucket[default].settings!write": false,
	}
	if len(got) != len(want) {
		t.Errorf("checkPermissions as ann: %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("checkPermissions as ann: %s = %v, want %v", k, got[k], v)
		}
	}
	st, _, body = f.do("POST", "/pools/default/checkPermissions", "text/plain", "cluster.buckets!create,cluster.bucket[default].data.docs!eat")
	if st != 400 || !strings.Contains(body, "cluster.bucket[default].data.docs!eat") {
		t.Fatalf("a malformed permission: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/checkPermissions", "text/plain", "cluster.buckets!create"); st != 200 || body != `{"cluster.buckets!create":true}`+"\n" {
		t.Fatalf("checkPermissions as the administrator: %d %s", st, body)
	}
}
