package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/search"
	"github.com/mayflydb/mayfly/views"
)

// goPrefix matches a Go package prefix at the start of a reason or of any
// part of a chain of wrapped errors ("create bucket b: engine: ...").
var goPrefix = regexp.MustCompile(`(^|: )(engine|jsruntime|views|index|search|pager|auth|httpapi|memcache|audit|bleve|bolt|json): `)

// Error reasons shown to clients do not leak Go package prefixes, on any
// error path: bad JSON, bad design documents, JavaScript that throws, bad
// parameters, missing buckets and documents, oversize values, conflicts,
// bad settings, bad search definitions and bulk lines.
func TestReasonsHaveNoPackagePrefix(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default")); err != nil {
		t.Fatal(err)
	}
	mc := engine.DefaultBucketSettings("cache")
	mc.Type = engine.Memcached
	if _, err := eng.CreateBucket(ctx, mc); err != nil {
		t.Fatal(err)
	}
	vs, err := views.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer vs.Close()
	ss, err := search.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Views: vs, Search: ss, Auth: users}))
	defer srv.Close()
	f := &fixture{t: t, srv: srv}
	do := func(method, path, contentType, body string) (int, string) {
		t.Helper()
		code, _, b := f.do(method, path, contentType, body)
		return code, b
	}
	const form = "application/x-www-form-urlencoded"
	// Setup: documents, a design document whose reduce throws, one whose
	// built-in reduce meets a non-number.
	for _, s := range []struct{ method, path, ct, body string }{
		{"PUT", "/default/docs/a", "application/json", `{"n":1}`},
		{"PUT", "/default/docs/b", "application/json", `{"s":"x"}`},
		{"PUT", "/default/_design/throws", "application/json", `{"views":{"v":{"map":"function (doc) { emit(doc.n, 1); }","reduce":"function (k, v, re) { throw new Error('boom'); }"}}}`},
		{"PUT", "/default/_design/sum", "application/json", `{"views":{"v":{"map":"function (doc) { emit(1, doc.s); }","reduce":"_sum"}}}`},
		{"PUT", "/api/index/ix", "application/json", `{"type":"fulltext-index","sourceName":"default"}`},
	} {
		if status, b := do(s.method, s.path, s.ct, s.body); status >= 300 {
			t.Fatalf("setup %s %s: %d %s", s.method, s.path, status, b)
		}
	}
	big := `{"pad":"` + strings.Repeat("x", engine.MaxValueLen) + `"}`
	cases := []struct {
		name, method, path, ct, body string
	}{
		{"missing document", "GET", "/default/docs/nope", "", ""},
		{"missing bucket", "GET", "/nobucket/docs/a", "", ""},
		{"missing bucket settings", "GET", "/pools/default/buckets/nobucket", "", ""},
		{"oversize value", "PUT", "/default/docs/big", "application/json", big},
		{"key too long", "PUT", "/default/docs/" + strings.Repeat("k", 300), "application/json", `{}`},
		{"cas mismatch", "PUT", "/default/docs/a?cas=1", "application/json", `{"n":2}`},
		{"delete with cas mismatch", "DELETE", "/default/docs/a?cas=1", "", ""},
		{"delete missing", "DELETE", "/default/docs/nope", "", ""},
		{"bad expiry", "PUT", "/default/docs/e?expiry=abc", "application/json", `{}`},
		{"touch missing", "POST", "/default/docs/nope/touch?expiry=10", "", ""},
		{"ddoc bad JSON", "PUT", "/default/_design/bad", "application/json", `{"views":`},
		{"ddoc map syntax error", "PUT", "/default/_design/bad", "application/json", `{"views":{"v":{"map":"function (doc) { emit(doc.n, "}}}`},
		{"ddoc not a function", "PUT", "/default/_design/bad", "application/json", `{"views":{"v":{"map":"42"}}}`},
		{"ddoc unknown builtin reduce", "PUT", "/default/_design/bad", "application/json", `{"views":{"v":{"map":"function (doc) { emit(1, 1); }","reduce":"_median"}}}`},
		{"ddoc in a memcached bucket", "PUT", "/cache/_design/d", "application/json", `{"views":{"v":{"map":"function (doc) { emit(1, 1); }"}}}`},
		{"missing ddoc", "GET", "/default/_design/nope", "", ""},
		{"delete missing ddoc", "DELETE", "/default/_design/nope", "", ""},
		{"missing view", "GET", "/default/_design/throws/_view/nope", "", ""},
		{"bad view parameter", "GET", "/default/_design/throws/_view/v?limit=abc", "", ""},
		{"bad view key", "GET", "/default/_design/throws/_view/v?key=notjson", "", ""},
		{"reduce that throws", "GET", "/default/_design/throws/_view/v?stale=false", "", ""},
		{"builtin reduce over a string", "GET", "/default/_design/sum/_view/v?stale=false", "", ""},
		{"group on a map-only query", "GET", "/default/_design/throws/_view/v?reduce=false&group=true", "", ""},
		{"bad bucket settings", "POST", "/pools/default/buckets", form, "name=x&maxTTL=-5"},
		{"bucket exists", "POST", "/pools/default/buckets", form, "name=default"},
		{"bad bucket name", "POST", "/pools/default/buckets", form, "name=" + strings.Repeat("%21", 5)},
		{"delete missing bucket", "DELETE", "/pools/default/buckets/nobucket", "", ""},
		{"scope exists", "POST", "/pools/default/buckets/default/scopes", form, "name=_default"},
		{"collection in a missing scope", "POST", "/pools/default/buckets/default/scopes/nope/collections", form, "name=c"},
		{"drop missing collection", "DELETE", "/pools/default/buckets/default/scopes/_default/collections/nope", "", ""},
		{"bad pager setting", "POST", "/pools/default/buckets/default/settings/expiryPager", form, "exp_pager_stime=-1"},
		{"bad role", "PUT", "/settings/rbac/users/local/u", form, "password=secret12&roles=emperor"},
		{"missing user", "DELETE", "/settings/rbac/users/local/nobody", "", ""},
		{"bad search definition", "PUT", "/api/index/bad", "application/json", `{"type":"fulltext-index","sourceName":"default","params":{"mapping":{"default_analyzer":"nope"}}}`},
		{"search index bad JSON", "PUT", "/api/index/bad", "application/json", `{`},
		{"missing search index", "GET", "/api/index/nope", "", ""},
		{"bad search query", "POST", "/api/index/ix/query", "application/json", `{"query":{"nope":1}}`},
		{"browse a missing collection", "GET", "/pools/default/buckets/default/scopes/_default/collections/nope/docs", "", ""},
		{"browse with a bad limit", "GET", "/pools/default/buckets/default/scopes/_default/collections/_default/docs?limit=x", "", ""},
	}
	for _, c := range cases {
		status, b := do(c.method, c.path, c.ct, c.body)
		if status < 400 {
			t.Errorf("%s: %d %s, want an error", c.name, status, b)
			continue
		}
		var out struct{ Error, Reason, Status string }
		if err := json.Unmarshal([]byte(b), &out); err != nil {
			t.Errorf("%s: %d %q: not JSON", c.name, status, b)
			continue
		}
		if out.Status == "fail" { // the search API's form: {"status":"fail","error":reason}
			out.Reason = out.Error
		}
		if out.Reason == "" {
			t.Errorf("%s: %d %q: not an error with a reason", c.name, status, b)
			continue
		}
		if goPrefix.MatchString(out.Reason) {
			t.Errorf("%s: reason %q has a Go package prefix", c.name, out.Reason)
		} else {
			t.Logf("%s: %d %s", c.name, status, out.Reason)
		}
	}
	// A search index whose source bucket does not exist is a 400, as cbft
	// answers, on both paths that create one.
	for _, path := range []string{"/api/index/z", "/api/bucket/nobucket/scope/_default/index/z"} {
		status, b := do("PUT", path, "application/json", `{"type":"fulltext-index","sourceName":"nobucket"}`)
		if status != http.StatusBadRequest || !strings.Contains(b, `non existent bucket`) {
			t.Errorf("PUT %s naming a missing bucket: %d %s, want 400 naming a non existent bucket", path, status, b)
		}
	}
	// Bulk lines: every failed line's reason.
	bulk := strings.Join([]string{
		`{"op":"insert","id":"a","doc":{}}`,
		`{"op":"replace","id":"nope","doc":{}}`,
		`{"op":"delete","id":"nope"}`,
		`{"op":"upsert","id":"a","doc":{},"cas":1}`,
		`{"op":"upsert","id":"","doc":{}}`,
		`{"op":"upsert","id":"x","doc":{},"collection":"nope.nope"}`,
		`{"op":"upsert","id":"x","doc":{},"collection":"nodot"}`,
		`{"op":"touch","id":"nope","expiry":10}`,
		`{"op":"touch","id":"a"}`,
		`{"op":"frob","id":"x"}`,
		`{"op":"upsert","id":5,"doc":{}}`,
		`{"op":"upsert","id":"x","doc":{},"extra":1}`,
		`{"op":"upsert","id":"x","doc":{}`,
		`not json`,
		`{"op":"upsert","id":"big","doc":` + big + `}`,
	}, "\n")
	status, b := do("POST", "/default/_bulk", "application/x-ndjson", bulk)
	if status != http.StatusOK {
		t.Fatalf("bulk: %d %s", status, b)
	}
	sc := bufio.NewScanner(strings.NewReader(b))
	n := 0
	for sc.Scan() {
		n++
		var out struct{ Error, Reason string }
		if err := json.Unmarshal(sc.Bytes(), &out); err != nil || out.Reason == "" {
			t.Errorf("bulk line %d: %q: not an error with a reason", n, sc.Text())
			continue
		}
		if goPrefix.MatchString(out.Reason) {
			t.Errorf("bulk line %d: reason %q has a Go package prefix", n, out.Reason)
		} else {
			t.Logf("bulk line %d: %s", n, out.Reason)
		}
	}
	if n != 15 {
		t.Errorf("%d bulk answers, want 15", n)
	}
	// _info's map and reduce errors.
	if status, b := do("PUT", "/default/_design/mapthrows", "application/json", `{"views":{"v":{"map":"function (doc) { throw new Error('no ' + doc.n); }"}}}`); status >= 300 {
		t.Fatalf("PUT mapthrows: %d %s", status, b)
	}
	do("GET", "/default/_design/mapthrows/_view/v?stale=false", "", "")
	for _, ddoc := range []string{"mapthrows", "throws"} {
		status, b = do("GET", "/default/_design/"+ddoc+"/_info", "", "")
		var inf struct {
			Views map[string]struct {
				RecentErrors       []struct{ Reason string } `json:"recent_errors"`
				RecentReduceErrors []struct{ Reason string } `json:"recent_reduce_errors"`
			} `json:"views"`
		}
		if err := json.Unmarshal([]byte(b), &inf); status != http.StatusOK || err != nil {
			t.Fatalf("_info of %s: %d %s", ddoc, status, b)
		}
		var reasons []string
		for _, v := range inf.Views {
			for _, e := range v.RecentErrors {
				reasons = append(reasons, e.Reason)
			}
			for _, e := range v.RecentReduceErrors {
				reasons = append(reasons, e.Reason)
			}
		}
		if len(reasons) == 0 {
			t.Errorf("_info of %s shows no errors: %s", ddoc, b)
		}
		for _, r := range reasons {
			if goPrefix.MatchString(r) {
				t.Errorf("_info of %s: reason %q has a Go package prefix", ddoc, r)
			} else {
				t.Logf("_info of %s: %s", ddoc, r)
			}
		}
	}
}
