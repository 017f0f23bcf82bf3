package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// classify gives search's errors their statuses; the first search error in
// the chain decides, whatever it wraps: a refused definition naming a
// missing collection stays a 400, an index that cannot load because its
// stored definition is refused stays a 500.
func TestClassifySearchErrors(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		reason string
	}{
		{fmt.Errorf("%w: index x not found in bucket b", search.ErrNotFound), http.StatusNotFound, "not found: index x not found in bucket b"},
		{fmt.Errorf("%w: bucket b is a memcached bucket", search.ErrNoSearch), http.StatusBadRequest, "this bucket type has no search indexes: bucket b is a memcached bucket"},
		{fmt.Errorf("%w: index x was replaced, deleted or closed", search.ErrClosed), http.StatusServiceUnavailable, "closed: index x was replaced, deleted or closed"},
		{&search.QueryError{Reason: "the request has no query"}, http.StatusBadRequest, "invalid search request: the request has no query"},
		{&search.DefError{Reason: "sourceCollection s.c: no such collection", Err: engine.ErrCollectionNotFound}, http.StatusBadRequest,
			"invalid index definition: sourceCollection s.c: no such collection"},
		{fmt.Errorf("%w: index x: %w", search.ErrLoadFailed, &search.DefError{Reason: "bad"}), http.StatusInternalServerError,
			"index could not be loaded: index x: invalid index definition: bad"},
		{&ftsError{fmt.Errorf("%w: index x", search.ErrNotFound)}, http.StatusNotFound, "not found: index x"},
	} {
		he := classify(c.err)
		if he.status != c.status || he.reason != c.reason {
			t.Errorf("%v: %d %q, want %d %q", c.err, he.status, he.reason, c.status, c.reason)
		}
	}
}

// A returned error is answered once, in the shape of its route: the FTS
// service's {"status":"fail","error":...} where fts marks it, Couchbase's
// {"error":...,"reason":...} elsewhere.
func TestAPIHandlerAnswersErrors(t *testing.T) {
	fail := func(http.ResponseWriter, *http.Request) error { return errBadRequest("no") }
	for _, c := range []struct {
		h    apiHandler
		want string
	}{
		{fail, `{"error":"bad_request","reason":"no"}` + "\n"},
		{fts(fail), `{"error":"no","status":"fail"}` + "\n"},
	} {
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != http.StatusBadRequest || rec.Body.String() != c.want {
			t.Errorf("%d %q, want 400 %q", rec.Code, rec.Body.String(), c.want)
		}
	}
}
