package httpapi

import (
	"net/http"
	"strings"
)

// ServicePort is one of the ports Couchbase serves a part of its REST API
// on besides the management port (8091), which Mayfly serves too, for SDKs
// and tools that go there: they find them in the cluster configuration's
// nodesExt (capi, fts).
type ServicePort int

const (
	// ViewsPort is Couchbase's views port (capi, 8092): design documents and
	// view queries, /{bucket}/_design/...
	ViewsPort ServicePort = iota
	// SearchPort is Couchbase's search port (fts, 8094): the search REST API,
	// /api/...
	SearchPort
)

// String names the port as the cluster configuration does.
func (p ServicePort) String() string {
	if p == SearchPort {
		return "fts"
	}
	return "capi"
}

// Only is h, the HTTP API, answering on one service port: the requests
// whose paths belong to that service go to h (its authentication,
// permissions, limits and handlers, shared with the management port); any
// other path is 404. The search port also answers GET /api/ping with 200
// and an empty body, as Couchbase's does, without authentication (it says
// only that the port is up): SDKs' Ping and WaitUntilReady for the search
// service call it.
func Only(h http.Handler, p ServicePort) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff") // as guard sets it: these answers pass no guard
		if p == SearchPort && r.URL.EscapedPath() == "/api/ping" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			w.WriteHeader(http.StatusOK)
			return
		}
		if !servesPath(p, r.URL.EscapedPath()) {
			writeError(w, errNotFound("no such resource on the "+p.String()+" port"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// servesPath says whether the service port p serves path (escaped).
func servesPath(p ServicePort, path string) bool {
	if p == SearchPort {
		return strings.HasPrefix(path, "/api/")
	}
	// /{bucket}/_design/{ddoc}[/...]: a bucket name holds no "/".
	parts := strings.SplitN(path, "/", 4)
	return len(parts) == 4 && parts[0] == "" && parts[1] != "" && parts[2] == "_design" && parts[3] != ""
}
