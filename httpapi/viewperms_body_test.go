package httpapi_test

import (
	"strings"
	"testing"
)

// A view query's include_docs returns the documents, so it needs
// data_reader as well as views_reader, wherever the parameter is given: in
// the query string, or in a POSTed query's JSON body, whose members count as
// parameters (CouchDB's POST queries). A views_reader without data_reader is
// refused 403 either way, and no document body reaches it. (A review found
// the permission was checked against the query string alone, so
// {"include_docs":true} in the body handed a views_reader every document.)
func TestViewQueryIncludeDocsInBodyNeedsDataReader(t *testing.T) {
	f := newFixture(t)
	f.do("PUT", "/default/docs/secret", "application/json", `{"card":"4111-1111"}`)
	f.do("PUT", "/default/_design/d", "application/json", `{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`)
	f.addUser("viewer", "viewerpw", "views_reader[default]")
	if st, _, body := f.doAs("viewer", "viewerpw", "GET", "/default/_design/d/_view/v?stale=false", "", ""); st != 200 || !strings.Contains(body, `"secret"`) {
		t.Fatalf("views_reader query: %d %s; want 200 with the row", st, body)
	}
	if st, _, body := f.doAs("viewer", "viewerpw", "GET", "/default/_design/d/_view/v?stale=false&include_docs=true", "", ""); st != 403 {
		t.Fatalf("views_reader include_docs in the query string: %d %s; want 403", st, body)
	}
	for _, body := range []string{
		`{"include_docs":true}`,
		`{"keys":["secret"],"include_docs":true}`,
		`{"include_docs":"true"}`,
	} {
		st, _, got := f.doAs("viewer", "viewerpw", "POST", "/default/_design/d/_view/v?stale=false", "application/json", body)
		if st != 403 || strings.Contains(got, "4111") {
			t.Errorf("views_reader POST %s: %d %s; want 403 needing cluster.bucket[default].data.docs!read, no document", body, st, got)
		}
	}
	// An administrator's POST with include_docs in the body still gets them.
	if st, _, got := f.do("POST", "/default/_design/d/_view/v?stale=false", "application/json", `{"keys":["secret"],"include_docs":true}`); st != 200 || !strings.Contains(got, "4111") {
		t.Errorf("admin POST include_docs in the body: %d %s; want 200 with the document", st, got)
	}
}
