package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/search"
)

// The search API's scoped paths check the fts role on the bucket the
// request works on: the path's {bucket} unescaped, as the handler reads
// it. A bucket name may hold "%" (Couchbase allows it), so a searcher of
// bucket "%41" must not reach bucket "A"'s indexes through
// /api/bucket/%41/..., and must reach its own through /api/bucket/%2541/....
func TestSearchScopedPathChecksTheUnescapedBucket(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(1_700_000_000), NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for _, name := range []string{"A", "%41"} {
		if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings(name)); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := search.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: "Administrator", AdminPassword: "password",
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}})
	if err != nil {
		t.Fatal(err)
	}
	roles, err := auth.ParseRoles("fts_searcher[%41]")
	if err != nil {
		t.Fatal(err)
	}
	if err := users.PutUser("pct", "", "password1", roles); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Auth: users, Search: svc}))
	defer srv.Close()
	do := func(user, pass, method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth(user, pass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	def := `{"type":"fulltext-index","params":{}}`
	if status, body := do("Administrator", "password", http.MethodPut, "/api/bucket/A/scope/_default/index/secret", def); status != http.StatusOK {
		t.Fatalf("create bucket A's index: %d %s", status, body)
	}
	if status, body := do("Administrator", "password", http.MethodPut, "/api/bucket/%2541/scope/_default/index/mine", def); status != http.StatusOK {
		t.Fatalf("create bucket %%41's index: %d %s", status, body)
	}
	if status, body := do("pct", "password1", http.MethodGet, "/api/bucket/%41/scope/_default/index", ""); status != http.StatusForbidden {
		t.Errorf("fts_searcher[%%41] listed bucket A's indexes: %d %s", status, body)
	}
	if status, body := do("pct", "password1", http.MethodGet, "/api/bucket/%41/scope/_default/index/secret", ""); status != http.StatusForbidden {
		t.Errorf("fts_searcher[%%41] read bucket A's index: %d %s", status, body)
	}
	if status, body := do("pct", "password1", http.MethodGet, "/api/bucket/%2541/scope/_default/index/mine", ""); status != http.StatusOK {
		t.Errorf("fts_searcher[%%41] reading its own bucket's index: %d %s", status, body)
	}
}
