package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// HEAD answers like GET, headers and status, without a body.
func TestHeadDocument(t *testing.T) {
	f := newFixture(t)
	if status, _, body := f.do(http.MethodPut, "/default/docs/k", "", `{"x":1}`); status != http.StatusCreated {
		t.Fatalf("PUT: %d %s", status, body)
	}
	status, h, body := f.do(http.MethodHead, "/default/docs/k", "", "")
	if status != http.StatusOK || h.Get("X-Mayfly-Cas") == "" || body != "" {
		t.Errorf("HEAD of a document: %d, cas %q, body %q", status, h.Get("X-Mayfly-Cas"), body)
	}
	if status, _, body := f.do(http.MethodHead, "/default/docs/missing", "", ""); status != http.StatusNotFound || body != "" {
		t.Errorf("HEAD of a missing document: %d %q", status, body)
	}
}

// A body declared as application/json must be JSON (400 saying where it
// breaks); without that header non-JSON is stored as a binary document.
func TestDeclaredJSONMustBeJSON(t *testing.T) {
	f := newFixture(t)
	status, _, body := f.do(http.MethodPut, "/default/docs/bad", "application/json", `{bad`)
	if status != http.StatusBadRequest || !strings.Contains(body, "at byte") {
		t.Errorf("invalid JSON declared as JSON: %d %s", status, body)
	}
	if status, _, _ := f.do(http.MethodGet, "/default/docs/bad", "", ""); status != http.StatusNotFound {
		t.Errorf("the refused document was stored: %d", status)
	}
	if status, _, body := f.do(http.MethodPut, "/default/docs/raw", "", `{bad`); status != http.StatusCreated {
		t.Errorf("non-JSON without a JSON content type: %d %s", status, body)
	}
	if _, _, body := f.do(http.MethodGet, "/default/docs/raw?meta=true", "", ""); !strings.Contains(body, `"base64"`) {
		t.Errorf("non-JSON not stored as binary: %s", body)
	}
	if status, _, body := f.do(http.MethodPut, "/default/docs/ok", "application/json; charset=utf-8", `{"a":1}`); status != http.StatusCreated {
		t.Errorf("valid JSON: %d %s", status, body)
	}
}

// Scopes and collections are dropped over Couchbase's REST paths, their
// documents with them.
func TestDropScopeAndCollection(t *testing.T) {
	f := newFixture(t)
	form := "application/x-www-form-urlencoded"
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/pools/default/buckets/default/scopes", "name=s"},
		{http.MethodPost, "/pools/default/buckets/default/scopes/s/collections", "name=c"},
		{http.MethodPost, "/pools/default/buckets/default/scopes/s/collections", "name=d"},
		{http.MethodPut, "/default/docs/k?collection=s.c", `{"a":1}`},
	} {
		if status, _, body := f.do(c.method, c.path, form, c.body); status/100 != 2 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, status, body)
		}
	}
	if status, _, body := f.do(http.MethodDelete, "/pools/default/buckets/default/scopes/s/collections/c", "", ""); status != http.StatusOK {
		t.Fatalf("drop collection: %d %s", status, body)
	}
	if status, _, _ := f.do(http.MethodGet, "/default/docs/k?collection=s.c", "", ""); status != http.StatusNotFound {
		t.Errorf("document of a dropped collection: %d", status)
	}
	if status, _, _ := f.do(http.MethodDelete, "/pools/default/buckets/default/scopes/s/collections/c", "", ""); status != http.StatusNotFound {
		t.Errorf("dropping it again: %d, want 404", status)
	}
	if status, _, body := f.do(http.MethodDelete, "/pools/default/buckets/default/scopes/s", "", ""); status != http.StatusOK {
		t.Fatalf("drop scope: %d %s", status, body)
	}
	if _, _, body := f.do(http.MethodGet, "/pools/default/buckets/default/scopes", "", ""); strings.Contains(body, `"s"`) {
		t.Errorf("dropped scope still listed: %s", body)
	}
	if status, _, _ := f.do(http.MethodDelete, "/pools/default/buckets/default/scopes/_default", "", ""); status != http.StatusBadRequest {
		t.Errorf("dropping _default: %d, want 400", status)
	}
}

// ramQuota (Couchbase's name, MiB) is stored and reported, as ramQuotaMB is.
func TestRAMQuotaStored(t *testing.T) {
	f := newFixture(t)
	if status, _, body := f.do(http.MethodPost, "/pools/default/buckets", "application/x-www-form-urlencoded", "name=q&bucketType=couchbase&ramQuota=256"); status/100 != 2 {
		t.Fatalf("create: %d %s", status, body)
	}
	if _, _, body := f.do(http.MethodGet, "/pools/default/buckets/q", "", ""); !strings.Contains(body, `"ram":268435456`) {
		t.Errorf("quota not reported as asked: %s", body)
	}
}

// GET /{bucket}/_expiry forecasts what expires per interval ahead.
func TestExpiryForecastEndpoint(t *testing.T) {
	f := newFixture(t)
	for i, exp := range []string{"30", "30", "90", "0"} {
		if status, _, body := f.do(http.MethodPut, "/default/docs/k"+string(rune('a'+i))+"?expiry="+exp, "", `{"v":1}`); status/100 != 2 {
			t.Fatalf("PUT: %d %s", status, body)
		}
	}
	status, _, body := f.do(http.MethodGet, "/default/_expiry?interval=60&horizon=120", "", "")
	if status != http.StatusOK {
		t.Fatalf("forecast: %d %s", status, body)
	}
	m := jsonOf(t, body)
	ivs, _ := m["intervals"].([]any)
	if len(ivs) != 2 || ivs[0].(map[string]any)["docs"] != 2.0 || ivs[1].(map[string]any)["docs"] != 1.0 {
		t.Errorf("intervals: %s", body)
	}
	if status, _, _ := f.do(http.MethodGet, "/default/_expiry?interval=0", "", ""); status != http.StatusBadRequest {
		t.Errorf("interval 0: %d, want 400", status)
	}
}

// A forecast over a horizon of billions of years answers (one or two
// intervals, whatever the values' sizes), and one past the largest Unix
// time is a 400: neither drops the connection on an overflow.
func TestExpiryForecastHugeValues(t *testing.T) {
	f := newFixture(t)
	for i, exp := range []string{"30", "4000000000"} { // relative, absolute
		if status, _, body := f.do(http.MethodPut, "/default/docs/k"+string(rune('a'+i))+"?expiry="+exp, "", `{"v":1}`); status/100 != 2 {
			t.Fatalf("PUT: %d %s", status, body)
		}
	}
	const h = "9000000000000000000"
	for _, c := range []struct {
		query string
		docs  []float64
	}{
		{"interval=" + h + "&horizon=" + h, []float64{2}},
		{"interval=5000000000000000000&horizon=" + h, []float64{2, 0}},
	} {
		status, _, body := f.do(http.MethodGet, "/default/_expiry?"+c.query, "", "")
		if status != http.StatusOK {
			t.Errorf("forecast %s: %d %s, want 200", c.query, status, body)
			continue
		}
		m := jsonOf(t, body)
		ivs, _ := m["intervals"].([]any)
		if len(ivs) != len(c.docs) {
			t.Errorf("forecast %s: %d intervals, want %d: %s", c.query, len(ivs), len(c.docs), body)
			continue
		}
		for i, want := range c.docs {
			if iv := ivs[i].(map[string]any); iv["docs"] != want || iv["end"].(float64) <= iv["start"].(float64) {
				t.Errorf("forecast %s: interval %d is %v, want %v documents", c.query, i, iv, want)
			}
		}
	}
	for _, q := range []string{
		"interval=4611686018427387903&horizon=9223372036854775807",
		"interval=9223372036854775807&horizon=9223372036854775807",
	} {
		status, _, body := f.do(http.MethodGet, "/default/_expiry?"+q, "", "")
		if status != http.StatusBadRequest || !strings.Contains(body, `"bad_request"`) {
			t.Errorf("forecast %s: %d %s, want 400 bad_request", q, status, body)
		}
	}
}

// A get-and-touch refused for a bad parameter leaves the document as it
// was: no new expiration, no new CAS.
func TestRefusedGetAndTouchDoesNotTouch(t *testing.T) {
	f := newFixture(t)
	if status, _, body := f.do(http.MethodPut, "/default/docs/k", "", `{"x":1}`); status != http.StatusCreated {
		t.Fatalf("PUT: %d %s", status, body)
	}
	_, before, _ := f.do(http.MethodGet, "/default/docs/k", "", "")
	status, _, body := f.do(http.MethodGet, "/default/docs/k?touch=100&meta=bogus", "", "")
	if status != http.StatusBadRequest || !strings.Contains(body, `"bad_request"`) {
		t.Errorf("get-and-touch with meta=bogus: %d %s, want 400 bad_request", status, body)
	}
	_, after, _ := f.do(http.MethodGet, "/default/docs/k", "", "")
	if after.Get("X-Mayfly-Expiration") != before.Get("X-Mayfly-Expiration") || after.Get("X-Mayfly-Cas") != before.Get("X-Mayfly-Cas") {
		t.Errorf("the refused request touched the document: expiration %s → %s, cas %s → %s",
			before.Get("X-Mayfly-Expiration"), after.Get("X-Mayfly-Expiration"), before.Get("X-Mayfly-Cas"), after.Get("X-Mayfly-Cas"))
	}
}

// An empty value is a binary document whose base64 is "" wherever it is
// shown (the envelope, _all_docs and the change feed's include_docs), not
// null, which a client decoding base64 cannot take for an empty value.
func TestEmptyValueBase64(t *testing.T) {
	f := newFixture(t)
	if status, _, body := f.do(http.MethodPut, "/default/docs/empty", "", ""); status != http.StatusCreated {
		t.Fatalf("PUT of an empty body: %d %s", status, body)
	}
	for _, path := range []string{
		"/default/docs/empty?meta=true",
		"/default/_all_docs?include_docs=true",
		"/default/_changes?include_docs=true",
	} {
		status, _, body := f.do(http.MethodGet, path, "", "")
		if status != http.StatusOK || !strings.Contains(body, `"base64":""`) {
			t.Errorf("GET %s: %d %s, want the empty value as \"base64\":\"\"", path, status, body)
		}
	}
}

// JSON is UTF-8: a body declared application/json with invalid UTF-8 in a
// string is refused, and one sent without that type is a binary document
// (Couchbase's checkUTF8JSON), so that every JSON answer showing it (the
// envelope, _all_docs, the change feed) stays valid UTF-8.
func TestInvalidUTF8IsNotJSON(t *testing.T) {
	f := newFixture(t)
	const bad = "{\"a\":\"\xff\"}"
	status, _, body := f.do(http.MethodPut, "/default/docs/declared", "application/json", bad)
	if status != http.StatusBadRequest || !strings.Contains(body, "UTF-8") {
		t.Errorf("invalid UTF-8 declared as JSON: %d %s, want 400 naming UTF-8", status, body)
	}
	if status, _, body := f.do(http.MethodPut, "/default/docs/raw", "", bad); status != http.StatusCreated {
		t.Fatalf("invalid UTF-8 without a type: %d %s", status, body)
	}
	for _, path := range []string{
		"/default/docs/raw?meta=true",
		"/default/_all_docs?include_docs=true",
		"/default/_changes?include_docs=true",
	} {
		status, _, body := f.do(http.MethodGet, path, "", "")
		if status != http.StatusOK || !utf8.ValidString(body) || !strings.Contains(body, `"base64":"eyJhIjoi/yJ9"`) {
			t.Errorf("GET %s: %d %q, want valid UTF-8 with the value as base64", path, status, body)
		}
	}
	status, h, body := f.do(http.MethodGet, "/default/docs/raw", "", "")
	if status != http.StatusOK || h.Get("Content-Type") != "application/octet-stream" || body != bad {
		t.Errorf("GET of the raw value: %d %q %q", status, h.Get("Content-Type"), body)
	}
}
