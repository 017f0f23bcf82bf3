package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/mux"
	"github.com/mayflydb/mayfly/engine"
)

// fakeSearch records calls and answers as told. (The real service is tested
// through the same JSON functions in package search; importing it here
// would load bleve, whose workers goleak counts.)
type fakeSearch struct {
	calls []string
	err   error
}

func (f *fakeSearch) do(call string) ([]byte, error) {
	f.calls = append(f.calls, call)
	if f.err != nil {
		return nil, f.err
	}
	return json.Marshal(map[string]string{"status": "ok", "call": call})
}

func (f *fakeSearch) PutIndexJSON(_ context.Context, bucket, name string, def []byte) ([]byte, error) {
	return f.do(fmt.Sprintf("put %q %s %s", bucket, name, def))
}
func (f *fakeSearch) GetIndexJSON(_ context.Context, bucket, name string) ([]byte, error) {
	return f.do(fmt.Sprintf("get %q %s", bucket, name))
}
func (f *fakeSearch) ListIndexesJSON(_ context.Context, bucket string) ([]byte, error) {
	return f.do(fmt.Sprintf("list %q", bucket))
}
func (f *fakeSearch) DeleteIndexJSON(_ context.Context, bucket, name string) ([]byte, error) {
	return f.do(fmt.Sprintf("delete %q %s", bucket, name))
}
func (f *fakeSearch) QueryJSON(_ context.Context, bucket, name string, req []byte) ([]byte, error) {
	return f.do(fmt.Sprintf("query %q %s %s", bucket, name, req))
}
func (f *fakeSearch) CountJSON(_ context.Context, bucket, name string) ([]byte, error) {
	return f.do(fmt.Sprintf("count %q %s", bucket, name))
}
func (f *fakeSearch) StatsJSON(_ context.Context, bucket, name string) ([]byte, error) {
	return f.do(fmt.Sprintf("stats %q %s", bucket, name))
}

type statusErr int

func (e statusErr) Error() string   { return fmt.Sprintf("status %d", int(e)) }
func (e statusErr) HTTPStatus() int { return int(e) }

func TestSearchRoutes(t *testing.T) {
	f := &fakeSearch{}
	r := mux.NewRouter()
	r.UseEncodedPath()
	(&server{}).searchRoutes(r, f)
	srv := httptest.NewServer(r)
	defer srv.Close()
	do := func(method, path, body string) (int, map[string]string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: %s", method, path, b)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: content type %q", method, path, ct)
		}
		return resp.StatusCode, m
	}
	for _, c := range []struct{ method, path, body, call string }{
		{"GET", "/api/index", "", `list ""`},
		{"GET", "/api/index/idx", "", `get "" idx`},
		{"PUT", "/api/index/idx", `{"sourceName":"default"}`, `put "" idx {"sourceName":"default"}`},
		{"DELETE", "/api/index/idx", "", `delete "" idx`},
		{"POST", "/api/index/idx/query", `{"query":{"match_all":{}}}`, `query "" idx {"query":{"match_all":{}}}`},
		{"GET", "/api/index/idx/count", "", `count "" idx`},
		{"GET", "/api/stats/index/idx", "", `stats "" idx`},
		{"GET", "/api/index/a%2Db", "", `get "" a-b`},
	} {
		status, m := do(c.method, c.path, c.body)
		if status != 200 || m["call"] != c.call {
			t.Errorf("%s %s: %d %v, want call %s", c.method, c.path, status, m, c.call)
		}
	}
	for _, c := range []struct {
		err  error
		want int
	}{
		{statusErr(400), 400},
		{fmt.Errorf("wrapped: %w", statusErr(404)), 404},
		{engine.ErrBucketNotFound, 404},
		{context.DeadlineExceeded, 503},
		{fmt.Errorf("anything"), 500},
	} {
		f.err = c.err
		status, m := do("POST", "/api/index/idx/query", `{}`)
		if status != c.want || m["status"] != "fail" || m["error"] == "" {
			t.Errorf("%v: %d %v, want %d", c.err, status, m, c.want)
		}
	}
}
