package httpapi_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/audit"
)

// A search index PUT or DELETE refused up front (a body that is not a
// definition, a bucket that does not exist, an index that is not there)
// writes nothing to the audit log, as the README says of every request
// refused up front; one that is done writes its intent, and nothing after
// it. A review found that the refused ones each wrote an intent and a
// failed follow-up.
func TestSearchIndexChangesRefusedUpFrontAreNotAudited(t *testing.T) {
	auditPath := filepath.Join(t.TempDir(), audit.FileName)
	al, err := audit.Open(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()
	_, do := searchFront(t, al, []string{"default"}, nil)
	records := func() []string {
		raw, err := os.ReadFile(auditPath)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for l := range strings.SplitSeq(string(raw), "\n") {
			if strings.Contains(l, `"action":"search.index.`) {
				out = append(out, l)
			}
		}
		return out
	}
	scoped := "/api/bucket/default/scope/_default/index/"
	for _, req := range []struct{ what, method, path, body string }{
		{"not JSON", http.MethodPut, "/api/index/idx", `{"type":`},
		{"not JSON, scoped", http.MethodPut, scoped + "idx", `{"type":`},
		{"not a definition", http.MethodPut, "/api/index/idx", `{"type":"fulltext-index","sourceName":"default","params":{"mapping":7}}`},
		{"no such bucket", http.MethodPut, "/api/index/idx", `{"type":"fulltext-index","sourceType":"couchbase","sourceName":"nosuch"}`},
		{"no such index", http.MethodDelete, "/api/index/nosuch", ""},
		{"no such index, scoped", http.MethodDelete, scoped + "nosuch", ""},
	} {
		status, body := do("Administrator", req.method, req.path, req.body)
		if status < 400 {
			t.Fatalf("%s: %d %s, want it refused", req.what, status, body)
		}
		if got := records(); len(got) != 0 {
			t.Fatalf("%s, refused up front (%d): audit records %q, want none", req.what, status, got)
		}
	}
	def := `{"type":"fulltext-index","sourceType":"couchbase","sourceName":"default"}`
	if status, body := do("Administrator", http.MethodPut, "/api/index/idx", def); status != http.StatusOK {
		t.Fatalf("create: %d %s", status, body)
	}
	if status, body := do("Administrator", http.MethodDelete, "/api/index/idx", ""); status != http.StatusOK {
		t.Fatalf("delete: %d %s", status, body)
	}
	got := records()
	if len(got) != 2 || !strings.Contains(got[0], `"action":"search.index.put"`) || !strings.Contains(got[0], `"bucket":"default"`) ||
		!strings.Contains(got[1], `"action":"search.index.delete"`) || strings.Contains(strings.Join(got, ""), `"outcome"`) {
		t.Errorf("audit records of a create and a delete: %q, want their two intents", got)
	}
}
