package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mayflydb/mayfly/httpapi"
)

// Every answer carries X-Content-Type-Options: nosniff, as the README
// says, including the ones given before a request reaches the API's
// handlers: a refusal at the door (a Host the server does not answer for, a
// path with a dot segment) and the views and search ports' own answers (a
// path of another service, the search port's ping). A review found those
// left it out: the header was set only after the door's first checks, and
// the service ports answer some requests without the API's door.
func TestEveryAnswerForbidsTypeSniffing(t *testing.T) {
	f := newFixture(t)
	views := httptest.NewServer(httpapi.Only(f.srv.Config.Handler, httpapi.ViewsPort))
	defer views.Close()
	search := httptest.NewServer(httpapi.Only(f.srv.Config.Handler, httpapi.SearchPort))
	defer search.Close()
	for _, tc := range []struct {
		what, base, path, host string
	}{
		{"a host refused", f.srv.URL, "/default/docs/k", "evil.example"},
		{"a dot segment refused", f.srv.URL, "/default/docs/./k", ""},
		{"another service's path on the views port", views.URL, "/default/docs/k", ""},
		{"the search port's ping", search.URL, "/api/ping", ""},
	} {
		req, err := http.NewRequest(http.MethodGet, tc.base+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s (GET %s, %d): X-Content-Type-Options %q, want nosniff", tc.what, tc.path, resp.StatusCode, got)
		}
	}
}
