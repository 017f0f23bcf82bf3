package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// A document GET with ?touch= changes the document (its expiry), so a
// browser page of another site cannot have it done: like a POST, PUT,
// DELETE or PATCH, such a GET (or HEAD) sent cross-site (Sec-Fetch-Site:
// cross-site, or an Origin or Referer of another site) is refused 403 and
// the document keeps its expiry. Else an <img src=".../docs/k?touch=1"> on
// any page expires the document for a browser holding the user's Basic
// credentials. (A review found the origin checks skipped every GET, so the
// touch went through.)
func TestCrossSiteGetAndTouchIsRefused(t *testing.T) {
	f := newFixture(t)
	if st, _, body := f.do("PUT", "/default/docs/keep", "application/json", `{"v":1}`); st/100 != 2 {
		t.Fatalf("PUT: %d %s", st, body)
	}
	for _, c := range []struct {
		name   string
		method string
		header map[string]string
	}{
		{"Sec-Fetch-Site cross-site", http.MethodGet, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"evil Referer", http.MethodGet, map[string]string{"Referer": "http://evil.example/page"}},
		{"Sec-Fetch-Site cross-site", http.MethodHead, map[string]string{"Sec-Fetch-Site": "cross-site"}},
	} {
		st, _, body := f.doWith(c.method, "/default/docs/keep?touch=1", "", "", func(r *http.Request) {
			r.SetBasicAuth(adminUser, adminPass)
			for k, v := range c.header {
				r.Header.Set(k, v)
			}
		})
		if st != http.StatusForbidden {
			t.Errorf("%s %s: %d %s, want 403", c.method, c.name, st, body)
		}
	}
	st, h, body := f.do("GET", "/default/docs/keep", "", "")
	if st != 200 || h.Get("X-Mayfly-Expiration") != "0" || !strings.Contains(body, `"v":1`) {
		t.Errorf("after the cross-site touches: %d expiration %q %s; want the document with no expiry", st, h.Get("X-Mayfly-Expiration"), body)
	}
	// The same GET from no browser (no Origin, Referer or Sec-Fetch-Site)
	// touches as before.
	if st, _, body := f.do("GET", "/default/docs/keep?touch=3600", "", ""); st != 200 {
		t.Errorf("touch without browser headers: %d %s", st, body)
	}
}
