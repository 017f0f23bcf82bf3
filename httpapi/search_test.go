package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/search"
)

// The search REST API through the whole HTTP front door: Couchbase's paths,
// the fts roles on the index's bucket, and audited index changes.
func TestSearchOverHTTP(t *testing.T) {
	ctx := context.Background()
	auditPath := filepath.Join(t.TempDir(), audit.FileName)
	al, err := audit.Open(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()
	eng, do := searchFront(t, al, []string{"default", "other"},
		map[string]string{"finder": "fts_searcher[default]", "stranger": "fts_searcher[other]", "reader": "data_reader[default]"})
	b, err := eng.Bucket("default")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if _, err := b.DefaultCollection().Upsert(ctx, k, []byte(`{"text":"the quick brown fox `+k+`"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	def := `{"type":"fulltext-index","sourceType":"couchbase","sourceName":"default"}`
	if status, body := do("finder", http.MethodPut, "/api/index/idx", def); status != http.StatusForbidden {
		t.Errorf("fts_searcher created an index: %d %s", status, body)
	}
	if status, body := do("Administrator", http.MethodPut, "/api/index/idx", def); status != http.StatusOK {
		t.Fatalf("create index: %d %s", status, body)
	}
	query := `{"query":{"match":"fox"},"ctl":{"consistency":{"level":"at_plus"}}}`
	status, body := do("finder", http.MethodPost, "/api/index/idx/query", query)
	if status != http.StatusOK || !strings.Contains(body, `"total_hits":2`) {
		t.Errorf("fts_searcher query: %d %s", status, body)
	}
	for _, user := range []string{"stranger", "reader"} {
		if status, body := do(user, http.MethodPost, "/api/index/idx/query", query); status != http.StatusForbidden {
			t.Errorf("%s queried another bucket's index: %d %s", user, status, body)
		}
	}
	// Couchbase 7's scoped paths name the bucket.
	scoped := "/api/bucket/default/scope/_default/index/"
	if status, body := do("finder", http.MethodPost, scoped+"idx/query", query); status != http.StatusOK || !strings.Contains(body, `"total_hits":2`) {
		t.Errorf("scoped query: %d %s", status, body)
	}
	if status, body := do("stranger", http.MethodPost, scoped+"idx/query", query); status != http.StatusForbidden {
		t.Errorf("scoped query from another bucket's searcher: %d %s", status, body)
	}
	if status, body := do("Administrator", http.MethodPost, "/api/bucket/other/scope/_default/index/idx/query", query); status != http.StatusBadRequest || !strings.Contains(body, "index not found") {
		// cbft's answer to a query on an index it does not have there.
		t.Errorf("scoped query naming another bucket: %d %s", status, body)
	}
	if status, body := do("Administrator", http.MethodPut, scoped+"idx2", `{"type":"fulltext-index","params":{}}`); status != http.StatusOK {
		t.Fatalf("scoped create: %d %s", status, body)
	}
	if status, body := do("Administrator", http.MethodPut, "/api/bucket/other/scope/_default/index/idx3", def); status != http.StatusBadRequest {
		t.Errorf("scoped create naming another bucket as its source: %d %s", status, body)
	}
	// The count is of what the index holds so far (as cbft's): a query at
	// at_plus first waits for the new index to catch up with the writes.
	if status, body := do("finder", http.MethodPost, scoped+"idx2/query", query); status != http.StatusOK {
		t.Errorf("scoped query of the new index: %d %s", status, body)
	}
	if status, body := do("finder", http.MethodGet, scoped+"idx2/count", ""); status != http.StatusOK || !strings.Contains(body, `"count":2`) {
		t.Errorf("scoped count: %d %s", status, body)
	}
	if status, body := do("finder", http.MethodGet, "/api/bucket/default/scope/_default/index", ""); status != http.StatusOK || !strings.Contains(body, `"idx"`) || !strings.Contains(body, `"idx2"`) {
		t.Errorf("scoped list: %d %s", status, body)
	}
	// The unscoped list (an SDK's GetAllIndexes) answers every user with
	// the indexes of the buckets they may search, as cbft filters it.
	for user, want := range map[string]bool{"finder": true, "stranger": false, "reader": false, "Administrator": true} {
		status, body := do(user, http.MethodGet, "/api/index", "")
		if status != http.StatusOK || strings.Contains(body, `"idx2"`) != want || strings.Contains(body, `"idx"`) != want {
			t.Errorf("%s lists every index: %d %s; want 200, default's indexes listed: %v", user, status, body, want)
		}
	}
	if status, body := do("finder", http.MethodGet, scoped+"idx2", ""); status != http.StatusOK || !strings.Contains(body, `"sourceName":"default"`) {
		t.Errorf("scoped get: %d %s", status, body)
	}
	if status, body := do("Administrator", http.MethodDelete, scoped+"idx2", ""); status != http.StatusOK {
		t.Errorf("scoped delete: %d %s", status, body)
	}
	if status, body := do("Administrator", http.MethodGet, scoped+"idx2", ""); status != http.StatusBadRequest || !strings.Contains(body, "index not found") {
		t.Errorf("scoped get after delete: %d %s", status, body)
	}
	// The index's figures in the bucket's statistics and in /metrics.
	status, body = do("Administrator", http.MethodGet, "/pools/default/buckets/default/stats", "")
	var st map[string]int64
	if err := json.Unmarshal([]byte(body), &st); status != http.StatusOK || err != nil {
		t.Fatalf("stats: %d %s", status, body)
	}
	for stat, want := range map[string]int64{"doc_count": 2, "num_mutations_to_index": 0, "total_queries": 2, "total_queries_error": 0, "docs_indexed": 2} {
		if got, ok := st["fts_idx_"+stat]; !ok || got != want {
			t.Errorf("stats fts_idx_%s = %d (present %v), want %d", stat, got, ok, want)
		}
	}
	if st["fts_idx_num_bytes_used_disk"] <= 0 {
		t.Errorf("stats fts_idx_num_bytes_used_disk = %d", st["fts_idx_num_bytes_used_disk"])
	}
	status, body = do("Administrator", http.MethodGet, "/metrics", "")
	if status != http.StatusOK {
		t.Fatalf("metrics: %d %s", status, body)
	}
	// Couchbase's names, then Mayfly's own.
	for _, stat := range []string{"doc_count", "num_mutations_to_index", "num_bytes_used_disk", "total_queries", "total_queries_error",
		"docs_indexed", "docs_deleted", "batches", "index_errors", "rollbacks"} {
		if _, ok := st["fts_idx_"+stat]; !ok {
			t.Errorf("stats lack fts_idx_%s", stat)
		}
		want := fmt.Sprintf("mayfly_fts_%s{bucket=\"default\",index=\"idx\"} %d\n", stat, st["fts_idx_"+stat])
		if stat == "num_bytes_used_disk" {
			want = "mayfly_fts_num_bytes_used_disk{bucket=\"default\",index=\"idx\"} "
		}
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if status, body := do("Administrator", http.MethodDelete, "/api/index/idx", ""); status != http.StatusOK {
		t.Fatalf("delete index: %d %s", status, body)
	}
	raw, _ := os.ReadFile(auditPath)
	if !strings.Contains(string(raw), `"action":"search.index.put"`) || !strings.Contains(string(raw), `"action":"search.index.delete"`) {
		t.Errorf("index changes not audited: %s", raw)
	}
}

// The search REST API answers Couchbase's shapes: {"status":"ok", ...} on
// success (the definition under indexDef, every definition under
// indexDefs.indexDefs, the stats flat as "bucket:index:stat"), and on
// failure {"status":"fail","error":reason} with the status of what went
// wrong: 400 for a missing index (saying "index not found", as cbft) and
// for a refused definition or request.
func TestSearchRESTShapes(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	mc := engine.DefaultBucketSettings("cache")
	mc.Type = engine.Memcached
	if _, err := eng.CreateBucket(ctx, mc); err != nil {
		t.Fatal(err)
	}
	svc, err := search.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Auth: users, Search: svc}))
	defer srv.Close()
	do := func(method, path, body string, wantStatus int) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth(adminUser, adminPass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil || resp.StatusCode != wantStatus {
			t.Fatalf("%s %s: %d %s, want %d and a JSON object", method, path, resp.StatusCode, raw, wantStatus)
		}
		return m
	}
	m := do(http.MethodPut, "/api/index/idx", `{"type":"fulltext-index","name":"idx","sourceType":"couchbase","sourceName":"default","params":{"mapping":{}}}`, http.StatusOK)
	if m["status"] != "ok" || m["name"] != "idx" || m["uuid"] == "" || m["uuid"] == nil {
		t.Fatalf("put: %v", m)
	}
	if _, err := b.DefaultCollection().Upsert(ctx, "a", []byte(`{"x":"hello world"}`), nil); err != nil {
		t.Fatal(err)
	}
	m = do(http.MethodGet, "/api/index/idx", "", http.StatusOK)
	if def, _ := m["indexDef"].(map[string]any); m["status"] != "ok" || def["sourceName"] != "default" || def["type"] != "fulltext-index" {
		t.Fatalf("get: %v", m)
	}
	m = do(http.MethodGet, "/api/index", "", http.StatusOK)
	if defs, _ := m["indexDefs"].(map[string]any)["indexDefs"].(map[string]any); m["status"] != "ok" || len(defs) != 1 || defs["idx"] == nil {
		t.Fatalf("list: %v", m)
	}
	m = do(http.MethodPost, "/api/index/idx/query", `{"query":{"match":"hello"},"ctl":{"consistency":{"level":"at_plus"}}}`, http.StatusOK)
	if m["total_hits"] != 1.0 {
		t.Fatalf("query: %v", m)
	}
	m = do(http.MethodGet, "/api/index/idx/count", "", http.StatusOK)
	if m["status"] != "ok" || m["count"] != 1.0 {
		t.Fatalf("count: %v", m)
	}
	m = do(http.MethodGet, "/api/stats/index/idx", "", http.StatusOK)
	if m["default:idx:doc_count"] != 1.0 || m["default:idx:total_queries"] != 1.0 {
		t.Fatalf("stats: %v", m)
	}
	m = do(http.MethodDelete, "/api/index/idx", "", http.StatusOK)
	if m["status"] != "ok" || m["uuid"] == "" {
		t.Fatalf("delete: %v", m)
	}

	for _, c := range []struct {
		method, path, body string
		status             int
		reason             string // a part of the error
	}{
		// A missing index is cbft's 400 saying "index not found" (the
		// SDKs' ErrIndexNotFound), by every route.
		{http.MethodGet, "/api/index/idx", "", http.StatusBadRequest, "index not found: index idx"},
		{http.MethodGet, "/api/bucket/default/scope/_default/index/idx", "", http.StatusBadRequest, "index not found: index idx not found in bucket default"},
		{http.MethodDelete, "/api/index/idx", "", http.StatusBadRequest, "index not found: index idx"},
		{http.MethodGet, "/api/index/idx/count", "", http.StatusBadRequest, "index not found: index idx"},
		{http.MethodPost, "/api/index/idx/query", `{"query":{"match":"x"}}`, http.StatusBadRequest, "index not found: index idx"},
		{http.MethodPost, "/api/bucket/default/scope/_default/index/idx/query", `{"query":{"match":"x"}}`, http.StatusBadRequest, "index not found: index idx not found in bucket default"},
		{http.MethodPut, "/api/index/x", `{}`, http.StatusBadRequest, "sourceName (the bucket) is required"},
		{http.MethodPut, "/api/index/x", `{"params":{"mapping":{"types":1}},"sourceName":"default"}`, http.StatusBadRequest, "invalid index definition"},
		{http.MethodPut, "/api/index/x", `{"sourceName":"cache"}`, http.StatusBadRequest, "this bucket type has no search indexes"},
		{http.MethodPut, "/api/index/y", `{"sourceName":"default"}`, http.StatusOK, ""},
		{http.MethodPost, "/api/index/y/query", `{"query":{"bad":1}}`, http.StatusBadRequest, "invalid search request"},
		{http.MethodPost, "/api/index/y/query", `{"query":{"match":"x"},"size":20000}`, http.StatusBadRequest, "over the limit of 10000"},
	} {
		m := do(c.method, c.path, c.body, c.status)
		if c.status == http.StatusOK {
			continue
		}
		if e, _ := m["error"].(string); m["status"] != "fail" || !strings.Contains(e, c.reason) || strings.HasPrefix(e, "search: ") {
			t.Errorf("%s %s: %v, want status fail and an error saying %q", c.method, c.path, m, c.reason)
		}
	}
}

// searchFront is the search REST API through the whole HTTP front door: an
// engine with buckets (8 partitions, a fake clock), a search service on it,
// and users (the administrator Administrator / password, and each of
// roles' users with its roles and the password password1), audited in al
// unless nil. do makes a request as one of them (a JSON body) and returns
// the answer's status and body. All of it ends with the test.
func searchFront(t *testing.T, al *audit.Log, buckets []string, roles map[string]string) (*engine.Engine, func(user, method, path, body string) (int, string)) {
	t.Helper()
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(1_700_000_000), NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	for _, name := range buckets {
		if _, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings(name)); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := search.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: "Administrator", AdminPassword: "password",
		Argon2: cheapArgon2, ScramIterations: cheapScram})
	if err != nil {
		t.Fatal(err)
	}
	for id, role := range roles {
		r, err := auth.ParseRoles(role)
		if err != nil {
			t.Fatal(err)
		}
		if err := users.PutUser(id, "", "password1", r); err != nil {
			t.Fatal(err)
		}
	}
	o := &httpapi.Options{Auth: users, Search: svc}
	if al != nil {
		o.Audit = al
	}
	srv := httptest.NewServer(httpapi.New(eng, o))
	t.Cleanup(srv.Close)
	return eng, func(user, method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		pass := "password1"
		if user == "Administrator" {
			pass = "password"
		}
		req.SetBasicAuth(user, pass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
}
