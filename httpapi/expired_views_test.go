package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestViewExpiredExclude: expired=exclude on a view query, the design
// document's default options.expired and a query overriding it, the view
// forecast, and their 400s.
func TestViewExpiredExclude(t *testing.T) {
	f := newFixture(t)
	const js = "application/json"
	ddoc := func(opts string) string {
		return `{` + opts + `"views":{"sessions":{"map":"function (doc, meta) { emit(doc.user, doc.bytes); }","reduce":"_sum"}}}`
	}
	if st, _, body := f.do("PUT", "/default/_design/s", js, ddoc("")); st != 201 {
		t.Fatalf("PUT ddoc: %d %s", st, body)
	}
	for i, exp := range []int{0, 60, 60, 120, 3600} {
		path := fmt.Sprintf("/default/docs/u%d", i)
		if exp > 0 {
			path += fmt.Sprintf("?expiry=%d", exp)
		}
		if st, _, body := f.do("PUT", path, js, fmt.Sprintf(`{"user":"u%d","bytes":%d}`, i, 10*(i+1))); st != 201 {
			t.Fatalf("PUT %s: %d %s", path, st, body)
		}
	}
	f.clk.Advance(60) // u1 and u2 expire
	view := "/default/_design/s/_view/sessions?stale=false"
	get := func(params string) (int, string) {
		t.Helper()
		st, _, body := f.do("GET", view+params, "", "")
		return st, strings.NewReplacer("\r\n", "", "\n", "").Replace(body)
	}
	for _, tc := range []struct{ params, want string }{
		{"", `{"rows":[{"key":null,"value":150}]}`},                 // Couchbase: expired rows count until purged
		{"&expired=include", `{"rows":[{"key":null,"value":150}]}`}, // the same, said
		{"&expired=exclude", `{"rows":[{"key":null,"value":100}]}`}, // u0 + u3 + u4
		{"&expired=exclude&reduce=false&limit=1", `{"total_rows":3,"rows":[{"id":"u0","key":"u0","value":10}]}`},
		{"&expired=exclude&group=true&keys=[\"u1\",\"u3\"]", `{"rows":[{"key":"u3","value":40}]}`},
	} {
		if st, body := get(tc.params); st != 200 || body != tc.want {
			t.Errorf("%s: %d %s, want %s", tc.params, st, body, tc.want)
		}
	}
	// The design document's default, overridden by a query.
	if st, _, body := f.do("PUT", "/default/_design/s", js, ddoc(`"options":{"expired":"exclude"},`)); st != 201 {
		t.Fatalf("PUT ddoc with options: %d %s", st, body)
	}
	if st, body := get(""); st != 200 || body != `{"rows":[{"key":null,"value":100}]}` {
		t.Errorf("ddoc default exclude: %d %s", st, body)
	}
	if st, body := get("&expired=include"); st != 200 || body != `{"rows":[{"key":null,"value":150}]}` {
		t.Errorf("query include over the ddoc default: %d %s", st, body)
	}
	// Forecast: per 60 s over 3 minutes, and the expired rows not purged.
	st, body := get("&forecast=60&horizon=180")
	var fc struct {
		Now       int64 `json:"now"`
		Intervals []struct {
			Start, End int64
			Rows       int64
			Value      json.RawMessage
		} `json:"intervals"`
		ExpiredUnpurged struct {
			Rows  int64
			Value json.RawMessage
		} `json:"expired_unpurged"`
	}
	if err := json.Unmarshal([]byte(body), &fc); st != 200 || err != nil {
		t.Fatalf("forecast: %d %s (%v)", st, body, err)
	}
	if fc.Now != t0+60 || len(fc.Intervals) != 3 || fc.Intervals[0].Rows != 1 || string(fc.Intervals[0].Value) != "40" ||
		fc.Intervals[1].Rows != 0 || string(fc.Intervals[1].Value) != "null" || fc.Intervals[2].End != t0+240 ||
		fc.ExpiredUnpurged.Rows != 2 || string(fc.ExpiredUnpurged.Value) != "50" {
		t.Errorf("forecast: %s", body)
	}
	// Forecast of a key range, without reduce values.
	if st, body := get(`&forecast=3600&horizon=3600&startkey="u3"&reduce=false`); st != 200 ||
		body != fmt.Sprintf(`{"now":%d,"intervals":[{"start":%d,"end":%d,"rows":2}],"expired_unpurged":{"rows":0}}`, t0+60, t0+60, t0+3660) {
		t.Errorf("forecast of a range: %d %s", st, body)
	}
	// The pager purges: exact answers do not move, and include ones catch up.
	if st, _, body := f.do("POST", "/pools/default/buckets/default/settings/expiryPager", formCT, "exp_pager_stime=60"); st != 200 {
		t.Fatalf("set exp_pager_stime: %d %s", st, body)
	}
	f.clk.Advance(60) // u3 expires too: u0 + u4 live
	if st, body := get(""); st != 200 || body != `{"rows":[{"key":null,"value":60}]}` {
		t.Errorf("before the pager: %d %s", st, body)
	}
	if err := f.pager.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st, body := get(""); st != 200 || body != `{"rows":[{"key":null,"value":60}]}` {
		t.Errorf("after the pager: %d %s", st, body)
	}
	if st, body := get("&expired=include"); st != 200 || body != `{"rows":[{"key":null,"value":60}]}` {
		t.Errorf("include after the pager: %d %s", st, body)
	}
	for _, bad := range []string{"&expired=no", "&expired=", "&forecast=0", "&forecast=-5", "&forecast=x", "&horizon=60",
		"&forecast=60&horizon=0", "&forecast=1&horizon=86400", "&forecast=60&include_docs=true", "&forecast=60&limit=1"} {
		if st, body := get(bad); st != 400 || !strings.Contains(body, `"error":"bad_request"`) {
			t.Errorf("%s: %d %s, want a 400", bad, st, body)
		}
	}
	for _, bad := range []string{`"options":{"expired":"sometimes"},`, `"options":{"expired":true},`} {
		if st, _, body := f.do("PUT", "/default/_design/s", js, ddoc(bad)); st != 400 || !strings.Contains(body, "options.expired") {
			t.Errorf("PUT ddoc with %s: %d %s, want a 400", bad, st, body)
		}
	}
}

// TestViewExpiredExcludeSliding: sessions that live while they are read
// (idleTTL) and an exact count of live sessions that matches the documents
// a client can read, at every step, before any purge.
func TestViewExpiredExcludeSliding(t *testing.T) {
	f := newFixture(t)
	if st, _, body := f.do("PATCH", "/pools/default/buckets/default/scopes/_default/collections/_default", formCT, "idleTTL=100"); st != 200 {
		t.Skipf("idleTTL on the default collection: %d %s", st, body)
	}
	if st, _, body := f.do("PUT", "/default/_design/s", "application/json",
		`{"options":{"expired":"exclude"},"views":{"live":{"map":"function (doc, meta) { emit(null, 1); }","reduce":"_count"}}}`); st != 201 {
		t.Fatalf("PUT ddoc: %d %s", st, body)
	}
	for i := range 6 {
		f.do("PUT", fmt.Sprintf("/default/docs/s%d", i), "application/json", `{"user":1}`)
	}
	b := f.mustBucket("default")
	// (Reading s2…s5 to check would extend them: the expected count is
	// worked out instead.)
	for step := range 5 {
		f.clk.Advance(40)
		// Sessions s0 and s1 are used at every step; the others never again.
		for _, id := range []string{"s0", "s1"} {
			if st, _, _ := f.do("GET", "/default/docs/"+id, "", ""); st != 200 {
				t.Fatalf("step %d: read %s: %d", step, id, st)
			}
		}
		b.Sync(context.Background())
		_, _, body := f.do("GET", "/default/_design/s/_view/live?stale=false", "", "")
		want := 6
		if step >= 2 { // 120 s after the last write of s2…s5, over idleTTL
			want = 2
		}
		if !strings.Contains(body, fmt.Sprintf(`"value":%d}`, want)) {
			t.Errorf("step %d: live sessions %s, want %d", step, body, want)
		}
	}
}
