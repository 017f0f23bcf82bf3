package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/pager"
)

// newOptionsFixture is newFixture's server (no views, no audit) with the
// options edit sets; runs, when not nil, records the pager's runs.
func newOptionsFixture(t *testing.T, runs *httpapi.PagerRuns, edit func(*httpapi.Options)) *fixture {
	t.Helper()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: clk, NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default")); err != nil {
		t.Fatal(err)
	}
	var ev *pager.Events
	if runs != nil {
		ev = &pager.Events{RunEnd: runs.RunEnd}
	}
	pm := pager.New(eng, &pager.Options{Events: ev})
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
	if err != nil {
		t.Fatal(err)
	}
	o := httpapi.Options{Pager: pm, Auth: users, PagerRuns: runs}
	if edit != nil {
		edit(&o)
	}
	srv := httptest.NewServer(httpapi.New(eng, &o))
	t.Cleanup(func() {
		srv.Close()
		pm.Close(context.Background())
		eng.Close()
	})
	return &fixture{t: t, eng: eng, clk: clk, srv: srv, pager: pm, users: users}
}

// stubConsole answers "console PATH" for whatever reaches it.
var stubConsole = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "console %s", r.URL.Path)
})

// TestConsoleMount: the console's paths reach Options.Console without
// credentials, after the Host check; everything else, a bucket named "ui"'s
// API included, stays the API's and authenticates.
func TestConsoleMount(t *testing.T) {
	f := newOptionsFixture(t, nil, func(o *httpapi.Options) { o.Console = stubConsole })
	if st, _, body := f.do("POST", "/pools/default/buckets", "application/x-www-form-urlencoded", "name=ui"); st != 202 {
		t.Fatalf("creating bucket ui: %d %s", st, body)
	}
	for _, p := range []string{"/", "/ui", "/ui/", "/ui/app.js", "/ui/docs"} {
		st, _, body := f.doAs("", "", "GET", p, "", "")
		if st != 200 || body != "console "+p {
			t.Errorf("GET %s without credentials: %d %q, want the console", p, st, body)
		}
	}
	// Not the console's: deeper paths, "_" names, other methods.
	for _, c := range []struct{ method, path string }{
		{"GET", "/ui/docs/k"}, {"GET", "/ui/_expiry"}, {"GET", "/ui/a/b.js"}, {"POST", "/ui/"}, {"PUT", "/ui/app.js"}, {"GET", "/pools/default/buckets"},
	} {
		st, _, body := f.doAs("", "", c.method, c.path, "", "")
		if st != 401 || strings.HasPrefix(body, "console") {
			t.Errorf("%s %s without credentials: %d %q, want the API's 401", c.method, c.path, st, body)
		}
	}
	// Bucket ui's documents are the API's.
	if st, _, body := f.do("PUT", "/ui/docs/k", "application/json", `{"a":1}`); st != 201 {
		t.Fatalf("PUT /ui/docs/k: %d %s", st, body)
	}
	if st, _, body := f.do("GET", "/ui/docs/k", "", ""); st != 200 || body != `{"a":1}` {
		t.Fatalf("GET /ui/docs/k: %d %s", st, body)
	}
	// A Host the server does not answer for is refused before the console.
	st, _, body := f.doWith("GET", "/ui/", "", "", func(r *http.Request) { r.Host = "evil.example" })
	if st != http.StatusMisdirectedRequest || strings.HasPrefix(body, "console") {
		t.Fatalf("GET /ui/ with Host evil.example: %d %q", st, body)
	}

	// Without a console, its paths are the API's.
	g := newOptionsFixture(t, nil, nil)
	if st, _, body := g.doAs("", "", "GET", "/ui/", "", ""); st != 401 {
		t.Fatalf("GET /ui/ with no console: %d %s", st, body)
	}
}

// runsAnswer is GET /{bucket}/_expiry/runs's answer.
type runsAnswer struct {
	Now  int64             `json:"now"`
	Runs []pager.RunResult `json:"runs"`
}

// runs reads GET /{bucket}/_expiry/runs.
func (f *fixture) runs(bucket string) runsAnswer {
	f.t.Helper()
	st, _, body := f.do("GET", "/"+bucket+"/_expiry/runs", "", "")
	var a runsAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil || st != 200 {
		f.t.Fatalf("GET /%s/_expiry/runs: %d %s", bucket, st, body)
	}
	return a
}

// expireAndRun expires n documents and runs the pager over HTTP.
func (f *fixture) expireAndRun(n int) {
	f.t.Helper()
	for i := range n {
		if st, _, body := f.do("PUT", fmt.Sprintf("/default/docs/k%d-%d?expiry=5", f.clk.Now(), i), "application/json", `{}`); st != 201 {
			f.t.Fatalf("PUT: %d %s", st, body)
		}
	}
	f.clk.Advance(10)
	if st, _, body := f.do("POST", "/pools/default/buckets/default/controller/runExpiryPager", "", ""); st != 200 {
		f.t.Fatalf("runExpiryPager: %d %s", st, body)
	}
}

// TestPagerRuns: GET /{bucket}/_expiry/runs lists what each pager run
// purged, oldest first, up to the PagerRuns limit; a deleted bucket's runs
// are forgotten; without a PagerRuns it shows the last run.
func TestPagerRuns(t *testing.T) {
	f := newOptionsFixture(t, httpapi.NewPagerRuns(2), nil)
	if a := f.runs("default"); len(a.Runs) != 0 || a.Now != t0 {
		t.Fatalf("before any run: %+v", a)
	}
	f.expireAndRun(1)
	f.expireAndRun(3)
	f.expireAndRun(2)
	a := f.runs("default")
	if len(a.Runs) != 2 || a.Runs[0].Purged != 3 || a.Runs[1].Purged != 2 || a.Runs[0].Start >= a.Runs[1].Start || a.Now != f.clk.Now() {
		t.Fatalf("the last two runs, oldest first, want purged 3 then 2: %+v", a)
	}
	if st, _, body := f.doAs("", "", "GET", "/default/_expiry/runs", "", ""); st != 401 {
		t.Fatalf("without credentials: %d %s", st, body)
	}
	// Deleted and created again: the new bucket has no runs.
	if st, _, body := f.do("DELETE", "/pools/default/buckets/default", "", ""); st != 200 {
		t.Fatalf("DELETE bucket: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets", "application/x-www-form-urlencoded", "name=default"); st != 202 {
		t.Fatalf("create bucket: %d %s", st, body)
	}
	if a := f.runs("default"); len(a.Runs) != 0 {
		t.Fatalf("a new bucket under a deleted one's name shows its runs: %+v", a)
	}
	if st, _, _ := f.do("GET", "/nope/_expiry/runs", "", ""); st != 404 {
		t.Fatalf("unknown bucket: %d", st)
	}

	g := newOptionsFixture(t, nil, nil)
	g.expireAndRun(1)
	g.expireAndRun(4)
	if a := g.runs("default"); len(a.Runs) != 1 || a.Runs[0].Purged != 4 {
		t.Fatalf("without PagerRuns, the last run only: %+v", a)
	}
}
