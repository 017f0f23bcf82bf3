package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// A query or count of an alias one of whose targets was deleted is
// answered as the README says: a 400 whose reason says "index not found"
// (the words gocb and the other SDKs match to raise their index-not-found
// error) and names the missing target. (A review found the reason read
// "index alias A: target T: not found: index T not found in bucket B",
// which holds no "index not found", so SDKs raised a generic error.)
func TestSearchAliasMissingTargetSaysIndexNotFound(t *testing.T) {
	_, do := searchFront(t, nil, []string{"default"}, nil)
	for _, name := range []string{"one", "two"} {
		if status, body := do("Administrator", http.MethodPut, "/api/index/"+name, `{"type":"fulltext-index","sourceName":"default"}`); status != http.StatusOK {
			t.Fatalf("create %s: %d %s", name, status, body)
		}
	}
	if status, body := do("Administrator", http.MethodPut, "/api/index/both", `{"type":"fulltext-alias","params":{"targets":{"one":{},"two":{}}}}`); status != http.StatusOK {
		t.Fatalf("create the alias: %d %s", status, body)
	}
	if status, body := do("Administrator", http.MethodDelete, "/api/index/two", ""); status != http.StatusOK {
		t.Fatalf("delete a target: %d %s", status, body)
	}
	for _, r := range []struct{ method, path, body string }{
		{http.MethodPost, "/api/index/both/query", `{"query":{"match_all":{}}}`},
		{http.MethodGet, "/api/index/both/count", ""},
		{http.MethodPost, "/api/bucket/default/scope/_default/index/both/query", `{"query":{"match_all":{}}}`},
	} {
		status, body := do("Administrator", r.method, r.path, r.body)
		if status != http.StatusBadRequest || !strings.Contains(body, "index not found") || !strings.Contains(body, "two") {
			t.Errorf("%s %s with target two deleted: %d %s; want 400 saying \"index not found\" and naming two", r.method, r.path, status, body)
		}
	}
}
