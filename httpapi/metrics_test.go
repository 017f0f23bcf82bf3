package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/search"
	"github.com/mayflydb/mayfly/views"
)

// fakeSearch is a search service with one index, "idx", on bucket
// "default", whose figures the test sets.
type fakeSearch struct{}

var errNoIndex = errors.New("no such index")

func (fakeSearch) SourceBucket([]byte) (string, error) { return "", errNoIndex }
func (fakeSearch) PutIndex(context.Context, string, string, []byte) (*search.IndexDef, error) {
	return nil, errNoIndex
}
func (fakeSearch) CheckIndex(context.Context, string, string, []byte) (*search.IndexDef, error) {
	return nil, errNoIndex
}
func (fakeSearch) GetIndex(context.Context, string, string) (*search.IndexDef, error) {
	return nil, errNoIndex
}
func (fakeSearch) ListIndexes(context.Context, string) ([]*search.IndexDef, error) { return nil, nil }
func (fakeSearch) DeleteIndex(context.Context, string, string) error               { return errNoIndex }
func (fakeSearch) IndexScope(context.Context, string, string) (string, error)      { return "", errNoIndex }
func (fakeSearch) DefScope(string, string, []byte) (string, error)                 { return "", errNoIndex }
func (fakeSearch) Query(context.Context, string, string, []byte) ([]byte, error) {
	return []byte(`{"status":{"total":1},"hits":[],"total_hits":0}`), nil
}
func (fakeSearch) Count(context.Context, string, string) (uint64, error) { return 0, errNoIndex }
func (fakeSearch) IndexStats(context.Context, string, string) (search.Stats, error) {
	return search.Stats{}, errNoIndex
}
func (fakeSearch) FindIndex(name string) (string, error) {
	if name == "idx" {
		return "default", nil
	}
	return "", errNoIndex
}
func (fakeSearch) Stats(_ context.Context, bucket string) ([]search.Stats, error) {
	if bucket != "default" {
		return nil, nil
	}
	return []search.Stats{{Name: "idx", Bucket: "default", DocCount: 7, SeqsBehind: 3, DiskBytes: 4096,
		Queries: 5, QueryErrors: 1, DocsIndexed: 9, DocsDeleted: 2, Batches: 4, IndexErrors: 0, Rollbacks: 0}}, nil
}

// /metrics is a superset of the bucket statistics (`mayfly stats`): every
// name the stats endpoint gives appears there, under its metric name,
// plus per-route HTTP counts and latencies, view index figures and the Go
// runtime's.
func TestMetricsHoldEveryStat(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := views.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	pm := pager.New(eng, nil)
	users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Views: vs, Pager: pm, Auth: users, Search: fakeSearch{}}))
	defer func() { srv.Close(); pm.Close(ctx); vs.Close(); eng.Close() }()
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.SetBasicAuth(adminUser, adminPass)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			sb.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, sb.String()
	}
	for _, k := range []string{"a", "b"} {
		if _, err := b.DefaultCollection().Upsert(ctx, k, []byte(`{"n":1}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if st, body := do("PUT", "/default/_design/d", `{"views":{"all":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`); st != 201 {
		t.Fatalf("PUT ddoc: %d %s", st, body)
	}
	if st, body := do("GET", "/default/_design/d/_view/all?stale=false", ""); st != 200 || !strings.Contains(body, `"total_rows":2`) {
		t.Fatalf("view: %d %s", st, body)
	}
	do("GET", "/default/docs/a", "")
	do("GET", "/default/docs/b", "")
	do("GET", "/default/docs/nope", "")
	do("GET", "/nowhere/at/all", "")
	st, body := do("GET", "/pools/default/buckets/default/stats", "")
	var stats map[string]int64
	if err := json.Unmarshal([]byte(body), &stats); st != 200 || err != nil {
		t.Fatalf("stats: %d %s", st, body)
	}
	st, metrics := do("GET", "/metrics", "")
	if st != 200 {
		t.Fatalf("metrics: %d %s", st, metrics)
	}
	names := make([]string, 0, len(stats))
	for n := range stats {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) < 20 {
		t.Fatalf("too few stats: %v", names)
	}
	for _, n := range names {
		series, ok := httpapi.MetricOf(n)
		if !ok {
			t.Errorf("stat %s has no metric", n)
			continue
		}
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series.Name) + `\{[^}]*bucket="default"[^}]*\} `)
		line := re.FindString(metrics)
		if line == "" {
			t.Errorf("stat %s: no %s{bucket=\"default\"} in /metrics", n, series.Name)
			continue
		}
		for k, v := range series.Labels {
			if !strings.Contains(line, k+`="`+v+`"`) && !strings.Contains(metrics, series.Name+`{bucket="default",`+k+`="`+v+`"}`) {
				t.Errorf("stat %s: no %s{%s=%q} in /metrics", n, series.Name, k, v)
			}
		}
	}
	for _, want := range []string{
		`mayfly_fts_doc_count{bucket="default",index="idx"} 7`,
		`mayfly_fts_num_mutations_to_index{bucket="default",index="idx"} 3`,
		`mayfly_fts_total_queries_error{bucket="default",index="idx"} 1`,
		`mayfly_curr_items{bucket="default"} 2`,
		`mayfly_view_rows{bucket="default",ddoc="_design/d",view="all"} 2`,
		`mayfly_view_pending_changes{bucket="default",ddoc="_design/d"} 0`,
		`mayfly_view_documents_mapped_total{bucket="default",ddoc="_design/d"} 2`,
		`mayfly_http_requests_total{code="200",method="GET",route="/{bucket}/docs/{key:.+}"} 2`,
		`mayfly_http_requests_total{code="404",method="GET",route="/{bucket}/docs/{key:.+}"} 1`,
		`mayfly_http_requests_total{code="200",method="GET",route="/pools/default/buckets/{bucket}/stats"} 1`,
		`mayfly_http_requests_total{code="404",method="GET",route="none"} 1`,
		`mayfly_http_request_duration_seconds_count{method="GET",route="/{bucket}/docs/{key:.+}"} 3`,
		`mayfly_http_request_duration_seconds_bucket{method="GET",route="/{bucket}/_design/{ddoc}/_view/{view}",le="+Inf"} 1`,
		"go_goroutines ",
		"go_memstats_heap_alloc_bytes ",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, `route="/default/docs/a"`) {
		t.Error("a raw path is a route label")
	}
}
