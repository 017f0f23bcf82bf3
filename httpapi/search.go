package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// maxSearchDefBody bounds an index definition; maxSearchQueryBody a search
// request.
const (
	maxSearchDefBody   = 20 << 20
	maxSearchQueryBody = 10 << 20
)

// SearchService is what the search routes need of the full-text search
// service (*search.Service implements it): domain calls that return
// definitions, figures and errors; this file makes Couchbase's REST
// answers of them, and classify their statuses.
type SearchService interface {
	// FindIndex returns the bucket that holds the named index.
	FindIndex(name string) (string, error)
	// SourceBucket returns the bucket a definition belongs to (its
	// sourceName, or an alias's targets' bucket).
	SourceBucket(def []byte) (string, error)
	PutIndex(ctx context.Context, bucket, name string, def []byte) (*search.IndexDef, error)
	// CheckIndex checks a definition as PutIndex would, storing nothing:
	// a definition it refuses is refused up front (not audited).
	CheckIndex(ctx context.Context, bucket, name string, def []byte) (*search.IndexDef, error)
	GetIndex(ctx context.Context, bucket, name string) (*search.IndexDef, error)
	ListIndexes(ctx context.Context, bucket string) ([]*search.IndexDef, error)
	DeleteIndex(ctx context.Context, bucket, name string) error
	// IndexScope returns the scope an index reads ("" for an alias none of
	// whose targets exists); DefScope the scope a definition would read.
	IndexScope(ctx context.Context, bucket, name string) (string, error)
	DefScope(bucket, name string, def []byte) (string, error)
	// Query runs a search request and returns the answer's JSON
	// (Couchbase's shape: bleve's SearchResult).
	Query(ctx context.Context, bucket, name string, req []byte) ([]byte, error)
	Count(ctx context.Context, bucket, name string) (uint64, error)
	IndexStats(ctx context.Context, bucket, name string) (search.Stats, error)
	// Stats returns the figures of every index of a bucket; bucketStats
	// gives them as fts_INDEX_STAT, /metrics as mayfly_fts_STAT{index=INDEX}
	// (see searchStatValues).
	Stats(ctx context.Context, bucket string) ([]search.Stats, error)
}

var _ SearchService = (*search.Service)(nil)

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
// (GET: the scope's indexes) and .../index/{name} (GET, PUT, DELETE,
// POST .../query, GET .../count), which name the bucket and scope: the
// index must be one of that bucket's (a new one's sourceName, if given,
// must be the bucket) and read a collection of that scope (see inScope).
// Index names stay unique in a bucket, across its scopes: a PUT on one
// scope's path of a name another scope's index has is refused, never a
// replacement of that index.
//
// The integrator calls it from New when a search service is configured.
//
// Every route needs the fts permission on the index's bucket (fts_searcher
// to read and query, fts_admin to change). GET /api/index is open to every
// user and lists the indexes of the buckets they may read indexes of (all
// of them for ro_admin and admin), as cbft filters it: an SDK's
// GetAllIndexes works for an fts_searcher. Creating, replacing and deleting
// an index is audited.
func (s *server) searchRoutes(r *mux.Router, svc SearchService) {
	const noForm = false
	h := &searchHandlers{srv: s, eng: s.eng, svc: svc}
	onIndex := func(a auth.Action) permFunc {
		return func(req *http.Request) []auth.Permission {
			b, err := svc.FindIndex(mux.Vars(req)["name"])
			if err != nil {
				b = "" // no such index: the handler answers 404 to an admin; others get 403
			}
			return []auth.Permission{{Action: a, Bucket: b}}
		}
	}
	// A new index's bucket is the one the handler will create it in: its
	// definition's, read as the handler reads it (SourceBucket: the
	// sourceName encoding/json finds, or an alias's targets' bucket).
	onSource := func(req *http.Request) []auth.Permission {
		b, err := svc.FindIndex(mux.Vars(req)["name"])
		if err != nil {
			b = "" // a definition that names no bucket: only a cluster-wide fts_admin, and the handler says why
			body, rerr := io.ReadAll(io.LimitReader(req.Body, maxSearchDefBody))
			req.Body = io.NopCloser(bytes.NewReader(body))
			if rerr == nil {
				if sb, err := svc.SourceBucket(body); err == nil {
					b = sb
				}
			}
		}
		return []auth.Permission{{Action: auth.SearchWrite, Bucket: b}}
	}
	anyUser := func(*http.Request) []auth.Permission { return nil } // the list is filtered (searchHandlers.list)
	r.Handle("/api/index", s.need(anyUser, noForm, fts(h.list))).Methods(http.MethodGet)
	r.Handle("/api/index/{name}", s.need(onIndex(auth.SearchRead), noForm, fts(h.get))).Methods(http.MethodGet)
	r.Handle("/api/index/{name}", s.need(onSource, noForm, fts(h.put))).Methods(http.MethodPut)
	r.Handle("/api/index/{name}", s.need(onIndex(auth.SearchWrite), noForm, fts(h.delete))).Methods(http.MethodDelete)
	r.Handle("/api/index/{name}/query", s.need(onIndex(auth.SearchRead), noForm, fts(h.query))).Methods(http.MethodPost)
	r.Handle("/api/index/{name}/count", s.need(onIndex(auth.SearchRead), noForm, fts(h.count))).Methods(http.MethodGet)
	r.Handle("/api/stats/index/{name}", s.need(onIndex(auth.SearchRead), noForm, fts(h.stats))).Methods(http.MethodGet)

	// The scoped paths check the path's {bucket} unescaped (on), as the
	// handlers read it: a bucket name may hold "%".
	const scoped = "/api/bucket/{bucket}/scope/{scope}/index"
	r.Handle(scoped, s.need(on(auth.SearchRead), noForm, fts(h.list))).Methods(http.MethodGet)
	r.Handle(scoped+"/{name}", s.need(on(auth.SearchRead), noForm, fts(h.get))).Methods(http.MethodGet)
	r.Handle(scoped+"/{name}", s.need(on(auth.SearchWrite), noForm, fts(h.put))).Methods(http.MethodPut)
	r.Handle(scoped+"/{name}", s.need(on(auth.SearchWrite), noForm, fts(h.delete))).Methods(http.MethodDelete)
	r.Handle(scoped+"/{name}/query", s.need(on(auth.SearchRead), noForm, fts(h.query))).Methods(http.MethodPost)
	r.Handle(scoped+"/{name}/count", s.need(on(auth.SearchRead), noForm, fts(h.count))).Methods(http.MethodGet)
}

// pathBucket is the {bucket} of a scoped path; "" for the /api/index paths.
func pathBucket(r *http.Request) (string, error) {
	if _, ok := mux.Vars(r)["bucket"]; !ok {
		return "", nil
	}
	return pathVar(r, "bucket")
}

// ftsError is an error of the search REST API: writeError answers it as
// the FTS service does, {"status": "fail", "error": reason}, with the
// status classify gives.
type ftsError struct{ err error }

func (e *ftsError) Error() string { return e.err.Error() }
func (e *ftsError) Unwrap() error { return e.err }

// fts makes h's errors ftsErrors, but for an audit log that cannot be
// written, answered as at every other path (audit_failed).
func fts(h apiHandler) apiHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := h(w, r); err != nil {
			if he := (*httpError)(nil); errors.As(err, &he) && he.code == auditFailedCode {
				return err
			}
			return &ftsError{err}
		}
		return nil
	}
}

// searchHandlers answer the FTS service's REST API. Where a path names no
// bucket (/api/index/{name}), the index's bucket is found by its name
// (Couchbase's index names are unique in a cluster), and a new index's
// from its definition (SourceBucket).
type searchHandlers struct {
	srv *server // its audit log
	eng *engine.Engine
	svc SearchService
}

// target returns the {bucket} ("" when the path has none) and {name} of a
// request.
func (h *searchHandlers) target(r *http.Request) (bucket, name string, err error) {
	if bucket, err = pathBucket(r); err != nil {
		return "", "", err
	}
	if name, err = pathVar(r, "name"); err != nil {
		return "", "", err
	}
	return bucket, name, nil
}

// index returns the bucket and name of the index a request names, the
// bucket found from the index when the path has none; on a scoped path,
// an index of another scope is not found (inScope).
func (h *searchHandlers) index(r *http.Request) (bucket, name string, err error) {
	if bucket, name, err = h.target(r); err != nil {
		return bucket, name, err
	}
	if bucket != "" {
		return bucket, name, h.inScope(r, bucket, name)
	}
	bucket, err = h.svc.FindIndex(name)
	return bucket, name, err
}

// pathScope is the {scope} of a scoped path; "" for the /api/index paths.
func pathScope(r *http.Request) (string, error) {
	if _, ok := mux.Vars(r)["scope"]; !ok {
		return "", nil
	}
	return pathVar(r, "scope")
}

// inScope answers, for a scoped path, an index of bucket that reads
// another scope than the path's as not found (an error wrapping
// search.ErrNotFound): two tenants' scopes of a bucket do not reach each
// other's indexes. An index that does not exist is left to the caller.
func (h *searchHandlers) inScope(r *http.Request, bucket, name string) error {
	scope, err := pathScope(r)
	if err != nil || scope == "" {
		return err
	}
	got, err := h.svc.IndexScope(r.Context(), bucket, name)
	if err != nil || got == "" || got == scope {
		return nil
	}
	return fmt.Errorf("%w: index %s not found in scope %s of bucket %s (the bucket's index of that name reads scope %s)",
		search.ErrNotFound, name, scope, bucket, got)
}

// checkScopedPut refuses, on a scoped path, a definition that reads
// another scope than the path's, and a name another scope's index has
// (cbgt's "index with the same name already exists", which the SDKs raise
// as their index-exists error): names are unique in a bucket, and a PUT on
// one scope's path never replaces another scope's index.
func (h *searchHandlers) checkScopedPut(r *http.Request, bucket, name string, def []byte) error {
	scope, err := pathScope(r)
	if err != nil || scope == "" {
		return err
	}
	if cur, err := h.svc.IndexScope(r.Context(), bucket, name); err == nil && cur != "" && cur != scope {
		return &search.DefError{Reason: fmt.Sprintf("cannot create index because an index with the same name already exists: %s, in bucket %s, scope %s", name, bucket, cur)}
	}
	got, err := h.svc.DefScope(bucket, name, def)
	if err != nil {
		return err
	}
	if got != "" && got != scope {
		return &search.DefError{Reason: fmt.Sprintf("the definition reads a collection of scope %s, not of scope %s, which the path names", got, scope)}
	}
	return nil
}

// list answers, for the path's bucket or every one,
// {"status":"ok","indexDefs":{"indexDefs":{name: def, ...}}}.
func (h *searchHandlers) list(w http.ResponseWriter, r *http.Request) error {
	bucket, err := pathBucket(r)
	if err != nil {
		return err
	}
	defs := map[string]json.RawMessage{}
	var buckets []string
	if bucket != "" {
		buckets = []string{bucket}
	} else {
		for _, b := range h.eng.Buckets() {
			buckets = append(buckets, b.Name())
		}
	}
	scope, err := pathScope(r)
	if err != nil {
		return err
	}
	p := principalOf(r)
	for _, b := range buckets {
		if !p.Allows(auth.Permission{Action: auth.MetricsRead}) && !p.Allows(auth.Permission{Action: auth.SearchRead, Bucket: b}) {
			continue // not theirs to see (a scoped path's bucket was checked by its route)
		}
		ds, err := h.svc.ListIndexes(r.Context(), b)
		if err != nil {
			if bucket == "" {
				continue // a memcached bucket, or deleted or not ready meanwhile
			}
			return err
		}
		for _, d := range ds {
			if scope != "" {
				if got, err := h.svc.IndexScope(r.Context(), b, d.Name); err == nil && got != "" && got != scope {
					continue // another scope's (inScope)
				}
			}
			defs[d.Name] = d.Body
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "indexDefs": map[string]any{"indexDefs": defs}})
	return nil
}

// get answers {"status":"ok","indexDef":{...}}.
func (h *searchHandlers) get(w http.ResponseWriter, r *http.Request) error {
	bucket, name, err := h.index(r)
	if err != nil {
		return err
	}
	d, err := h.svc.GetIndex(r.Context(), bucket, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "indexDef": d.Body})
	return nil
}

// put stores a definition and answers {"status":"ok","name":..,"uuid":..}.
func (h *searchHandlers) put(w http.ResponseWriter, r *http.Request) error {
	bucket, name, err := h.target(r)
	if err != nil {
		return err
	}
	def, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSearchDefBody))
	if err != nil {
		return err
	}
	if def, err = withPrevUUID(r, def); err != nil {
		return err
	}
	if bucket == "" {
		if bucket, err = h.svc.SourceBucket(def); err != nil {
			return err
		}
	} else if err := h.checkScopedPut(r, bucket, name, def); err != nil {
		return err
	}
	// A definition refused up front (not one, its bucket missing, another
	// bucket's name, a stale uuid) is not audited; the intent of one that
	// passes is recorded before it is stored, or it is not stored.
	if _, err := h.svc.CheckIndex(r.Context(), bucket, name, def); err != nil {
		return err
	}
	in, err := h.srv.intend(r, audit.Event{Action: audit.ActionSearchIndexPut, Bucket: bucket, Target: name, After: auditBody(def)})
	if err != nil {
		return err
	}
	d, err := h.svc.PutIndex(r.Context(), bucket, name, def)
	if err != nil {
		h.srv.settle(r, in, err)
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "name": d.Name, "uuid": d.UUID})
	return nil
}

// withPrevUUID returns def naming, as its uuid, the one the request's
// prevIndexUUID or indexUUID parameter gives (cbft's, ahead of the body's
// uuid): the uuid of the definition the client read, which the service
// checks is still the index's. Without either, def is returned as it is.
func withPrevUUID(r *http.Request, def []byte) ([]byte, error) {
	q := r.URL.Query()
	prev := q.Get("prevIndexUUID")
	if prev == "" {
		prev = q.Get("indexUUID")
	}
	if prev == "" {
		return def, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(def, &m); err != nil || m == nil {
		return def, nil // not an object: the service says so
	}
	m["uuid"], _ = json.Marshal(prev)
	return json.Marshal(m)
}

// delete deletes an index and answers {"status":"ok","uuid":..}.
func (h *searchHandlers) delete(w http.ResponseWriter, r *http.Request) error {
	bucket, name, err := h.index(r)
	if err != nil {
		return err
	}
	// An index that is not there is refused up front, not audited.
	d, err := h.svc.GetIndex(r.Context(), bucket, name)
	if err != nil {
		return err
	}
	in, err := h.srv.intend(r, audit.Event{Action: audit.ActionSearchIndexDelete, Bucket: bucket, Target: name})
	if err != nil {
		return err
	}
	if err := h.svc.DeleteIndex(r.Context(), bucket, name); err != nil {
		h.srv.settle(r, in, err)
		return err
	}
	uuid := d.UUID
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "uuid": uuid})
	return nil
}

// query runs a search request and answers bleve's SearchResult, which is
// Couchbase's shape.
func (h *searchHandlers) query(w http.ResponseWriter, r *http.Request) error {
	bucket, name, err := h.target(r)
	if err != nil {
		return err
	}
	req, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSearchQueryBody))
	if err != nil {
		return err
	}
	if bucket == "" {
		if bucket, err = h.svc.FindIndex(name); err != nil {
			return err
		}
	} else if err := h.inScope(r, bucket, name); err != nil {
		return err
	}
	body, err := h.svc.Query(r.Context(), bucket, name, req)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
	return nil
}

// count answers {"status":"ok","count":N}: the live documents of the index.
func (h *searchHandlers) count(w http.ResponseWriter, r *http.Request) error {
	bucket, name, err := h.index(r)
	if err != nil {
		return err
	}
	n, err := h.svc.Count(r.Context(), bucket, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "count": n})
	return nil
}

// stats answers an index's stats as Couchbase's /api/stats/index/{name}
// does, one flat object with keys "bucket:index:stat" (doc_count,
// num_mutations_to_index, num_bytes_used_disk, total_queries,
// total_queries_error, ...), plus Mayfly's own (see searchStatValues).
func (h *searchHandlers) stats(w http.ResponseWriter, r *http.Request) error {
	bucket, name, err := h.index(r)
	if err != nil {
		return err
	}
	st, err := h.svc.IndexStats(r.Context(), bucket, name)
	if err != nil {
		return err
	}
	out := map[string]int64{}
	for stat, v := range searchStatValues(st) {
		out[bucket+":"+name+":"+stat] = v
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// searchStatValues names an index's figures as Couchbase's
// /api/stats/index does (doc_count, num_mutations_to_index,
// num_bytes_used_disk, total_queries, total_queries_error), with Mayfly's
// own (docs_indexed, docs_deleted, batches, index_errors, rollbacks). The
// names are those of ftsMetrics.
func searchStatValues(st search.Stats) map[string]int64 {
	return map[string]int64{
		"doc_count":              int64(st.DocCount),   // live documents the index holds
		"num_mutations_to_index": int64(st.SeqsBehind), // sequence numbers the index is behind the bucket
		"num_bytes_used_disk":    st.DiskBytes,         // size of the index's files (0 in memory)
		"total_queries":          st.Queries,           // queries run since the index opened
		"total_queries_error":    st.QueryErrors,       // of which failed
		"docs_indexed":           st.DocsIndexed,       // documents added or replaced since the index opened
		"docs_deleted":           st.DocsDeleted,       // documents removed since the index opened
		"batches":                st.Batches,           // batches written since the index opened
		"index_errors":           st.IndexErrors,       // documents bleve refused and failed batches
		"rollbacks":              st.Rollbacks,         // times the index was discarded and rebuilt on opening
	}
}

// searchIndexStats returns the figures of every index of a bucket: index
// name, then stat name (searchStatValues), to value.
func searchIndexStats(ctx context.Context, svc SearchService, bucket string) (map[string]map[string]int64, error) {
	sts, err := svc.Stats(ctx, bucket)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]int64, len(sts))
	for _, st := range sts {
		out[st.Name] = searchStatValues(st)
	}
	return out, nil
}
