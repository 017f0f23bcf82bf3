package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/gorilla/mux"
	"github.com/tidwall/gjson"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/internal/reason"
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
	// FindIndex returns the bucket that holds the named index.
	FindIndex(name string) (string, error)
	// BucketIndexStats returns the figures of every index of a bucket:
	// index name, then stat name, to value. The stat names are Couchbase's
	// (doc_count, num_mutations_to_index, num_bytes_used_disk,
	// total_queries, total_queries_error) and Mayfly's own (docs_indexed,
	// docs_deleted, batches, index_errors, rollbacks); bucketStats gives
	// them as fts_INDEX_STAT, /metrics as mayfly_fts_STAT{index=INDEX}.
	BucketIndexStats(ctx context.Context, bucket string) (map[string]map[string]int64, error)
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
// and Couchbase 7's scoped paths, /api/bucket/{bucket}/scope/{scope}/index
// (GET: the bucket's indexes) and .../index/{name} (GET, PUT, DELETE,
// POST .../query, GET .../count), which name the bucket: the index must be
// one of that bucket's (a new one's sourceName, if given, must be the
// bucket). The scope is not checked against the collection the index
// reads.
//
// The integrator calls it from New when a search service is configured.
//
// Every route needs the fts permission on the index's bucket (fts_searcher
// to read and query, fts_admin to change); listing every index needs
// ro_admin (or admin). Creating, replacing and deleting an index is audited.
func (s *server) searchRoutes(r *mux.Router, svc SearchService) {
	const noForm = false
	h := &searchHandlers{svc: svc}
	onIndex := func(a auth.Action) permFunc {
		return func(req *http.Request) []auth.Permission {
			b, err := svc.FindIndex(mux.Vars(req)["name"])
			if err != nil {
				b = "" // no such index: the handler answers 404 to an admin; others get 403
			}
			return []auth.Permission{{Action: a, Bucket: b}}
		}
	}
	// A new index's bucket is its definition's sourceName.
	onSource := func(req *http.Request) []auth.Permission {
		b, err := svc.FindIndex(mux.Vars(req)["name"])
		if err != nil {
			body, rerr := io.ReadAll(io.LimitReader(req.Body, maxSearchDefBody))
			req.Body = io.NopCloser(bytes.NewReader(body))
			if rerr == nil {
				b = gjson.GetBytes(body, "sourceName").String()
			}
		}
		return []auth.Permission{{Action: auth.SearchWrite, Bucket: b}}
	}
	cluster := func(req *http.Request) []auth.Permission { return []auth.Permission{{Action: auth.MetricsRead}} }
	r.Handle("/api/index", s.need(cluster, noForm, h.list)).Methods(http.MethodGet)
	r.Handle("/api/index/{name}", s.need(onIndex(auth.SearchRead), noForm, h.get)).Methods(http.MethodGet)
	r.Handle("/api/index/{name}", s.need(onSource, noForm, s.audited(audit.ActionSearchIndexPut, svc, h.put))).Methods(http.MethodPut)
	r.Handle("/api/index/{name}", s.need(onIndex(auth.SearchWrite), noForm, s.audited(audit.ActionSearchIndexDelete, svc, h.delete))).Methods(http.MethodDelete)
	r.Handle("/api/index/{name}/query", s.need(onIndex(auth.SearchRead), noForm, h.query)).Methods(http.MethodPost)
	r.Handle("/api/index/{name}/count", s.need(onIndex(auth.SearchRead), noForm, h.count)).Methods(http.MethodGet)
	r.Handle("/api/stats/index/{name}", s.need(onIndex(auth.SearchRead), noForm, h.stats)).Methods(http.MethodGet)

	onBucket := func(a auth.Action) permFunc {
		return func(req *http.Request) []auth.Permission {
			return []auth.Permission{{Action: a, Bucket: mux.Vars(req)["bucket"]}}
		}
	}
	const scoped = "/api/bucket/{bucket}/scope/{scope}/index"
	r.Handle(scoped, s.need(onBucket(auth.SearchRead), noForm, h.list)).Methods(http.MethodGet)
	r.Handle(scoped+"/{name}", s.need(onBucket(auth.SearchRead), noForm, h.get)).Methods(http.MethodGet)
	r.Handle(scoped+"/{name}", s.need(onBucket(auth.SearchWrite), noForm, s.audited(audit.ActionSearchIndexPut, svc, h.put))).Methods(http.MethodPut)
	r.Handle(scoped+"/{name}", s.need(onBucket(auth.SearchWrite), noForm, s.audited(audit.ActionSearchIndexDelete, svc, h.delete))).Methods(http.MethodDelete)
	r.Handle(scoped+"/{name}/query", s.need(onBucket(auth.SearchRead), noForm, h.query)).Methods(http.MethodPost)
	r.Handle(scoped+"/{name}/count", s.need(onBucket(auth.SearchRead), noForm, h.count)).Methods(http.MethodGet)
}

// pathBucket is the {bucket} of a scoped path; "" for the /api/index paths.
func pathBucket(r *http.Request) (string, error) {
	if _, ok := mux.Vars(r)["bucket"]; !ok {
		return "", nil
	}
	return pathVar(r, "bucket")
}

// audited records the intent of a search index change before h does it,
// refusing the change if the audit log cannot be written, and records a
// failure if h answers one.
func (s *server) audited(action string, svc SearchService, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := mux.Vars(r)["name"]
		bucket, _ := svc.FindIndex(name)
		if b, err := pathBucket(r); err == nil && b != "" {
			bucket = b
		}
		var after any
		if r.Method == http.MethodPut {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxSearchDefBody))
			if err != nil {
				writeError(w, errBadRequest("reading the body: "+err.Error()))
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			after = auditBody(body)
			if bucket == "" {
				bucket = gjson.GetBytes(body, "sourceName").String()
			}
		}
		in, err := s.intend(r, audit.Event{Action: action, Bucket: bucket, Target: name, After: after})
		if err != nil {
			writeError(w, err)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h(rec, r)
		if rec.status >= 400 {
			s.settle(r, in, fmt.Errorf("answered %d", rec.status))
		}
	}
}

// statusRecorder notes the status a handler answers.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
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
	msg := reason.Of(err)
	if status == 0 {
		he := classify(err)
		status, msg = he.status, he.reason
	}
	writeJSON(w, status, map[string]string{"status": "fail", "error": msg})
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

// nameAnd calls fn with the {bucket} ("" when the path has none) and {name}
// path variables.
func nameAnd(w http.ResponseWriter, r *http.Request, fn func(bucket, name string) ([]byte, error)) {
	bucket, err := pathBucket(r)
	if err != nil {
		writeSearchError(w, err)
		return
	}
	name, err := pathVar(r, "name")
	if err != nil {
		writeSearchError(w, err)
		return
	}
	body, err := fn(bucket, name)
	answer(w, body, err)
}

func (h *searchHandlers) list(w http.ResponseWriter, r *http.Request) {
	bucket, err := pathBucket(r)
	if err != nil {
		writeSearchError(w, err)
		return
	}
	body, err := h.svc.ListIndexesJSON(r.Context(), bucket)
	answer(w, body, err)
}

func (h *searchHandlers) get(w http.ResponseWriter, r *http.Request) {
	nameAnd(w, r, func(bucket, name string) ([]byte, error) { return h.svc.GetIndexJSON(r.Context(), bucket, name) })
}

func (h *searchHandlers) put(w http.ResponseWriter, r *http.Request) {
	nameAnd(w, r, func(bucket, name string) ([]byte, error) {
		def, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSearchDefBody))
		if err != nil {
			return nil, err
		}
		return h.svc.PutIndexJSON(r.Context(), bucket, name, def)
	})
}

func (h *searchHandlers) delete(w http.ResponseWriter, r *http.Request) {
	nameAnd(w, r, func(bucket, name string) ([]byte, error) { return h.svc.DeleteIndexJSON(r.Context(), bucket, name) })
}

func (h *searchHandlers) query(w http.ResponseWriter, r *http.Request) {
	nameAnd(w, r, func(bucket, name string) ([]byte, error) {
		req, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSearchQueryBody))
		if err != nil {
			return nil, err
		}
		return h.svc.QueryJSON(r.Context(), bucket, name, req)
	})
}

func (h *searchHandlers) count(w http.ResponseWriter, r *http.Request) {
	nameAnd(w, r, func(bucket, name string) ([]byte, error) { return h.svc.CountJSON(r.Context(), bucket, name) })
}

func (h *searchHandlers) stats(w http.ResponseWriter, r *http.Request) {
	nameAnd(w, r, func(bucket, name string) ([]byte, error) { return h.svc.StatsJSON(r.Context(), bucket, name) })
}
