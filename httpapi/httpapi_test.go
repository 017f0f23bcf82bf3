package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/views"
)

const t0 = 1_700_000_000

// fixture is a server over a fresh engine with a "default" bucket and a fake clock.
type fixture struct {
	t     testing.TB
	eng   *engine.Engine
	clk   *engine.FakeClock
	srv   *httptest.Server
	pager *pager.Manager
	audit string     // path of the audit log
	al    *audit.Log // the audit log itself
	users *auth.Store
	views *views.Service
}

// The fixture's administrator; cheapArgon2 and cheapScram keep hashing
// fast in tests.
const (
	adminUser = "Administrator"
	adminPass = "password"
)

var cheapArgon2 = &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}

// cheapScram is the tests' PBKDF2 iteration count of SCRAM credentials, made
// for the administrator at every auth.Open and for every user a test puts:
// at the default (auth.DefaultScramIterations, 15,000, three hashes) each
// cost ~0.3 CPU-s under the race detector, about 20 CPU-s of this package's
// run. No test here logs in with SCRAM; auth tests the default.
const cheapScram = 100

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOpts(t, nil, nil)
}

// newFixtureOpts is newFixture with more options for the server (its
// engine, views, pager, audit and auth are the fixture's) and the users.
func newFixtureOpts(t *testing.T, more *httpapi.Options, users *auth.Options) *fixture {
	t.Helper()
	return newFixtureEngine(t, nil, more, users)
}

// newFixtureEngine is newFixtureOpts with engine options: eo's clock,
// partitions and NoSync are the fixture's, its other fields count.
func newFixtureEngine(t testing.TB, eo *engine.Options, more *httpapi.Options, users *auth.Options) *fixture {
	t.Helper()
	return newFixtureWrapped(t, eo, more, users, nil)
}

// newFixtureWrapped is newFixtureEngine whose test server serves the API
// through wrap (nil: as it is), e.g. to count the requests it gets.
func newFixtureWrapped(t testing.TB, eo *engine.Options, more *httpapi.Options, users *auth.Options, wrap func(http.Handler) http.Handler) *fixture {
	t.Helper()
	return newFixtureFirst(t, eo, more, users, wrap, nil)
}

// newFixtureFirst is newFixtureWrapped with an engine service attached
// before the fixture's views (nil: none), so that it is attached before
// them again when a bucket restarts.
func newFixtureFirst(t testing.TB, eo *engine.Options, more *httpapi.Options, users *auth.Options, wrap func(http.Handler) http.Handler, first engine.BucketService) *fixture {
	t.Helper()
	clk := engine.NewFakeClock(t0)
	o := engine.Options{}
	if eo != nil {
		o = *eo
	}
	o.Clock, o.NumPartitions, o.NoSync = clk, 16, true
	eng, err := engine.Open(t.TempDir(), &o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default")); err != nil {
		t.Fatal(err)
	}
	if first != nil {
		if err := eng.Attach(context.Background(), first); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := views.New(context.Background(), eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The pager's loop is not started: tests call Tick after moving the clock.
	pm := pager.New(eng, nil)
	auditPath := filepath.Join(t.TempDir(), audit.FileName)
	al, err := audit.Open(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	ao := auth.Options{Argon2: cheapArgon2, ScramIterations: cheapScram}
	if users != nil {
		ao = *users
	}
	ao.AdminUser, ao.AdminPassword = adminUser, adminPass
	store, err := auth.Open(t.TempDir(), &ao)
	if err != nil {
		t.Fatal(err)
	}
	ho := httpapi.Options{}
	if more != nil {
		ho = *more
	}
	ho.Views, ho.Pager, ho.Audit, ho.Auth = vs, pm, al, store
	var h http.Handler = httpapi.New(eng, &ho)
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		pm.Close(context.Background())
		al.Close()
		if err := vs.Check(context.Background()); err != nil {
			t.Errorf("views.Check: %v", err)
		}
		vs.Close()
		if err := eng.Check(context.Background()); err != nil {
			t.Errorf("engine.Check: %v", err)
		}
		eng.Close()
	})
	return &fixture{t: t, eng: eng, clk: clk, srv: srv, pager: pm, audit: auditPath, al: al, users: store, views: vs}
}

// do sends a request as the administrator and returns status, headers and
// body.
func (f *fixture) do(method, path, contentType, body string) (int, http.Header, string) {
	f.t.Helper()
	return f.doWith(method, path, contentType, body, func(req *http.Request) { req.SetBasicAuth(adminUser, adminPass) })
}

// doAs sends a request as user (no credentials if user is "").
func (f *fixture) doAs(user, pass, method, path, contentType, body string) (int, http.Header, string) {
	f.t.Helper()
	return f.doWith(method, path, contentType, body, func(req *http.Request) {
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
	})
}

// doWith sends a request after edit has changed it.
func (f *fixture) doWith(method, path, contentType, body string, edit func(*http.Request)) (int, http.Header, string) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if edit != nil {
		edit(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// jsonOf decodes a JSON object body.
func jsonOf(t testing.TB, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("not a JSON object: %q", body)
	}
	return m
}

func TestDocumentLifecycle(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/default/docs/a?expiry=2&flags=5", "", `{"x":1}`)
	if st != 201 {
		t.Fatalf("PUT new: %d %s", st, body)
	}
	m := jsonOf(t, body)
	if m["id"] != "a" || m["expiration"] != float64(t0+2) || m["rev"] == "" || m["seq"] != float64(1) {
		t.Fatalf("PUT answer: %s", body)
	}
	st, h, body := f.do("GET", "/default/docs/a", "", "")
	if st != 200 || body != `{"x":1}` || h.Get("X-Mayfly-Expiration") != "1700000002" || h.Get("X-Mayfly-Flags") != "5" || h.Get("X-Mayfly-Cas") == "" {
		t.Fatalf("GET: %d %v %s", st, h, body)
	}
	st, _, body = f.do("GET", "/default/docs/a?meta=true", "", "")
	m = jsonOf(t, body)
	meta, _ := m["meta"].(map[string]any)
	if st != 200 || meta["id"] != "a" || meta["type"] != "json" || meta["flags"] != float64(5) || m["json"].(map[string]any)["x"] != float64(1) {
		t.Fatalf("GET meta: %d %s", st, body)
	}
	f.clk.Advance(3)
	st, _, body = f.do("GET", "/default/docs/a", "", "")
	if st != 404 || jsonOf(t, body)["error"] != "not_found" {
		t.Fatalf("GET after expiry: %d %s", st, body)
	}
	// An expired key can be inserted again.
	if st, _, body = f.do("PUT", "/default/docs/a?op=insert", "", `2`); st != 201 {
		t.Fatalf("insert over expired: %d %s", st, body)
	}
	if st, _, _ = f.do("PUT", "/default/docs/a", "", `3`); st != 200 {
		t.Fatalf("PUT over existing: %d", st)
	}
	st, _, body = f.do("GET", "/default/docs/a?touch=100", "", "")
	if st != 200 || body != "3" {
		t.Fatalf("get-and-touch: %d %s", st, body)
	}
	_, h, _ = f.do("GET", "/default/docs/a", "", "")
	if h.Get("X-Mayfly-Expiration") != "1700000103" {
		t.Fatalf("expiration after touch: %s", h.Get("X-Mayfly-Expiration"))
	}
	st, _, body = f.do("POST", "/default/docs/a/touch?expiry=0", "", "")
	if st != 200 || jsonOf(t, body)["expiration"] != float64(0) {
		t.Fatalf("touch: %d %s", st, body)
	}
	if st, _, body = f.do("DELETE", "/default/docs/a", "", ""); st != 200 {
		t.Fatalf("DELETE: %d %s", st, body)
	}
	if st, _, _ = f.do("GET", "/default/docs/a", "", ""); st != 404 {
		t.Fatalf("GET after DELETE: %d", st)
	}
	// Keys with slashes and binary values.
	if st, _, body = f.do("PUT", "/default/docs/user%2F1", "", "\x00\x01"); st != 201 {
		t.Fatalf("PUT key with slash: %d %s", st, body)
	}
	st, _, body = f.do("GET", "/default/docs/user%2F1?meta=true", "", "")
	if st != 200 || jsonOf(t, body)["base64"] != "AAE=" {
		t.Fatalf("binary doc: %d %s", st, body)
	}
}

func TestDocumentErrors(t *testing.T) {
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"unknown bucket", "GET", "/nope/docs/a", "", 404, "not_found"},
		{"missing doc", "GET", "/default/docs/missing", "", 404, "not_found"},
		{"key too long", "PUT", "/default/docs/" + strings.Repeat("k", 251), "1", 400, "invalid_key"},
		{"expiry not an integer", "PUT", "/default/docs/a?expiry=soon", "1", 400, "bad_request"},
		{"flags out of range", "PUT", "/default/docs/a?flags=-1", "1", 400, "bad_request"},
		{"bad op", "PUT", "/default/docs/a?op=merge", "1", 400, "bad_request"},
		{"bad cas", "PUT", "/default/docs/a?cas=x", "1", 400, "bad_request"},
		{"replace missing", "PUT", "/default/docs/a?op=replace", "1", 404, "not_found"},
		{"cas on missing", "PUT", "/default/docs/a?cas=5", "1", 404, "not_found"},
		{"delete missing", "DELETE", "/default/docs/a", "", 404, "not_found"},
		{"touch without expiry", "POST", "/default/docs/a/touch", "", 400, "bad_request"},
		{"unknown collection", "PUT", "/default/docs/a?collection=s.c", "1", 404, "not_found"},
		{"malformed collection", "PUT", "/default/docs/a?collection=sc", "1", 400, "bad_request"},
		{"body over 20 MiB", "PUT", "/default/docs/big", strings.Repeat("x", engine.MaxValueLen+1), 413, "too_large"},
		{"no route", "GET", "/", "", 404, "not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do(c.method, c.path, "", c.body)
			m := jsonOf(t, body)
			if st != c.status || m["error"] != c.code || m["reason"] == "" {
				t.Fatalf("%s %s: %d %s, want %d %s", c.method, c.path, st, body, c.status, c.code)
			}
			if n := f.mustBucket("default").Stats().CurrItems; n != 0 {
				t.Fatalf("a refused request wrote %d documents", n)
			}
		})
	}
}

func (f *fixture) mustBucket(name string) *engine.Bucket {
	b, err := f.eng.Bucket(name)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func TestCASConflicts(t *testing.T) {
	f := newFixture(t)
	f.do("PUT", "/default/docs/a", "", `1`)
	_, h, _ := f.do("GET", "/default/docs/a", "", "")
	good := h.Get("X-Mayfly-Cas")
	if st, _, body := f.do("PUT", "/default/docs/a?cas=1", "", `2`); st != 409 || jsonOf(t, body)["error"] != "cas_mismatch" {
		t.Fatalf("stale cas: %d %s", st, body)
	}
	if st, _, body := f.do("PUT", "/default/docs/a?op=insert", "", `2`); st != 409 || jsonOf(t, body)["error"] != "key_exists" {
		t.Fatalf("insert over existing: %d %s", st, body)
	}
	if st, _, body := f.do("PUT", "/default/docs/a?cas="+good, "", `2`); st != 200 {
		t.Fatalf("right cas: %d %s", st, body)
	}
}

func TestBucketsAndCollections(t *testing.T) {
	f := newFixture(t)
	form := "application/x-www-form-urlencoded"
	if st, _, body := f.do("POST", "/pools/default/buckets", form, "name=travel&bucketType=couchbase&maxTTL=100&ramQuotaMB=256"); st != 202 {
		t.Fatalf("create bucket: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets", "application/json", `{"name":"cache","bucketType":"ephemeral"}`); st != 202 {
		t.Fatalf("create bucket (JSON): %d %s", st, body)
	}
	st, _, body := f.do("GET", "/pools/default/buckets/travel", "", "")
	if m := jsonOf(t, body); st != 200 || m["maxTTL"] != float64(100) || m["bucketType"] != "membase" {
		t.Fatalf("get bucket: %d %s", st, body)
	}
	// maxTTL applies to later writes only.
	f.do("PUT", "/travel/docs/early", "", `1`)
	if st, _, body := f.do("POST", "/pools/default/buckets/travel", form, "maxTTL=50"); st != 200 {
		t.Fatalf("update maxTTL: %d %s", st, body)
	}
	_, _, body = f.do("PUT", "/travel/docs/late", "", `1`)
	if jsonOf(t, body)["expiration"] != float64(t0+50) {
		t.Fatalf("write after maxTTL change: %s", body)
	}
	_, h, _ := f.do("GET", "/travel/docs/early", "", "")
	if h.Get("X-Mayfly-Expiration") != "1700000100" {
		t.Fatalf("earlier write's expiry changed: %s", h.Get("X-Mayfly-Expiration"))
	}
	for _, bad := range []string{"maxTTL=abc", "maxTTL=-4", "purgeInterval=x", "ramQuotaMB=0"} {
		if st, _, body := f.do("POST", "/pools/default/buckets/travel", form, bad); st != 400 || jsonOf(t, body)["reason"] == "" {
			t.Fatalf("bad setting %s: %d %s", bad, st, body)
		}
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/travel", "application/json", `{"maxTTL":`); st != 400 {
		t.Fatalf("malformed JSON: %d %s", st, body)
	}
	if _, _, body := f.do("GET", "/pools/default/buckets/travel", "", ""); jsonOf(t, body)["maxTTL"] != float64(50) {
		t.Fatalf("a refused update changed maxTTL: %s", body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/travel/scopes", form, "name=inventory"); st != 200 {
		t.Fatalf("create scope: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/travel/scopes/inventory/collections", form, "name=hotels&maxTTL=10"); st != 200 {
		t.Fatalf("create collection: %d %s", st, body)
	}
	if st, _, _ := f.do("POST", "/pools/default/buckets/travel/scopes/nope/collections", form, "name=x"); st != 404 {
		t.Fatalf("collection in missing scope: %d", st)
	}
	_, _, body = f.do("PUT", "/travel/docs/h1?collection=inventory.hotels&expiry=100", "", `{}`)
	if jsonOf(t, body)["expiration"] != float64(t0+10) {
		t.Fatalf("collection maxTTL not applied: %s", body)
	}
	_, _, body = f.do("GET", "/pools/default/buckets/travel/scopes", "", "")
	if !strings.Contains(body, `"name":"hotels"`) || !strings.Contains(body, `"name":"_default"`) {
		t.Fatalf("scopes: %s", body)
	}
	if st, _, _ := f.do("DELETE", "/pools/default/buckets/cache", "", ""); st != 200 {
		t.Fatalf("delete bucket: %d", st)
	}
	if st, _, _ := f.do("GET", "/pools/default/buckets/cache", "", ""); st != 404 {
		t.Fatalf("deleted bucket: %d", st)
	}
	_, _, body = f.do("GET", "/pools/default/buckets", "", "")
	if !strings.Contains(body, `"name":"travel"`) || strings.Contains(body, `"name":"cache"`) {
		t.Fatalf("bucket list: %s", body)
	}
}
