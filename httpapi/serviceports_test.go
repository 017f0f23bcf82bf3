package httpapi_test

import (
	"net/http/httptest"
	"testing"

	"github.com/mayflydb/mayfly/httpapi"
)

// The views and search ports answer their service's paths with the API's
// handlers (and its authentication) and nothing else.
func TestServicePorts(t *testing.T) {
	f := newFixture(t)
	views := httptest.NewServer(httpapi.Only(f.srv.Config.Handler, httpapi.ViewsPort))
	defer views.Close()
	search := httptest.NewServer(httpapi.Only(f.srv.Config.Handler, httpapi.SearchPort))
	defer search.Close()
	ddoc := `{"views":{"all":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`
	on := func(base string) *fixture { g := *f; g.srv = &httptest.Server{URL: base}; return &g }
	v, s := on(views.URL), on(search.URL)

	if st, _, body := v.do("PUT", "/default/_design/d", "application/json", ddoc); st != 201 {
		t.Fatalf("PUT a design document on the views port: %d %s", st, body)
	}
	if st, _, body := v.do("GET", "/default/_design/d/_view/all?stale=false", "", ""); st != 200 {
		t.Fatalf("a view query on the views port: %d %s", st, body)
	}
	if st, _, body := v.doAs("", "", "GET", "/default/_design/d", "", ""); st != 401 {
		t.Fatalf("the views port without credentials: %d %s", st, body)
	}
	for _, path := range []string{"/pools/default", "/default/docs/k", "/api/index", "/default/_design"} {
		if st, _, body := v.do("GET", path, "", ""); st != 404 {
			t.Fatalf("GET %s on the views port: %d %s", path, st, body)
		}
	}
	if st, _, body := s.doAs("", "", "GET", "/api/ping", "", ""); st != 200 || body != "" {
		t.Fatalf("GET /api/ping on the search port: %d %q", st, body)
	}
	if st, _, body := f.do("GET", "/api/ping", "", ""); st != 404 {
		t.Fatalf("GET /api/ping on the management port: %d %s", st, body)
	}
	for _, path := range []string{"/pools/default", "/default/_design/d", "/"} {
		if st, _, body := s.do("GET", path, "", ""); st != 404 {
			t.Fatalf("GET %s on the search port: %d %s", path, st, body)
		}
	}
}
