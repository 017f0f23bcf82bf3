// Package httpapi is Mayfly's HTTP front door: documents, buckets, scopes and
// collections in Couchbase's REST shapes, design documents and view queries,
// the expiry pager's admin endpoints, statistics and metrics. Every error is a
// JSON object {"error": ..., "reason": ...}.
package httpapi

import (
	"io"
	"log/slog"
	"net/http"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/views"
)

// Options configure the HTTP API. A nil *Options means defaults.
type Options struct {
	// Logger receives request errors. The default value discards them.
	Logger *slog.Logger
	// Views serves design documents and view queries; nil disables them.
	Views *views.Service
	// Pager runs the expiry pagers; nil disables its endpoints.
	Pager *pager.Manager
	// Audit records every administrative action before it is done (see
	// audit.go); an action whose record fails is refused. nil records
	// nothing.
	Audit *audit.Log
}

// server holds what the handlers share.
type server struct {
	eng      *engine.Engine
	views    *views.Service
	pager    *pager.Manager
	auditLog *audit.Log
	log      *slog.Logger
}

// New returns the HTTP API over eng as one http.Handler.
func New(eng *engine.Engine, opts *Options) http.Handler {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &server{eng: eng, views: o.Views, pager: o.Pager, auditLog: o.Audit, log: o.Logger}
	r := mux.NewRouter()
	r.UseEncodedPath() // keys may hold "/" as %2F
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, errNotFound("no such resource"))
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, &httpError{status: http.StatusMethodNotAllowed, code: "method_not_allowed", reason: req.Method + " is not allowed here"})
	})

	pools := r.PathPrefix("/pools/default/buckets").Subrouter()
	pools.HandleFunc("", s.listBuckets).Methods(http.MethodGet)
	pools.HandleFunc("", s.createBucket).Methods(http.MethodPost)
	pools.HandleFunc("/{bucket}", s.getBucket).Methods(http.MethodGet)
	pools.HandleFunc("/{bucket}", s.updateBucket).Methods(http.MethodPost)
	pools.HandleFunc("/{bucket}", s.deleteBucket).Methods(http.MethodDelete)
	pools.HandleFunc("/{bucket}/scopes", s.listScopes).Methods(http.MethodGet)
	pools.HandleFunc("/{bucket}/scopes", s.createScope).Methods(http.MethodPost)
	pools.HandleFunc("/{bucket}/scopes/{scope}/collections", s.createCollection).Methods(http.MethodPost)
	pools.HandleFunc("/{bucket}/scopes/{scope}", s.dropScope).Methods(http.MethodDelete)
	pools.HandleFunc("/{bucket}/scopes/{scope}/collections/{collection}", s.dropCollection).Methods(http.MethodDelete)
	pools.HandleFunc("/{bucket}/ddocs", s.listDesignDocs).Methods(http.MethodGet)
	pools.HandleFunc("/{bucket}/settings/expiryPager", s.getExpiryPager).Methods(http.MethodGet)
	pools.HandleFunc("/{bucket}/settings/expiryPager", s.setExpiryPager).Methods(http.MethodPost)
	pools.HandleFunc("/{bucket}/controller/runExpiryPager", s.runExpiryPager).Methods(http.MethodPost)
	pools.HandleFunc("/{bucket}/stats", s.getStats).Methods(http.MethodGet)

	reg := prometheus.NewRegistry()
	reg.MustRegister(newStatsCollector(s))
	r.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).Methods(http.MethodGet)

	r.HandleFunc("/{bucket}/_design/{ddoc}", s.putDesignDoc).Methods(http.MethodPut)
	r.HandleFunc("/{bucket}/_design/{ddoc}", s.getDesignDoc).Methods(http.MethodGet)
	r.HandleFunc("/{bucket}/_design/{ddoc}", s.deleteDesignDoc).Methods(http.MethodDelete)
	r.HandleFunc("/{bucket}/_design/{ddoc}/_info", s.designDocInfo).Methods(http.MethodGet)
	r.HandleFunc("/{bucket}/_design/{ddoc}/_view/{view}", s.queryView).Methods(http.MethodGet, http.MethodPost)

	r.HandleFunc("/{bucket}/_expiry", s.expiryForecast).Methods(http.MethodGet)
	r.HandleFunc("/{bucket}/docs/{key:.+}/touch", s.touchDoc).Methods(http.MethodPost)
	r.HandleFunc("/{bucket}/docs/{key:.+}", s.putDoc).Methods(http.MethodPut)
	r.HandleFunc("/{bucket}/docs/{key:.+}", s.getDoc).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/{bucket}/docs/{key:.+}", s.deleteDoc).Methods(http.MethodDelete)
	return r
}
