package httpapi

import (
	"net/http"
	"strings"

	"github.com/gorilla/mux"
)

// viewRouter routes a view query (GET or POST /{bucket}/_design/{ddoc}/_view/{view})
// itself and hands every other request to the mux router. The route and its
// handler are mux's own; what the shortcut saves is mux's plumbing, which
// for the hottest read of the API cost more than parsing the query: two
// copies of the request (mux keeps its variables and its route in the
// request's context, and each context value is a copy), a map of the
// variables, and the middleware chain built again for every request. Here
// the variables go into the request's routeLabel, set once by instrument,
// and the chain is built once.
type viewRouter struct {
	mux  *mux.Router
	view http.Handler // the mux route's middleware (admit) and handler
}

func (v *viewRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodPost {
		if vars, ok := splitViewPath(r.URL.EscapedPath()); ok {
			if rl, ok := r.Context().Value(routeKey{}).(*routeLabel); ok {
				rl.template, rl.viewVars, rl.viewRouted = viewRoute, vars, true // markRoute's part
				v.view.ServeHTTP(w, r)
				return
			}
		}
	}
	v.mux.ServeHTTP(w, r)
}

// splitViewPath returns the bucket, design document and view of a view
// query's path (escaped, as mux matches it: UseEncodedPath), exactly where
// mux's route for viewRoute matches it: three non-empty segments, none
// holding "/", around the literal "_design" and "_view" segments.
func splitViewPath(p string) (vars [3]string, ok bool) {
	rest, ok := strings.CutPrefix(p, "/")
	if !ok {
		return vars, false
	}
	var found bool
	if vars[0], rest, found = strings.Cut(rest, "/"); !found || vars[0] == "" {
		return vars, false
	}
	if rest, ok = strings.CutPrefix(rest, "_design/"); !ok {
		return vars, false
	}
	if vars[1], rest, found = strings.Cut(rest, "/"); !found || vars[1] == "" {
		return vars, false
	}
	if vars[2], ok = strings.CutPrefix(rest, "_view/"); !ok || vars[2] == "" || strings.Contains(vars[2], "/") {
		return vars, false
	}
	return vars, true
}

// routeVar returns the path variable name of the route r matched, as sent
// (escaped), "" when it has none: from the routeLabel when viewRouter routed
// r, else from mux.
func routeVar(r *http.Request, name string) string {
	if rl, ok := r.Context().Value(routeKey{}).(*routeLabel); ok && rl.viewRouted {
		switch name {
		case "bucket":
			return rl.viewVars[0]
		case "ddoc":
			return rl.viewVars[1]
		case "view":
			return rl.viewVars[2]
		}
		return ""
	}
	return mux.Vars(r)[name]
}
