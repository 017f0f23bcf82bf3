package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/gorilla/mux"
)

// maxSearchDefBody bounds an index definition; maxSearchQueryBody a search
// request.
const (
	maxSearchDefBody   = 20 << 20
	maxSearchQueryBody = 10 << 20
)

// SearchService is what the search routes need of the full-text search
// service (*search.Service implements it). Its answers are JSON bodies in
// Couchbase's shapes; a bucket of "" means the bucket holding the named
// index (for PutIndexJSON, the definition's sourceName). Errors with a
// method HTTPStatus() int are answered with that status; others as
// classify says. It is an interface so that this package does not import
// bleve (whose analysis workers, started when it loads, would count as
// leaked goroutines in every test of this package).
type SearchService interface {
	PutIndexJSON(ctx context.Context, bucket, name string, def []byte) ([]byte, error)
	GetIndexJSON(ctx context.Context, bucket, name string) ([]byte, error)
	ListIndexesJSON(ctx context.Context, bucket string) ([]byte, error)
	DeleteIndexJSON(ctx context.Context, bucket, name string) ([]byte, error)
	QueryJSON(ctx context.Context, bucket, name string, req []byte) ([]byte, error)
	CountJSON(ctx context.Context, bucket, name string) ([]byte, error)
	StatsJSON(ctx context.Context, bucket, name string) ([]byte, error)
}

// searchRoutes adds Couchbase's full-text search REST API (the FTS
// service's, port 8094 in Couchbase) over svc to r:
//
//	GET    /api/index                    every index definition
//	GET    /api/index/{name}             one definition
//	PUT    /api/index/{name}             create or replace (body: the definition)
//	DELETE /api/index/{name}             delete
//	POST   /api/index/{name}/query       search (body: the search request)
//	GET    /api/index/{name}/count       live documents in the index
//	GET    /api/stats/index/{name}       the index's stats
//
// The integrator calls it from New when a search service is configured.
func (s *server) searchRoutes(r *mux.Router, svc SearchService) {
	h := &searchHandlers{svc: svc}
	r.HandleFunc("/api/index", h.list).Methods(http.MethodGet)
	r.HandleFunc("/api/index/{name}", h.get).Methods(http.MethodGet)
	r.HandleFunc("/api/index/{name}", h.put).Methods(http.MethodPut)
	r.HandleFunc("/api/index/{name}", h.delete).Methods(http.MethodDelete)
	r.HandleFunc("/api/index/{name}/query", h.query).Methods(http.MethodPost)
	r.HandleFunc("/api/index/{name}/count", h.count).Methods(http.MethodGet)
	r.HandleFunc("/api/stats/index/{name}", h.stats).Methods(http.MethodGet)
}

type searchHandlers struct {
	svc SearchService
}

// writeSearchError answers err as the FTS service does:
// {"status": "fail", "error": reason}.
func writeSearchError(w http.ResponseWriter, err error) {
	status := 0
	var hs interface{ HTTPStatus() int }
	if errors.As(err, &hs) {
		status = hs.HTTPStatus()
	}
	reason := err.Error()
	if status == 0 {
		he := classify(err)
		status, reason = he.status, he.reason
	}
	writeJSON(w, status, map[string]string{"status": "fail", "error": reason})
}

// answer writes a JSON body the service made, or its error.
func answer(w http.ResponseWriter, body []byte, err error) {
	if err != nil {
		writeSearchError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// nameAnd calls fn with the {name} path variable.
func nameAnd(w http.ResponseWriter, r *http.Request, fn func(name string) ([]byte, error)) {
	name, err := pathVar(r, "name")
	if err != nil {
		writeSearchError(w, err)
		return
	}
	body, err := fn(name)
	answer(w, body, err)
}

func (h *searchHandlers) list(w http.ResponseWriter, r *http.Request) {
	body, err := h.svc.ListIndexesJSON(r.Context(), "")
	answer(w, body, err)
}

func (h *searchHandlers) get(w http.ResponseWriter, r *http.Request) {
	nameAnd(w, r, func(name string) ([]byte, error) { return h.svc.GetIndexJSON(r.Context(), "", name) })
}

func (h *searchHandlers) put(w http.ResponseWriter, r *http.Request) {
	nameAnd(w, r, func(name string) ([]byte, error) {
		def, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSearchDefBody))
		if err != nil {
			return nil, err
		}
		return h.svc.PutIndexJSON(r.Context(), "", name, def)
	})
}

func (h *searchHandlers) delete(w http.ResponseWriter, r *http.Request) {
	nameAnd(w, r, func(name string) ([]byte, error) { return h.svc.DeleteIndexJSON(r.Context(), "", name) })
}

func (h *searchHandlers) query(w http.ResponseWriter, r *http.Request) {
	nameAnd(w, r, func(name string) ([]byte, error) {
		req, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSearchQueryBody))
		if err != nil {
			return nil, err
		}
		return h.svc.QueryJSON(r.Context(), "", name, req)
	})
}

func (h *searchHandlers) count(w http.ResponseWriter, r *http.Request) {
	nameAnd(w, r, func(name string) ([]byte, error) { return h.svc.CountJSON(r.Context(), "", name) })
}

func (h *searchHandlers) stats(w http.ResponseWriter, r *http.Request) {
	nameAnd(w, r, func(name string) ([]byte, error) { return h.svc.StatsJSON(r.Context(), "", name) })
}
