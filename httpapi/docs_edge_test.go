package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// HEAD answers like GET, headers and status, without a body.
func TestHeadDocument(t *testing.T) {
	f := newFixture(t)
	if status, _, body := f.do(http.MethodPut, "/default/docs/k", "", `{"x":1}`); status != http.StatusCreated {
		t.Fatalf("PUT: %d %s", status, body)
	}
	status, h, body := f.do(http.MethodHead, "/default/docs/k", "", "")
	if status != http.StatusOK || h.Get("X-Mayfly-Cas") == "" || body != "" {
		t.Errorf("HEAD of a document: %d, cas %q, body %q", status, h.Get("X-Mayfly-Cas"), body)
	}
	if status, _, body := f.do(http.MethodHead, "/default/docs/missing", "", ""); status != http.StatusNotFound || body != "" {
		t.Errorf("HEAD of a missing document: %d %q", status, body)
	}
}

// A body declared as application/json must be JSON (400 saying where it
// breaks); without that header non-JSON is stored as a binary document.
func TestDeclaredJSONMustBeJSON(t *testing.T) {
	f := newFixture(t)
	status, _, body := f.do(http.MethodPut, "/default/docs/bad", "application/json", `{bad`)
	if status != http.StatusBadRequest || !strings.Contains(body, "at byte") {
		t.Errorf("invalid JSON declared as JSON: %d %s", status, body)
	}
	if status, _, _ := f.do(http.MethodGet, "/default/docs/bad", "", ""); status != http.StatusNotFound {
		t.Errorf("the refused document was stored: %d", status)
	}
	if status, _, body := f.do(http.MethodPut, "/default/docs/raw", "", `{bad`); status != http.StatusCreated {
		t.Errorf("non-JSON without a JSON content type: %d %s", status, body)
	}
	if _, _, body := f.do(http.MethodGet, "/default/docs/raw?meta=true", "", ""); !strings.Contains(body, `"base64"`) {
		t.Errorf("non-JSON not stored as binary: %s", body)
	}
	if status, _, body := f.do(http.MethodPut, "/default/docs/ok", "application/json; charset=utf-8", `{"a":1}`); status != http.StatusCreated {
		t.Errorf("valid JSON: %d %s", status, body)
	}
}
