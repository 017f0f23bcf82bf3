package httpapi_test

import (
	"strings"
	"testing"
)

// TestFormEncodedDocumentTakesTheDocumentLimit: a document written with a
// form content type (what curl -d sends, as the README's examples do) may
// be as large as any document (20 MiB), not the 1 MiB of a settings form;
// a settings endpoint keeps its own limit.
func TestFormEncodedDocumentTakesTheDocumentLimit(t *testing.T) {
	f := newFixture(t)
	const form = "application/x-www-form-urlencoded"
	value := `{"pad":"` + strings.Repeat("x", 2<<20) + `"}`
	if st, _, body := f.do("PUT", "/default/docs/big", form, value); st != 201 {
		t.Fatalf("a 2 MiB document sent form-encoded: %d %.200s", st, body)
	}
	if st, _, body := f.do("GET", "/default/docs/big", "", ""); st != 200 || body != value {
		t.Fatalf("reading it back: %d, %d bytes", st, len(body))
	}
	if st, _, body := f.do("PUT", "/default/docs/big2", "text/plain", value); st != 201 {
		t.Fatalf("a 2 MiB document sent as text/plain: %d %.200s", st, body)
	}
	st, _, body := f.do("POST", "/pools/default/buckets/default", form, "maxTTL=60&pad="+strings.Repeat("x", 2<<20))
	if st != 413 || jsonOf(t, body)["error"] != "too_large" {
		t.Fatalf("a 2 MiB settings form: %d %.200s", st, body)
	}
}
