package httpapi_test

import (
	"strings"
	"testing"
)

// nested is a JSON value of depth arrays, one inside the other.
func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

// TestDeepJSONRefusedWhateverItsContentType: a body that would be stored as
// a JSON document but nests deeper than 10,000 levels is a 400 whatever its
// content type (as application/json's "exceeded max depth"), and so is a
// _bulk line's doc: stored, it could not be read back as JSON (GET
// ?meta=true, listings with include_docs answered 500). One at the limit is
// stored and reads back.
func TestDeepJSONRefusedWhateverItsContentType(t *testing.T) {
	f := newFixture(t)
	deep := nested(10001)
	for _, ct := range []string{"application/json", "application/octet-stream", "application/x-www-form-urlencoded", ""} {
		st, _, body := f.do("PUT", "/default/docs/deep", ct, deep)
		if st != 400 || jsonOf(t, body)["error"] != "bad_request" || !strings.Contains(body, "max depth") {
			t.Errorf("Content-Type %q: %d %.300s, want 400 exceeded max depth", ct, st, body)
		}
	}
	if st, _, _ := f.do("GET", "/default/docs/deep", "", ""); st != 404 {
		t.Fatalf("the deep body was stored: %d", st)
	}
	// Brackets inside strings are not nesting, and a binary body is no JSON.
	for key, v := range map[string]string{"str": `["` + strings.Repeat("[", 20000) + `"]`, "bin": strings.Repeat("[", 20000)} {
		if st, _, body := f.do("PUT", "/default/docs/"+key, "application/octet-stream", v); st != 201 {
			t.Errorf("%s: %d %.300s", key, st, body)
		}
	}
	if st, _, body := f.do("PUT", "/default/docs/limit", "application/octet-stream", nested(10000)); st != 201 {
		t.Fatalf("10,000 levels: %d %.300s", st, body)
	}
	for _, path := range []string{"/default/docs/limit?meta=true", "/default/docs/str?meta=true", "/default/docs/bin?meta=true",
		"/pools/default/buckets/default/scopes/_default/collections/_default/docs?include_docs=true"} {
		if st, _, body := f.do("GET", path, "", ""); st != 200 {
			t.Errorf("GET %s: %d %.300s", path, st, body)
		}
	}
	res := f.bulkLines(`{"op":"upsert","id":"bdeep","doc":` + deep + "}\n" + `{"op":"upsert","id":"bok","doc":` + nested(10000) + "}\n")
	if len(res) != 2 || res[0]["error"] != "bad_request" || !strings.Contains(res[0]["reason"].(string), "max depth") || res[1]["error"] != nil {
		t.Errorf("bulk: %v", res)
	}
	if st, _, body := f.do("GET", "/default/docs/bok?meta=true", "", ""); st != 200 {
		t.Errorf("bulk doc at the limit: %d %.300s", st, body)
	}
}
