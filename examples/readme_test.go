package examples_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/views"
)

// startServer serves a fresh engine with a "default" bucket, views and the
// pager over HTTP, the administrator being Administrator / password as in
// the README.
func startServer(t *testing.T) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default")); err != nil {
		t.Fatal(err)
	}
	vs, err := views.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vs.Close() })
	pm := pager.New(eng, nil)
	t.Cleanup(func() { pm.Close(ctx) })
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: "Administrator", AdminPassword: "password",
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}, ScramIterations: 100})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Views: vs, Pager: pm, Auth: users}))
	t.Cleanup(srv.Close)
	return srv
}

// TestReadmeQueryErrors asks a real server each query of the README's "Bad
// query values" table and compares the answer with the README's.
func TestReadmeQueryErrors(t *testing.T) {
	srv := startServer(t)
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("Administrator", "password")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := do("PUT", "/default/_design/game", `{"views":{"score":{"map":"function (doc, meta) { if (doc.score !== undefined) emit(doc.player, doc.score); }","reduce":"_stats"}}}`); st != 201 {
		t.Fatalf("PUT ddoc: %d %s", st, body)
	}
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "\n### Bad query values\n")
	if i < 0 {
		t.Fatal(`README has no "### Bad query values"`)
	}
	text = text[i:]
	text = text[:strings.Index(text, "\n## ")]
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.SplitN(strings.TrimPrefix(line, "| "), " | ", 2)
		query := strings.Trim(cells[0], "`")
		ans := cells[1]
		if strings.HasPrefix(ans, "`` ") {
			ans = ans[3:strings.Index(ans, " ``")]
		} else {
			ans = ans[1:]
			ans = ans[:strings.Index(ans, "`")]
		}
		var want, got map[string]string
		if err := json.Unmarshal([]byte(ans), &want); err != nil {
			t.Fatalf("README answer for %s is not JSON: %s", query, ans)
		}
		st, body := do("GET", "/default/_design/game/_view/score?"+query, "")
		if err := json.Unmarshal([]byte(body), &got); err != nil || st != 400 || !maps.Equal(got, want) {
			t.Errorf("%s: answered %d %s, the README says 400 %s", query, st, body, ans)
		}
		n++
	}
	if n < 5 {
		t.Fatalf("found %d examples in the README's table", n)
	}
}

// TestReadmeViewScope checks what the README says views index: the default
// collection only; ephemeral buckets too; and keys over HTTP that memcached's
// text protocol cannot carry (a space, a control character).
func TestReadmeViewScope(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(b)), " ")
	for _, claim := range []string{
		"Views index the default collection (`_default._default`) only, as Couchbase's do",
		"Views work on `ephemeral` buckets too",
		"Couchbase allows views on `couchbase` buckets only, so this is Mayfly's choice",
		"Over HTTP a key may hold what the memcached text protocol cannot carry, such as spaces and control characters",
	} {
		if !strings.Contains(readme, claim) {
			t.Errorf("README does not say %q", claim)
		}
	}
	srv := startServer(t)
	do := func(method, path, ctype, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("Administrator", "password")
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	form := "application/x-www-form-urlencoded"
	for _, c := range []struct{ method, path, ctype, body string }{
		{"POST", "/pools/default/buckets", form, "name=cache&bucketType=ephemeral"},
		{"POST", "/pools/default/buckets/default/scopes", form, "name=s"},
		{"POST", "/pools/default/buckets/default/scopes/s/collections", form, "name=c"},
	} {
		if st, body := do(c.method, c.path, c.ctype, c.body); st/100 != 2 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, st, body)
		}
	}
	ddoc := `{"views":{"ids":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`
	for _, bucket := range []string{"default", "cache"} {
		if st, body := do("PUT", "/"+bucket+"/_design/d", "application/json", ddoc); st != 201 {
			t.Fatalf("PUT ddoc in %s: %d %s", bucket, st, body)
		}
		for _, p := range []string{"/docs/plain", "/docs/with%20space", "/docs/ctl%01char", "/docs/other?collection=s.c"} {
			if st, body := do("PUT", "/"+bucket+p, "application/json", `{"a":1}`); st != 201 && !(bucket == "cache" && strings.Contains(p, "collection")) {
				t.Fatalf("PUT %s%s: %d %s", bucket, p, st, body)
			}
		}
		st, body := do("GET", "/"+bucket+"/_design/d/_view/ids?stale=false", "", "")
		var ans struct {
			TotalRows int `json:"total_rows"`
			Rows      []struct {
				ID string `json:"id"`
			} `json:"rows"`
		}
		if st != 200 || json.Unmarshal([]byte(body), &ans) != nil {
			t.Fatalf("%s: query: %d %s", bucket, st, body)
		}
		var ids []string
		for _, r := range ans.Rows {
			ids = append(ids, r.ID)
		}
		if want := []string{"ctl\x01char", "plain", "with space"}; strings.Join(ids, "|") != strings.Join(want, "|") || ans.TotalRows != 3 {
			t.Errorf("%s: view rows %q (total %d), want %q: the default collection's documents, odd keys included", bucket, ids, ans.TotalRows, want)
		}
	}
}
