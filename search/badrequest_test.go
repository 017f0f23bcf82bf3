package search_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// TestNegativeFacetSize: a facet asking for a negative number of terms or
// ranges, or a null facet, is a bad request, refused with a reason, on an
// index and on an alias of two. bleve slices its facet results to the size asked, and
// panics on a negative one: in the request's goroutine for an index, in one
// of its own for an alias of two or more (which no HTTP server recovers:
// the process dies).
func TestNegativeFacetSize(t *testing.T) {
	e := loadHotels(t, engine.Couchbase)
	ctx := context.Background()
	e.createIndex("more", `{}`)
	if _, err := e.svc.PutIndex(ctx, "default", "both", []byte(`{"type":"fulltext-alias","params":{"targets":{"hotels":{},"more":{}}}}`)); err != nil {
		t.Fatal(err)
	}
	e.query("both", `{"query":{"match_all":{}},`+atPlus+`}`)
	for _, facet := range []string{
		`{"field":"city","size":-1}`,
		`{"field":"price","size":-2,"numeric_ranges":[{"name":"cheap","max":100}]}`,
		`{"field":"opened","size":-1,"date_ranges":[{"name":"old","end":"2000-01-01T00:00:00Z"}]}`,
	} {
		for _, index := range []string{"hotels", "both"} {
			req := `{"query":{"match_all":{}},"facets":{"f":` + facet + `}}`
			err := queryNoPanic(t, e, index, req)
			var qe *search.QueryError
			if !errors.As(err, &qe) || !strings.Contains(qe.Reason, "size") {
				t.Errorf("%s on %s: %v, want a QueryError about the facet's size", req, index, err)
			}
		}
	}
	// A null facet is refused too (bleve dereferences it).
	if _, err := e.svc.Query(ctx, "default", "both", []byte(`{"query":{"match_all":{}},"facets":{"f":null}}`)); !errors.As(err, new(*search.QueryError)) {
		t.Errorf("a null facet: %v, want a QueryError", err)
	}
}

// TestIncompleteGeometry: a geometry query whose coordinates are
// incomplete (a point of one number, an envelope of one corner, a polygon
// ring without points, ...) is a bad request, refused with a reason. bleve's
// GeoJSON parser indexes the coordinates unchecked and panics as it decodes
// the request: over HTTP, the connection dropped without an answer.
func TestIncompleteGeometry(t *testing.T) {
	e := loadHotels(t, engine.Couchbase)
	ctx := context.Background()
	for _, shape := range []string{
		`{"type":"point","coordinates":[]}`,
		`{"type":"point","coordinates":[0]}`,
		`{"type":"envelope","coordinates":[[0,0]]}`,
		`{"type":"polygon","coordinates":[[[0]]]}`,
		`{"type":"multipolygon","coordinates":[[[]]]}`,
		`{"type":"linestring","coordinates":[[]]}`,
		`{"type":"circle","coordinates":[],"radius":"1km"}`,
		`{"type":"geometrycollection","geometries":[{"type":"point","coordinates":[]}]}`,
	} {
		req := `{"query":{"geometry":{"shape":` + shape + `,"relation":"intersects"},"field":"shape"}}`
		if err := queryNoPanic(t, e, "hotels", req); !errors.As(err, new(*search.QueryError)) {
			t.Errorf("%s: %v, want a QueryError", req, err)
		}
	}
	// A whole geometry still parses and runs.
	if _, err := e.svc.Query(ctx, "default", "hotels", []byte(`{"query":{"geometry":{"shape":{"type":"point","coordinates":[2.35,48.85]},"relation":"intersects"},"field":"shape"}}`)); err != nil {
		t.Errorf("a point query: %v", err)
	}
}

// TestKNNRefused: a vector search (knn) is refused with a reason, not
// answered with the plain query's hits as if they were its nearest
// neighbours (Mayfly's bleve is built without vector support, and drops
// knn as it decodes the request); a request whose knn is null is a plain
// query.
func TestKNNRefused(t *testing.T) {
	e := loadHotels(t, engine.Couchbase)
	ctx := context.Background()
	_, err := e.svc.Query(ctx, "default", "hotels", []byte(`{"query":{"match_none":{}},"knn":[{"field":"vec","vector":[0.1,0.2,0.3],"k":3}]}`))
	var qe *search.QueryError
	if !errors.As(err, &qe) || !strings.Contains(qe.Reason, "knn") {
		t.Errorf("a knn request: %v, want a QueryError naming knn", err)
	}
	if _, err := e.svc.Query(ctx, "default", "hotels", []byte(`{"query":{"match_all":{}},"knn":null}`)); err != nil {
		t.Errorf("knn null: %v", err)
	}
}

// TestResultWindowOverflow: from and size whose sum overflows an int are
// over the result window like any other, refused with a reason. The sum
// wrapped negative and passed the check, and bleve's collector panicked
// (makeslice: cap out of range): on an alias of two indexes in a goroutine
// of bleve's own, which stops the process.
func TestResultWindowOverflow(t *testing.T) {
	e := loadHotels(t, engine.Couchbase)
	ctx := context.Background()
	e.createIndex("more", `{}`)
	if _, err := e.svc.PutIndex(ctx, "default", "both", []byte(`{"type":"fulltext-alias","params":{"targets":{"hotels":{},"more":{}}}}`)); err != nil {
		t.Fatal(err)
	}
	e.query("both", `{"query":{"match_all":{}},`+atPlus+`}`)
	for _, window := range []string{
		`"from":4611686018427387904,"size":4611686018427387904`,
		`"from":9223372036854775807,"size":1`,
		`"from":1,"size":9223372036854775807`,
	} {
		for _, index := range []string{"hotels", "both"} {
			req := `{"query":{"match_all":{}},` + window + `}`
			err := queryNoPanic(t, e, index, req)
			var qe *search.QueryError
			if !errors.As(err, &qe) || !strings.Contains(qe.Reason, "10000") {
				t.Errorf("%s on %s: %v, want a QueryError naming the limit of 10000", req, index, err)
			}
		}
	}
}

// queryNoPanic runs req on index of bucket default and returns its error; a
// panic (in the test's goroutine: an index alone) fails the test and is
// returned as an error.
func queryNoPanic(t *testing.T, e *env, index, req string) (err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			err = errors.New("panic")
			t.Errorf("%s on %s: panic %v", req, index, p)
		}
	}()
	_, err = e.svc.Query(context.Background(), "default", index, []byte(req))
	return err
}

// TestNegativeSizeOrFrom: a request asking for a negative size or from is a
// bad request naming the field, as the other bad parameters are. bleve
// quietly replaced them (size by 10, from by 0), answering a page the client
// did not ask for. A size or from of null stays bleve's default.
func TestNegativeSizeOrFrom(t *testing.T) {
	for _, tc := range []struct{ window, field string }{
		{`"size":-1`, "size -1"},
		{`"from":-1`, "from -1"},
		{`"size":5,"from":-3`, "from -3"},
		{`"size":-9223372036854775808`, "size -9223372036854775808"},
	} {
		req := `{"query":{"match_all":{}},` + tc.window + `}`
		_, _, _, err := search.ParseRequest([]byte(req))
		var qe *search.QueryError
		if !errors.As(err, &qe) || !strings.Contains(qe.Reason, tc.field) {
			t.Errorf("%s: %v, want a QueryError naming %q", req, err, tc.field)
		}
	}
	sr, _, _, err := search.ParseRequest([]byte(`{"query":{"match_all":{}},"size":null,"from":null}`))
	if err != nil || sr.Size != 10 || sr.From != 0 {
		t.Errorf("size and from null: %v, size %d, from %d; want the defaults 10 and 0", err, sr.Size, sr.From)
	}
}
