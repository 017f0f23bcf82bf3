package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/mayflydb/mayfly/audit"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/reason"
	"github.com/mayflydb/mayfly/views"
)

// maxDesignDocBody bounds a design document.
const maxDesignDocBody = 20 << 20

// maxKeysBody bounds a POSTed {"keys": [...]} body: room for
// views.MaxKeysSize of keys with spaces between them.
const maxKeysBody = 2 * views.MaxKeysSize

func (s *server) ddocTarget(r *http.Request) (bucket, ddoc string, err error) {
	if s.views == nil {
		return "", "", errNotFound("views are not enabled")
	}
	b, err := s.bucketOf(r)
	if err != nil {
		return "", "", err
	}
	ddoc, err = pathVar(r, "ddoc")
	return b.Name(), ddoc, err
}

// putDesignDoc handles PUT /{bucket}/_design/{ddoc}.
func (s *server) putDesignDoc(w http.ResponseWriter, r *http.Request) error {
	bucket, name, err := s.ddocTarget(r)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDesignDocBody))
	if err != nil {
		return err
	}
	before, err := s.designDocBody(r, bucket, name)
	if err != nil {
		return err
	}
	in, err := s.intend(r, audit.Event{Action: audit.ActionDDocPut, Bucket: bucket, Target: name, Before: before, After: auditBody(body)})
	if err != nil {
		return err
	}
	d, err := s.ddocs.PutDesignDoc(r.Context(), bucket, name, body)
	if err != nil {
		s.settle(r, in, err)
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]any{"ok": true, "id": d.ID})
	return nil
}

// designDocBody returns a design document as an audit record holds it, nil
// if there is none.
func (s *server) designDocBody(r *http.Request, bucket, name string) (any, error) {
	d, err := s.views.StoredDesignDoc(r.Context(), bucket, name)
	if errors.Is(err, views.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return auditBody(d.Body), nil
}

// getDesignDoc handles GET /{bucket}/_design/{ddoc}: the design document as
// stored, also one that is not loaded (skipped, or refused at start), so
// that it can be read and fixed.
func (s *server) getDesignDoc(w http.ResponseWriter, r *http.Request) error {
	bucket, name, err := s.ddocTarget(r)
	if err != nil {
		return err
	}
	d, err := s.views.StoredDesignDoc(r.Context(), bucket, name)
	if err != nil {
		return err
	}
	meta, _ := json.Marshal(map[string]string{"id": d.ID, "rev": d.Rev, "type": "json"})
	w.Header().Set("X-Couchbase-Meta", string(meta))
	w.Header().Set("Content-Type", "application/json")
	w.Write(d.Body)
	return nil
}

// deleteDesignDoc handles DELETE /{bucket}/_design/{ddoc}, of a loaded
// design document or of one stored but not loaded.
func (s *server) deleteDesignDoc(w http.ResponseWriter, r *http.Request) error {
	bucket, name, err := s.ddocTarget(r)
	if err != nil {
		return err
	}
	d, err := s.views.StoredDesignDoc(r.Context(), bucket, name)
	if err != nil {
		return err
	}
	in, err := s.intend(r, audit.Event{Action: audit.ActionDDocDelete, Bucket: bucket, Target: name, Before: auditBody(d.Body)})
	if err != nil {
		return err
	}
	if err := s.ddocs.DeleteDesignDoc(r.Context(), bucket, name); err != nil {
		s.settle(r, in, err)
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "id": views.DesignDocPrefix + name})
	return nil
}

// designDocInfo handles GET /{bucket}/_design/{ddoc}/_info: index state and
// map errors per view.
func (s *server) designDocInfo(w http.ResponseWriter, r *http.Request) error {
	bucket, name, err := s.ddocTarget(r)
	if err != nil {
		return err
	}
	inf, err := s.views.Info(r.Context(), bucket, name)
	if err != nil {
		return err
	}
	// The errors' reasons read as the API's other reasons do.
	for v, vi := range inf.Views {
		vi.RecentErrors = slices.Clone(vi.RecentErrors)
		for i := range vi.RecentErrors {
			vi.RecentErrors[i].Reason = reason.Strip(vi.RecentErrors[i].Reason)
		}
		vi.RecentReduceErrors = slices.Clone(vi.RecentReduceErrors)
		for i := range vi.RecentReduceErrors {
			vi.RecentReduceErrors[i].Reason = reason.Strip(vi.RecentReduceErrors[i].Reason)
		}
		inf.Views[v] = vi
	}
	writeJSON(w, http.StatusOK, inf)
	return nil
}

// listDesignDocs handles GET /pools/default/buckets/{bucket}/ddocs.
func (s *server) listDesignDocs(w http.ResponseWriter, r *http.Request) error {
	bucket, _, err := s.ddocTarget(r)
	if err != nil {
		return err
	}
	ds, err := s.views.DesignDocs(r.Context(), bucket)
	if err != nil {
		return err
	}
	type row struct {
		Doc struct {
			Meta map[string]string `json:"meta"`
			JSON json.RawMessage   `json:"json"`
		} `json:"doc"`
	}
	out := struct {
		Rows []row `json:"rows"`
	}{Rows: []row{}}
	for _, d := range ds {
		var rw row
		rw.Doc.Meta = map[string]string{"id": d.ID, "rev": d.Rev}
		rw.Doc.JSON = d.Body
		out.Rows = append(out.Rows, rw)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// bodyParams wraps a query handler (a view's, _all_docs) so that a POSTed
// body's parameters join the query string (views.BodyParams, CouchDB's
// POST queries) before h runs, its permission check included: a body's
// include_docs needs data_reader as the URL's does. The body stays for h
// to read (its keys). h sees the merged query, and so do the nodes a
// cluster asks.
func bodyParams(h http.Handler) http.Handler {
	return apiHandler(func(w http.ResponseWriter, r *http.Request) error {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxKeysBody))
			if err != nil {
				return err
			}
			if r.URL.RawQuery, err = views.BodyParams(r.URL.RawQuery, body); err != nil {
				return err
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
		return nil
	})
}

// queryView handles GET and POST /{bucket}/_design/{ddoc}/_view/{view}. The
// answer streams row by row; every parameter error is found before it starts.
func (s *server) queryView(w http.ResponseWriter, r *http.Request) error {
	bucket, ddoc, err := s.ddocTarget(r)
	if err != nil {
		return err
	}
	view, err := pathVar(r, "view")
	if err != nil {
		return err
	}
	var body []byte
	if r.Method == http.MethodPost {
		if body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxKeysBody)); err != nil {
			return err
		}
	}
	var params views.Params // on the stack: the query keeps a copy
	if err := views.ParseRawParams(&params, r.URL.RawQuery, body); err != nil {
		return err
	}
	q, err := s.views.Prepare(r.Context(), bucket, ddoc, view, &params)
	if err != nil {
		if errors.Is(err, engine.ErrWarmup) && s.relayView(w, r, bucket, &params, body) {
			return nil // another node merged it (viewrelay.go)
		}
		return err
	}
	p := q.Params()
	if s.coverage != nil {
		b, err := s.bucketOf(r)
		if err != nil {
			return err
		}
		if done, err := s.queryViewCluster(w, r, b, q, p, body); done {
			return err
		}
	}
	w.Header().Set("Cache-Control", "must-revalidate")
	out := &lazyJSON{w: w, q: q}
	err = q.Run(r.Context(), out)
	var se *views.StreamError
	switch {
	case err == nil:
	case r.Context().Err() != nil:
		// A shutdown that cut the query short before its answer began (a
		// stale=false query waiting for its index) says so to the client,
		// which still waits; a client that hung up needs no answer.
		if !out.began && shuttingDown(r) {
			return ErrShuttingDown
		}
	case errors.As(err, &se):
		s.log.Warn("view query cut short", "bucket", bucket, "ddoc", ddoc, "view", view, "err", err)
	default:
		return err // nothing was sent: a proper error status
	}
	return nil
}

// classifyViews maps the views package's errors.
func classifyViews(err error) *httpError {
	var qe *views.QueryError
	var de *views.DesignDocError
	var re *views.ReduceError
	switch {
	case errors.As(err, &qe):
		return &httpError{http.StatusBadRequest, qe.Code, qe.Reason}
	case errors.As(err, &de):
		return &httpError{http.StatusBadRequest, "invalid_design_document", de.Reason}
	case errors.Is(err, views.ErrNotFound):
		return &httpError{http.StatusNotFound, "not_found", strings.TrimPrefix(err.Error(), views.ErrNotFound.Error()+": ")}
	case errors.As(err, &re):
		return &httpError{http.StatusInternalServerError, re.Code, re.Reason}
	case errors.Is(err, views.ErrNoViews):
		return &httpError{http.StatusBadRequest, "bad_request", err.Error()}
	case errors.Is(err, views.ErrNameNotUTF8):
		// CouchDB answers a name it cannot take as bad_request.
		return &httpError{http.StatusBadRequest, "bad_request", strings.TrimPrefix(err.Error(), "views: ")}
	case errors.Is(err, views.ErrClosed):
		return &httpError{http.StatusServiceUnavailable, "unavailable", err.Error()}
	}
	return nil
}

// lazyJSON sets the JSON content type on the first write, so an error found
// before any row can still be answered with its own status.
type lazyJSON struct {
	w     http.ResponseWriter
	began bool
	q     *views.Query // when set, the query answered: see Write
}

func (l *lazyJSON) Write(p []byte) (int, error) {
	if !l.began {
		l.began = true
		h := l.w.Header()
		h.Set("Content-Type", "application/json")
		// An answer from an index that is behind says so, and by how much.
		if l.q != nil {
			if n := l.q.Behind(); n > 0 {
				h.Set("X-Mayfly-Index-Building", "true")
				h.Set("X-Mayfly-Index-Pending", strconv.FormatUint(n, 10))
			}
		}
	}
	return l.w.Write(p)
}

// Flush sends what was written to the client (a merge flushes before it
// waits for a node's rows).
func (l *lazyJSON) Flush() error {
	return http.NewResponseController(l.w).Flush()
}
