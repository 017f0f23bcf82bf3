package httpapi_test

import (
	"net/http"
	"testing"
)

// Every answer of the API carries X-Content-Type-Options: nosniff, so that a
// browser never renders a document's bytes as a page of the console's
// origin: a binary value that looks like HTML is served as
// application/octet-stream and must stay a download. A review found the
// API's answers (unlike the console's files) did not say so.
func TestAnswersForbidTypeSniffing(t *testing.T) {
	f := newFixture(t)
	page := "<html><script>alert(1)</script></html>\xff"
	if st, _, body := f.do(http.MethodPut, "/default/docs/page", "application/octet-stream", page); st != http.StatusCreated {
		t.Fatalf("PUT: %d %s", st, body)
	}
	for _, path := range []string{"/default/docs/page", "/default/docs/missing", "/pools/default/buckets/default"} {
		_, h, _ := f.do(http.MethodGet, path, "", "")
		if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", path, got)
		}
	}
}
