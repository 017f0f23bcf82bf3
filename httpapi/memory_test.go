package httpapi_test

import (
	"encoding/json"
	"fmt"
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
	for ; n < 5000; n++ {
		if st, _, body = f.do("PUT", fmt.Sprintf("/eph/docs/k%d", n), "application/json", value); st != 200 && st != 201 {
			break
		}
	}
	if e := jsonOf(t, body); st != 503 || e["error"] != "temporary_failure" || !strings.Contains(fmt.Sprint(e["reason"]), "memory quota") {
		t.Fatalf("write %d past a 1 MiB quota: %d %s", n, st, body)
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
	if st, _, body := f.do("POST", "/pools/default/buckets/e", "application/x-www-form-urlencoded", "evictionPolicy=noEviction"); st != 200 || !strings.Contains(body, `"evictionPolicy":"noEviction"`) {
		t.Errorf("edit to noEviction: %d %s", st, body)
	}
}
