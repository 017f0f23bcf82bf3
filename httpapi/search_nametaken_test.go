package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// Unscoped index names are unique across the buckets: a PUT creating, in bucket
// other, an index whose name bucket default's index has is refused with a
// 400 whose reason holds cbft's words "index with the same name already
// exists", which gocbcore's search error decoder (cbsearchx) turns into
// ErrIndexExists, and names the bucket that has it. (A review found the
// reason read `an index called "x" already exists in bucket default`, so
// SDKs raised a generic error.)
func TestSearchPutOfATakenNameSaysIndexExists(t *testing.T) {
	_, do := searchFront(t, nil, []string{"default", "other"}, nil)
	if status, body := do("Administrator", http.MethodPut, "/api/index/hotels", `{"type":"fulltext-index","sourceName":"default"}`); status != http.StatusOK {
		t.Fatalf("create: %d %s", status, body)
	}
	status, body := do("Administrator", http.MethodPut, "/api/index/hotels", `{"type":"fulltext-index","sourceName":"other"}`)
	if status != http.StatusBadRequest || !strings.Contains(body, "index with the same name already exists") || !strings.Contains(body, "default") {
		t.Errorf("PUT /api/index/hotels in bucket other: %d %s; want 400 saying \"index with the same name already exists\" (in default)", status, body)
	}
}
