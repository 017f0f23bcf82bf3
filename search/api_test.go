package search_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// TestJSONAPI: the REST-shaped functions answer Couchbase's shapes, and
// their errors carry the HTTP status to answer.
func TestJSONAPI(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	ctx := context.Background()
	s := e.svc
	must := func(b []byte, err error) map[string]any {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := must(s.PutIndexJSON(ctx, "", "idx", []byte(`{"type":"fulltext-index","name":"idx","sourceType":"couchbase","sourceName":"default","params":{"mapping":{}}}`)))
	if m["status"] != "ok" || m["name"] != "idx" || m["uuid"] == "" {
		t.Fatalf("put: %v", m)
	}
	e.put("a", `{"x":"hello world"}`, 0)
	m = must(s.GetIndexJSON(ctx, "", "idx"))
	if def := m["indexDef"].(map[string]any); def["sourceName"] != "default" || def["type"] != "fulltext-index" {
		t.Fatalf("get: %v", m)
	}
	m = must(s.ListIndexesJSON(ctx, ""))
	if defs := m["indexDefs"].(map[string]any)["indexDefs"].(map[string]any); len(defs) != 1 || defs["idx"] == nil {
		t.Fatalf("list: %v", m)
	}
	m = must(s.QueryJSON(ctx, "", "idx", []byte(`{"query":{"match":"hello"},"ctl":{"consistency":{"level":"at_plus"}}}`)))
	if m["total_hits"] != 1.0 {
		t.Fatalf("query: %v", m)
	}
	m = must(s.CountJSON(ctx, "", "idx"))
	if m["count"] != 1.0 {
		t.Fatalf("count: %v", m)
	}
	m = must(s.StatsJSON(ctx, "", "idx"))
	if m["default:idx:doc_count"] != 1.0 || m["default:idx:total_queries"] != 1.0 {
		t.Fatalf("stats: %v", m)
	}
	m = must(s.DeleteIndexJSON(ctx, "", "idx"))
	if m["status"] != "ok" {
		t.Fatalf("delete: %v", m)
	}

	type httpStatus interface{ HTTPStatus() int }
	for _, c := range []struct {
		err  error
		want int
	}{
		{func() error { _, err := s.GetIndexJSON(ctx, "", "idx"); return err }(), 404},
		{func() error { _, err := s.PutIndexJSON(ctx, "", "x", []byte(`{}`)); return err }(), 400},
		{func() error {
			_, err := s.PutIndexJSON(ctx, "", "x", []byte(`{"params":{"mapping":{"types":1}},"sourceName":"default"}`))
			return err
		}(), 400},
		{func() error {
			s.PutIndex(ctx, "default", "y", []byte(`{}`))
			_, err := s.QueryJSON(ctx, "", "y", []byte(`{"query":{"bad":1}}`))
			return err
		}(), 400},
	} {
		var hs httpStatus
		if !errors.As(c.err, &hs) || hs.HTTPStatus() != c.want {
			t.Errorf("%v: want status %d", c.err, c.want)
		}
	}
	_, err := s.PutIndexJSON(ctx, "", "z", []byte(`{"sourceName":"nobucket"}`))
	// A source bucket that does not exist is a 400, as cbft answers, with
	// the "non existent bucket" Couchbase's SDKs read as SourceNotFound.
	var hs httpStatus
	if !errors.Is(err, engine.ErrBucketNotFound) || !strings.Contains(err.Error(), `"nobucket": non existent bucket`) ||
		!errors.As(err, &hs) || hs.HTTPStatus() != 400 {
		t.Errorf("missing bucket: %v", err)
	}
}

// restAPI is httpapi.SearchService, repeated here (search does not import
// httpapi): *Service must implement it.
type restAPI interface {
	PutIndexJSON(ctx context.Context, bucket, name string, def []byte) ([]byte, error)
	GetIndexJSON(ctx context.Context, bucket, name string) ([]byte, error)
	ListIndexesJSON(ctx context.Context, bucket string) ([]byte, error)
	DeleteIndexJSON(ctx context.Context, bucket, name string) ([]byte, error)
	QueryJSON(ctx context.Context, bucket, name string, req []byte) ([]byte, error)
	CountJSON(ctx context.Context, bucket, name string) ([]byte, error)
	StatsJSON(ctx context.Context, bucket, name string) ([]byte, error)
	BucketIndexStats(ctx context.Context, bucket string) (map[string]map[string]int64, error)
	FindIndex(name string) (string, error)
}

var _ restAPI = (*search.Service)(nil)
