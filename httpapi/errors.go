package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/mayflydb/mayfly/changes"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/reason"
	"github.com/mayflydb/mayfly/search"
	"github.com/mayflydb/mayfly/views"
)

// ErrShuttingDown is the cause the server's requests in flight are to end
// with when it begins to shut down: give the http.Server a BaseContext
// cancelled with context.WithCancelCause's cancel(ErrShuttingDown). A
// request it cuts short before its answer began (a stale=false view query
// waiting for its index, …) is then answered 503 temporary_failure, so that
// its client knows to retry, where one whose client hung up gets no answer.
var ErrShuttingDown = errors.New("the server is shutting down: retry once it is back (or on another node)")

// httpError is an error with its HTTP status and JSON error code.
type httpError struct {
	status int
	code   string
	reason string
}

func (e *httpError) Error() string { return e.code + ": " + e.reason }

func errBadRequest(reason string) error {
	return &httpError{status: http.StatusBadRequest, code: "bad_request", reason: reason}
}

func errNotFound(reason string) error {
	return &httpError{status: http.StatusNotFound, code: "not_found", reason: reason}
}

// classify maps any error to its status and JSON code. It is the one place
// where errors become HTTP. The reason it gives reads without the Go package
// prefixes of the error texts ("engine: ..."): see internal/reason.
func classify(err error) *httpError {
	he := classifyCode(err)
	if r := reason.Strip(he.reason); r != he.reason {
		he = &httpError{status: he.status, code: he.code, reason: r}
	}
	return he
}

func classifyCode(err error) *httpError {
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	if he := classifySearch(err); he != nil {
		return he
	}
	if he := classifyChanges(err); he != nil {
		return he
	}
	if he := classifyViews(err); he != nil {
		return he
	}
	if he := classifyPager(err); he != nil {
		return he
	}
	if he := classifyAuth(err); he != nil {
		return he
	}
	msg := err.Error()
	switch {
	case errors.Is(err, ErrShuttingDown):
		return &httpError{http.StatusServiceUnavailable, "temporary_failure", msg}
	case errors.Is(err, engine.ErrNotFound), errors.Is(err, engine.ErrBucketNotFound),
		errors.Is(err, engine.ErrScopeNotFound), errors.Is(err, engine.ErrCollectionNotFound):
		return &httpError{http.StatusNotFound, "not_found", msg}
	case errors.Is(err, engine.ErrKeyExists):
		return &httpError{http.StatusConflict, "key_exists", msg}
	case errors.Is(err, engine.ErrCASMismatch):
		return &httpError{http.StatusConflict, "cas_mismatch", msg}
	case errors.Is(err, engine.ErrLocked):
		return &httpError{http.StatusLocked, "locked", msg + " (a Couchbase client holds a lock on it, GetAndLock; it ends on unlock, on the holder's write, or after at most 30 s)"}
	case errors.Is(err, engine.ErrInvalidKey):
		return &httpError{http.StatusBadRequest, "invalid_key", msg}
	case errors.Is(err, engine.ErrValueTooLarge):
		return &httpError{http.StatusRequestEntityTooLarge, "too_large", msg}
	case errors.Is(err, engine.ErrInvalidSetting), errors.Is(err, engine.ErrInvalidOp), errors.Is(err, engine.ErrBucketExists),
		errors.Is(err, engine.ErrScopeExists), errors.Is(err, engine.ErrCollectionExists):
		return &httpError{http.StatusBadRequest, "bad_request", msg}
	case errors.Is(err, engine.ErrClosed):
		// Before ErrStorage: a store read of a bucket closed under it
		// fails because of the close, not of the disk.
		return &httpError{http.StatusServiceUnavailable, "unavailable", msg}
	case errors.Is(err, engine.ErrStorage):
		return &httpError{http.StatusInsufficientStorage, "insufficient_storage", msg}
	case errors.Is(err, engine.ErrTempOOM), errors.Is(err, engine.ErrWarmup), errors.Is(err, engine.ErrNotMyVBucket), errors.Is(err, engine.ErrTempFail):
		return &httpError{http.StatusServiceUnavailable, "temporary_failure", msg}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, views.ErrTimeout):
		return &httpError{http.StatusServiceUnavailable, "timeout", msg}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &httpError{http.StatusRequestEntityTooLarge, "too_large", "request body is over the limit"}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &httpError{http.StatusRequestTimeout, "request_timeout", "the request body did not arrive in time"}
	}
	return &httpError{http.StatusInternalServerError, "internal_error", msg}
}

// apiHandler is a handler that returns its error instead of answering it.
// ServeHTTP answers a returned error once, through writeError: every
// handler's status codes and error bodies come from classify. A handler
// returns an error only while it has written nothing; once it has begun its
// answer it deals with failures itself (a streamed view query logs them).
type apiHandler func(w http.ResponseWriter, r *http.Request) error

// ServeHTTP runs h and answers its error: one that is the end of the
// request's context, when the server's shutdown ended it, as
// ErrShuttingDown.
func (h apiHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h(w, r); err != nil {
		if errors.Is(err, context.Canceled) && shuttingDown(r) {
			err = ErrShuttingDown
		}
		writeError(w, err)
	}
}

// shuttingDown reports whether r's context ended because the server is
// shutting down (see ErrShuttingDown), not because its client left.
func shuttingDown(r *http.Request) bool {
	return r.Context().Err() != nil && errors.Is(context.Cause(r.Context()), ErrShuttingDown)
}

// classifySearch maps the search package's errors. The first of them in
// err's chain (in the order errors.As looks) decides, whatever it wraps: a
// definition naming a collection that does not exist is a refused
// definition (400), not the engine's missing collection (404); an index that
// cannot load stays a 500 whatever refused it.
func classifySearch(err error) *httpError {
	var found *httpError
	walkErrors(err, func(e error) bool {
		switch e := e.(type) {
		case *search.DefError, *search.QueryError:
			found = &httpError{status: http.StatusBadRequest, code: "bad_request"}
		default:
			switch e {
			case search.ErrNotFound:
				found = &httpError{status: http.StatusNotFound, code: "not_found"}
			case search.ErrNoSearch:
				found = &httpError{status: http.StatusBadRequest, code: "bad_request"}
			case search.ErrLoadFailed:
				found = &httpError{status: http.StatusInternalServerError, code: "internal_error"}
			case search.ErrClosed:
				found = &httpError{status: http.StatusServiceUnavailable, code: "unavailable"}
			}
		}
		return found != nil
	})
	if found != nil {
		found.reason = err.Error()
	}
	return found
}

// classifyChanges maps the change feed's errors: a bad parameter and a
// since the bucket cannot serve are both 400s; the second says to start
// again.
func classifyChanges(err error) *httpError {
	switch {
	case errors.Is(err, changes.ErrRollback):
		return &httpError{http.StatusBadRequest, "rollback", err.Error()}
	case errors.Is(err, changes.ErrBadRequest):
		return &httpError{http.StatusBadRequest, "bad_request", err.Error()}
	}
	return nil
}

// walkErrors calls fn on err and the errors it wraps, depth first in the
// order errors.As looks, until fn returns true.
func walkErrors(err error, fn func(error) bool) bool {
	if err == nil {
		return false
	}
	if fn(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return walkErrors(u.Unwrap(), fn)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if walkErrors(e, fn) {
				return true
			}
		}
	}
	return false
}

// answers makes h, which answers its errors itself, an apiHandler.
func answers(h http.Handler) apiHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		h.ServeHTTP(w, r)
		return nil
	}
}

// writeError writes err as {"error": code, "reason": reason}; an error of
// the search REST API (ftsError) as the FTS service does, {"status":
// "fail", "error": reason}. Every handler's error is answered here, once
// (apiHandler).
func writeError(w http.ResponseWriter, err error) {
	he := classify(err)
	if errors.Is(err, engine.ErrWarmup) || errors.Is(err, engine.ErrTempOOM) {
		// Couchbase's temporary failures (the bucket warming up; over its
		// quota with noEviction, ENOMEM "retry later" in its error map):
		// the same write may pass once memory is freed.
		w.Header().Set("Retry-After", "1")
	}
	var fe *ftsError
	if errors.As(err, &fe) {
		status, msg := he.status, he.reason
		if he.status == http.StatusNotFound && errors.Is(err, search.ErrNotFound) {
			// A missing index is cbft's 400 saying "index not found" (here
			// "index not found: index x"), which the SDKs match (gocb's
			// ErrIndexNotFound); gocb's index manager reads a 404 as a
			// route the server lacks.
			status, msg = http.StatusBadRequest, "index "+msg
		}
		writeJSON(w, status, map[string]string{"status": "fail", "error": msg})
		return
	}
	out := map[string]any{"error": he.code, "reason": he.reason}
	if errors.As(err, new(*bucketSettingError)) {
		if field, msg, ok := settingField(err); ok {
			// Couchbase's shape for a refused bucket setting, beside ours.
			out["errors"] = map[string]string{field: msg}
		}
	} else if we := (*withErrors)(nil); errors.As(err, &we) {
		out["errors"] = we.errors
	} else if e := couchbaseErrors(err); e != nil {
		out["errors"] = e
	}
	// A bad view query parameter keeps Couchbase's error and reason, which
	// do not always name it (`Invalid value for integer parameter: "abc"`),
	// and names it in a field of its own.
	var qe *views.QueryError
	if errors.As(err, &qe) && qe.Param != "" {
		out["param"] = qe.Param
	}
	writeJSON(w, he.status, out)
}

// couchbaseErrors is the "errors" object Couchbase's bucket REST API answers
// with, for the errors whose text the SDKs' bucket managers look for in it
// (gocb's ErrBucketExists and ErrBucketNotFound), or nil.
func couchbaseErrors(err error) map[string]string {
	switch {
	case errors.Is(err, engine.ErrBucketExists):
		return map[string]string{"name": "Bucket with given name already exists"}
	case errors.Is(err, engine.ErrBucketNotFound):
		return bucketMissing()
	}
	return nil
}

// withErrors is err answered with Couchbase's "errors" object besides.
type withErrors struct {
	err    error
	errors map[string]string
}

func (e *withErrors) Error() string { return e.err.Error() }
func (e *withErrors) Unwrap() error { return e.err }

// bucketMissing is the "errors" object of a missing bucket's 404: gocb
// reads "resource not found" in the body as ErrBucketNotFound.
func bucketMissing() map[string]string {
	return map[string]string{"_": "Requested resource not found."}
}

// writeJSON writes v as JSON with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal_error","reason":"cannot encode the response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// bucketSettingError marks a bucket create or edit refused for a setting
// out of range: its answer also carries Couchbase's {"errors": {setting:
// message}}.
type bucketSettingError struct{ err error }

func (e *bucketSettingError) Error() string { return e.err.Error() }
func (e *bucketSettingError) Unwrap() error { return e.err }

// settingField splits a refused setting's error ("...invalid setting:
// name: message") into the setting's name and the message.
func settingField(err error) (field, msg string, ok bool) {
	const mark = "invalid setting: "
	s := err.Error()
	i := strings.LastIndex(s, mark)
	if i < 0 {
		return "", "", false
	}
	field, msg, ok = strings.Cut(s[i+len(mark):], ": ")
	if !ok || field == "" || strings.ContainsAny(field, " \t") {
		return "", "", false
	}
	return field, msg, true
}
