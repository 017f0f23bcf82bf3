package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestEphemeralQuotaOverHTTP: an ephemeral bucket with noEviction answers a
// write past its quota with 503 and a reason, keeps what it stored, and
// shows its memory in the bucket's answer and its statistics.
func TestEphemeralQuotaOverHTTP(t *testing.T) {
	f := newFixture(t)
	if st, _, body := f.do("POST", "/pools/default/buckets", "application/x-www-form-urlencoded", "name=eph&bucketType=ephemeral&ramQuota=1"); st != 202 || !strings.Contains(body, `"evictionPolicy":"noEviction"`) {
		t.Fatalf("create ephemeral bucket: %d %s", st, body)
	}
	value := `{"pad":"` + strings.Repeat("x", 500) + `"}`
	n, st, body := 0, 0, ""
	var h http.Header
	for ; n < 5000; n++ {
		if st, h, body = f.do("PUT", fmt.Sprintf("/eph/docs/k%d", n), "application/json", value); st != 200 && st != 201 {
			break
		}
	}
	if e := jsonOf(t, body); st != 503 || e["error"] != "temporary_failure" || !strings.Contains(fmt.Sprint(e["reason"]), "memory quota") {
		t.Fatalf("write %d past a 1 MiB quota: %d %s", n, st, body)
	}
	// A temporary failure, as the warm-up's 503: the client may retry.
	if h.Get("Retry-After") == "" {
		t.Errorf("write %d past a 1 MiB quota: 503 without Retry-After", n)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		if st, _, body := f.do("GET", fmt.Sprintf("/eph/docs/k%d", i), "", ""); st != 200 || !strings.Contains(body, "xxxx") {
			t.Errorf("get k%d at the quota: %d %s", i, st, body)
		}
	}
	_, _, body = f.do("GET", "/pools/default/buckets/eph/stats", "", "")
	var stats map[string]int64
	if err := json.Unmarshal([]byte(body), &stats); err != nil {
		t.Fatal(body)
	}
	if stats["curr_items"] != int64(n) || stats["mem_used"] > 1<<20 || stats["mem_used"] < stats["ep_kv_size"] ||
		stats["ep_kv_size"] < int64(n*len(value)) || stats["ep_mem_high_wat"] != 1<<20*85/100 || stats["ep_mem_low_wat"] != 1<<20*75/100 ||
		stats["ep_tmp_oom_errors"] != 1 || stats["evictions"] != 0 {
		t.Errorf("stats at the quota with %d documents: %v", n, stats)
	}
	if st, _, body := f.do("GET", "/pools/default/buckets/eph", "", ""); st != 200 || !strings.Contains(body, `"memUsed":`) {
		t.Errorf("bucket answer: %d %s", st, body)
	}
	if st, _, body := f.do("DELETE", "/eph/docs/k0", "", ""); st != 200 {
		t.Fatalf("delete at the quota: %d %s", st, body)
	}
	if st, _, body := f.do("PUT", "/eph/docs/again", "application/json", value); st != 200 && st != 201 {
		t.Errorf("write after a delete made room: %d %s", st, body)
	}
}

func TestEvictionPolicyOverHTTP(t *testing.T) {
	f := newFixture(t)
	for _, form := range []string{
		"name=m&bucketType=memcached&evictionPolicy=nruEviction",
		"name=e&bucketType=ephemeral&evictionPolicy=valueOnly",
		"name=c&bucketType=couchbase&evictionPolicy=noEviction",
	} {
		if st, _, body := f.do("POST", "/pools/default/buckets", "application/x-www-form-urlencoded", form); st != 400 || !strings.Contains(body, "evictionPolicy") {
			t.Errorf("%s: %d %s, want 400 naming evictionPolicy", form, st, body)
		}
	}
	if st, _, body := f.do("POST", "/pools/default/buckets", "application/x-www-form-urlencoded", "name=e&bucketType=ephemeral&evictionPolicy=nruEviction"); st != 202 || !strings.Contains(body, `"evictionPolicy":"nruEviction"`) {
		t.Errorf("ephemeral nruEviction: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets", "application/x-www-form-urlencoded", "name=f&bucketType=couchbase&evictionPolicy=fullEviction"); st != 202 || !strings.Contains(body, `"evictionPolicy":"fullEviction"`) {
		t.Errorf("couchbase fullEviction: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/e", "application/x-www-form-urlencoded", "evictionPolicy=noEviction"); st != 200 || !strings.Contains(body, `"evictionPolicy":"noEviction"`) {
		t.Errorf("edit to noEviction: %d %s", st, body)
	}
}

// TestCouchbaseValueEvictionOverHTTP: a couchbase bucket with a 1 MiB quota
// ejects values, and every way the HTTP API reads documents gives them back
// intact: GET, _all_docs and a view with include_docs (the view built over
// ejected documents answers as if they were resident), _changes with
// include_docs; the stats and /metrics show the ejections and the reads
// from disk.
func TestCouchbaseValueEvictionOverHTTP(t *testing.T) {
	f := newFixture(t)
	if st, _, body := f.do("POST", "/pools/default/buckets", formCT, "name=cb&bucketType=couchbase&ramQuota=1"); st != 202 || !strings.Contains(body, `"evictionPolicy":"valueOnly"`) {
		t.Fatalf("create couchbase bucket: %d %s", st, body)
	}
	const n = 500
	pad := strings.Repeat("x", 4000)
	doc := func(i int) string { return fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, pad) }
	key := func(i int) string { return fmt.Sprintf("k%03d", i) }
	for i := range n {
		if st, _, body := f.do("PUT", "/cb/docs/"+key(i), "application/json", doc(i)); st != 200 && st != 201 {
			t.Fatalf("put %d: %d %s", i, st, body)
		}
	}
	stats := func() map[string]int64 {
		t.Helper()
		_, _, body := f.do("GET", "/pools/default/buckets/cb/stats", "", "")
		var m map[string]int64
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatal(body)
		}
		return m
	}
	if s := stats(); s["ep_num_value_ejects"] == 0 || s["vb_active_perc_mem_resident"] >= 100 || s["mem_used"] > 1<<20 {
		t.Fatalf("after %d writes of 4 KB into 1 MiB: %v", n, s)
	}
	for i := range n {
		st, _, body := f.do("GET", "/cb/docs/"+key(i), "", "")
		if st != 200 || !strings.Contains(body, fmt.Sprintf(`"n":%d,`, i)) || !strings.Contains(body, pad) {
			t.Fatalf("get %s: %d %.80s", key(i), st, body)
		}
	}
	type docBody struct {
		N   int    `json:"n"`
		Pad string `json:"pad"`
	}
	// checkRows checks the rows of _all_docs (CouchDB's doc) or of a view
	// (Couchbase's doc: meta and json).
	checkRows := func(what, answer string, total int) {
		t.Helper()
		var page struct {
			Rows []struct {
				ID  string `json:"id"`
				Doc struct {
					docBody
					JSON docBody `json:"json"`
				} `json:"doc"`
			} `json:"rows"`
		}
		if err := json.Unmarshal([]byte(answer), &page); err != nil {
			t.Fatalf("%s: %v: %.200s", what, err, answer)
		}
		if len(page.Rows) != total {
			t.Fatalf("%s: %d rows, want %d", what, len(page.Rows), total)
		}
		for i, r := range page.Rows {
			got := r.Doc.docBody
			if r.Doc.JSON.Pad != "" {
				got = r.Doc.JSON
			}
			if r.ID != key(i) || got.N != i || got.Pad != pad {
				t.Fatalf("%s: row %d is %s with n %d and a pad of %d bytes", what, i, r.ID, got.N, len(got.Pad))
			}
		}
	}
	_, _, body := f.do("GET", "/cb/_all_docs?include_docs=true", "", "")
	checkRows("_all_docs", body, n)

	if st, _, body := f.do("PUT", "/cb/_design/d", "application/json", `{"views":{"v":{"map":"function (doc, meta) { emit(doc.n, null); }"}}}`); st != 201 {
		t.Fatalf("design document: %d %s", st, body)
	}
	st, _, body := f.do("GET", "/cb/_design/d/_view/v?stale=false&include_docs=true", "", "")
	if st != 200 {
		t.Fatalf("view: %d %s", st, body)
	}
	checkRows("view with include_docs", body, n)

	st, _, body = f.do("GET", "/cb/_changes?include_docs=true", "", "")
	if st != 200 {
		t.Fatalf("_changes: %d %s", st, body)
	}
	var changes struct {
		Results []struct {
			ID  string         `json:"id"`
			Doc map[string]any `json:"doc"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(body), &changes); err != nil || len(changes.Results) != n {
		t.Fatalf("_changes: %d results, %v", len(changes.Results), err)
	}
	for _, r := range changes.Results {
		var i int
		fmt.Sscanf(r.ID, "k%d", &i)
		if r.Doc["pad"] != pad || r.Doc["n"] != float64(i) {
			t.Fatalf("_changes: %s's doc has n %v and a pad of %d bytes", r.ID, r.Doc["n"], len(fmt.Sprint(r.Doc["pad"])))
		}
	}

	if s := stats(); s["ep_bg_fetched"] == 0 {
		t.Errorf("ep_bg_fetched 0 after reading ejected values: %v", s)
	}
	_, _, metrics := f.do("GET", "/metrics", "", "")
	for _, m := range []string{`mayfly_value_ejects_total{bucket="cb"}`, `mayfly_bg_fetched_total{bucket="cb"}`, `mayfly_resident_items_ratio_percent{bucket="cb"}`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics has no %s", m)
		}
	}
}

// TestMemcachedBucketHasNoScopes: a memcached bucket has no scopes and no
// collections (Couchbase's have neither); creating either is a 400 that
// says so, and the bucket's manifest keeps its default scope alone.
func TestMemcachedBucketHasNoScopes(t *testing.T) {
	f := newFixture(t)
	form := "application/x-www-form-urlencoded"
	if st, _, body := f.do("POST", "/pools/default/buckets", form, "name=mc&bucketType=memcached"); st != 202 {
		t.Fatalf("create memcached bucket: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/mc/scopes", form, "name=s"); st != 400 || !strings.Contains(body, "no scopes") {
		t.Errorf("a scope in a memcached bucket: %d %s, want 400", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/mc/scopes/_default/collections", form, "name=c"); st != 400 || !strings.Contains(body, "no scopes or collections") {
		t.Errorf("a collection in a memcached bucket: %d %s, want 400", st, body)
	}
	if st, _, body := f.do("GET", "/pools/default/buckets/mc/scopes", "", ""); st != 200 || strings.Contains(body, `"name":"s"`) {
		t.Errorf("the manifest after: %d %s", st, body)
	}
}
