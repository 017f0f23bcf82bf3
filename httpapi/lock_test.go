package httpapi_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// TestLockedDocument: a write to a document a Couchbase SDK locked is 423
// Locked with a reason (not 409, so a client's conflict loop does not spin
// on it); a write with the lock CAS goes through.
func TestLockedDocument(t *testing.T) {
	f := newFixture(t)
	if st, _, body := f.do("PUT", "/default/docs/a", "", `1`); st != 201 {
		t.Fatalf("PUT: %d %s", st, body)
	}
	l, err := f.mustBucket("default").DefaultCollection().GetLocked(context.Background(), "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []struct{ method, path string }{{"PUT", "/default/docs/a"}, {"DELETE", "/default/docs/a"}} {
		st, _, body := f.do(req.method, req.path, "", `2`)
		if m := jsonOf(t, body); st != 423 || m["error"] != "locked" || !strings.Contains(m["reason"].(string), "lock") {
			t.Fatalf("%s of a locked document: %d %s", req.method, st, body)
		}
	}
	if st, _, body := f.do("GET", "/default/docs/a", "", ""); st != 200 || body != "1" {
		t.Fatalf("GET of a locked document: %d %s", st, body)
	}
	if st, _, body := f.do("PUT", "/default/docs/a?cas="+strconv.FormatUint(l.CAS, 10), "", `3`); st != 200 {
		t.Fatalf("PUT with the lock CAS: %d %s", st, body)
	}
	if st, _, body := f.do("PUT", "/default/docs/a", "", `4`); st != 200 {
		t.Fatalf("PUT after the holder's write: %d %s", st, body)
	}
}
