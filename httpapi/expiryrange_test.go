package httpapi_test

import (
	"strings"
	"testing"
)

// TestExpiryPast32BitsIsRefused: Couchbase's expiry is 32 bits. An expiry
// past 4294967295 (a write's, a touch's, a get-and-touch's, a _bulk line's)
// is a 400 that says so, and changes nothing; it used to be stored with an
// expiration the document's revision truncated to 0.
func TestExpiryPast32BitsIsRefused(t *testing.T) {
	f := newFixture(t)
	const over = "4294967296"
	refused := func(what string, st int, body string) {
		t.Helper()
		if st != 400 || jsonOf(t, body)["error"] != "bad_request" || !strings.Contains(body, "at most 4294967295") {
			t.Errorf("%s: %d %s, want 400 naming the limit", what, st, body)
		}
	}
	st, _, body := f.do("PUT", "/default/docs/far?expiry="+over, "application/json", `{}`)
	refused("PUT ?expiry", st, body)
	if st, _, _ := f.do("GET", "/default/docs/far", "", ""); st != 404 {
		t.Errorf("the refused write was stored: %d", st)
	}
	// The largest expiry is taken whole.
	st, _, body = f.do("PUT", "/default/docs/far?expiry=4294967295", "application/json", `{}`)
	if st != 201 || jsonOf(t, body)["expiration"] != float64(4294967295) || !strings.Contains(jsonOf(t, body)["rev"].(string), "ffffffff") {
		t.Fatalf("PUT ?expiry=4294967295: %d %s", st, body)
	}
	st, _, body = f.do("POST", "/default/docs/far/touch?expiry="+over, "", "")
	refused("touch", st, body)
	st, _, body = f.do("GET", "/default/docs/far?touch="+over, "", "")
	refused("get-and-touch", st, body)
	if _, _, body := f.do("GET", "/default/docs/far?meta=true", "", ""); !strings.Contains(body, `"expiration":4294967295`) {
		t.Errorf("the refused touches changed the expiration: %s", body)
	}
	res := f.bulkLines(`{"op":"upsert","id":"b1","doc":{},"expiry":` + over + "}\n" +
		`{"op":"touch","id":"far","expiry":` + over + "}\n" +
		`{"op":"upsert","id":"b2","doc":{},"expiry":60}` + "\n")
	if len(res) != 3 {
		t.Fatalf("bulk: %v", res)
	}
	for i, r := range res[:2] {
		if r["error"] != "bad_request" || !strings.Contains(r["reason"].(string), "at most 4294967295") {
			t.Errorf("bulk line %d: %v, want bad_request naming the limit", i+1, r)
		}
	}
	if res[2]["error"] != nil || res[2]["expiration"] == float64(0) {
		t.Errorf("bulk line 3: %v", res[2])
	}
	if st, _, _ := f.do("GET", "/default/docs/b1", "", ""); st != 404 {
		t.Errorf("the refused bulk line was stored: %d", st)
	}
}
