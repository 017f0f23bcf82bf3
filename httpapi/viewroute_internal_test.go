package httpapi

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/gorilla/mux"

	"github.com/mayflydb/mayfly/engine"
)

// viewRouter takes exactly the requests mux's view route would match, with
// the same variables, so that routing a view query ahead of mux changes no
// answer: every other request (a trailing slash, an empty segment, a "/" of
// a segment sent as %2F or not, a HEAD) is mux's to answer as before.
func TestViewRouterMatchesMux(t *testing.T) {
	vr := testViewRouter(t)
	for _, path := range []string{
		"/default/_design/dd/_view/v",
		"/default/_design/dd/_view/v/",
		"/default/_design/dd/_view/",
		"/default/_design//_view/v",
		"//_design/dd/_view/v",
		"/default/_design/dd/_view/v/x",
		"/default/_design/dd/_view",
		"/default/_design/dd/_info",
		"/default/_design/dd",
		"/default/_Design/dd/_view/v",
		"/default/_design/dd/_VIEW/v",
		"/def%2Fault/_design/d%2Fd/_view/v%2F1",
		"/b%20x/_design/d%C3%A9/_view/%E2%82%AC",
		"/a/b/_design/dd/_view/v",
		"/default/_design/_design/_view/_view",
		"/default/docs/_design/dd/_view/v",
		"/pools/_design/dd/_view/v",
		"/pools/default/buckets/b/_design/_view/v",
		"default/_design/dd/_view/v",
		"/default/_design/dd/_view/v%00",
		"/default/_design/dd/_view/v\n",
		"/default/_design/dd/_view/\xff",
	} {
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodHead, http.MethodPut, http.MethodDelete, "get"} {
			checkViewRoute(t, vr, method, path)
		}
	}
}

func FuzzViewRouterMatchesMux(f *testing.F) {
	f.Add("GET", "/default/_design/dd/_view/v")
	f.Add("POST", "/b%2F/_design/d/_view/v/")
	f.Add("HEAD", "/b/_design//_view/v")
	vr := testViewRouter(f)
	f.Fuzz(func(t *testing.T, method, path string) {
		checkViewRoute(t, vr, method, path)
	})
}

func testViewRouter(t testing.TB) *viewRouter {
	t.Helper()
	eng, err := engine.Open(t.TempDir(), &engine.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	_, vr := newAPI(eng, nil)
	return vr
}

func checkViewRoute(t *testing.T, vr *viewRouter, method, path string) {
	t.Helper()
	u, err := url.Parse(path)
	if err != nil || u.Scheme != "" || u.Host != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return // not a request path
	}
	r := &http.Request{Method: method, URL: u, Header: http.Header{}}
	var m mux.RouteMatch
	byMux := vr.mux.Match(r, &m) && m.MatchErr == nil && m.Route != nil
	if byMux {
		tmpl, err := m.Route.GetPathTemplate()
		byMux = err == nil && tmpl == viewRoute
	}
	vars, ok := splitViewPath(r.URL.EscapedPath())
	ours := ok && (method == http.MethodGet || method == http.MethodPost)
	if ours != byMux {
		t.Fatalf("%s %q (escaped %q): viewRouter takes it: %v; mux's view route: %v", method, path, r.URL.EscapedPath(), ours, byMux)
	}
	if ours && (vars[0] != m.Vars["bucket"] || vars[1] != m.Vars["ddoc"] || vars[2] != m.Vars["view"]) {
		t.Fatalf("%s %q: variables %q, mux's %v", method, path, vars, m.Vars)
	}
}
