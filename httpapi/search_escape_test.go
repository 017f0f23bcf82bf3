package httpapi_test

import (
	"net/http"
	"testing"
)

// The search API's scoped paths check the fts role on the bucket the
// request works on: the path's {bucket} unescaped, as the handler reads
// it. A bucket name may hold "%" (Couchbase allows it), so a searcher of
// bucket "%41" must not reach bucket "A"'s indexes through
// /api/bucket/%41/..., and must reach its own through /api/bucket/%2541/....
func TestSearchScopedPathChecksTheUnescapedBucket(t *testing.T) {
	_, do := searchFront(t, nil, []string{"A", "%41"}, map[string]string{"pct": "fts_searcher[%41]"})
	def := `{"type":"fulltext-index","params":{}}`
	if status, body := do("Administrator", http.MethodPut, "/api/bucket/A/scope/_default/index/secret", def); status != http.StatusOK {
		t.Fatalf("create bucket A's index: %d %s", status, body)
	}
	if status, body := do("Administrator", http.MethodPut, "/api/bucket/%2541/scope/_default/index/mine", def); status != http.StatusOK {
		t.Fatalf("create bucket %%41's index: %d %s", status, body)
	}
	if status, body := do("pct", http.MethodGet, "/api/bucket/%41/scope/_default/index", ""); status != http.StatusForbidden {
		t.Errorf("fts_searcher[%%41] listed bucket A's indexes: %d %s", status, body)
	}
	if status, body := do("pct", http.MethodGet, "/api/bucket/%41/scope/_default/index/secret", ""); status != http.StatusForbidden {
		t.Errorf("fts_searcher[%%41] read bucket A's index: %d %s", status, body)
	}
	if status, body := do("pct", http.MethodGet, "/api/bucket/%2541/scope/_default/index/mine", ""); status != http.StatusOK {
		t.Errorf("fts_searcher[%%41] reading its own bucket's index: %d %s", status, body)
	}
}
