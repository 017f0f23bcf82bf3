package httpapi_test

import (
	"context"
	"strings"
	"testing"
)

const formCT = "application/x-www-form-urlencoded"

// TestCollectionDefaultTTL: defaultTTL as a collection setting (form field on
// create, PATCH to change), the document ttl field, meta.ts, and the
// re-evaluation a change runs.
func TestCollectionDefaultTTL(t *testing.T) {
	f := newFixture(t)
	if st, _, body := f.do("POST", "/pools/default/buckets/default/scopes", formCT, "name=s"); st != 200 {
		t.Fatalf("create scope: %d %s", st, body)
	}
	for _, bad := range []string{"name=x&defaultTTL=0", "name=x&defaultTTL=-2", "name=x&defaultTTL=abc", "name=x&idleTTL=-1"} {
		if st, _, body := f.do("POST", "/pools/default/buckets/default/scopes/s/collections", formCT, bad); st != 400 {
			t.Errorf("create with %s: %d %s", bad, st, body)
		}
	}
	st, _, body := f.do("POST", "/pools/default/buckets/default/scopes/s/collections", formCT, "name=c&defaultTTL=60")
	if m := jsonOf(t, body); st != 200 || m["defaultTTL"] != float64(60) {
		t.Fatalf("create collection: %d %s", st, body)
	}
	f.do("POST", "/pools/default/buckets/default/scopes/s/collections", formCT, "name=off")
	put := func(key, body string) (int, map[string]any) {
		t.Helper()
		st, _, out := f.do("PUT", "/default/docs/"+key+"?collection=s.c", "application/json", body)
		return st, jsonOf(t, out)
	}
	if st, m := put("a", `{"v":1}`); st != 201 || m["expiration"] != float64(t0+60) {
		t.Fatalf("defaultTTL: %d %v", st, m)
	}
	if st, m := put("b", `{"ttl":10}`); st != 201 || m["expiration"] != float64(t0+10) {
		t.Fatalf("ttl field: %d %v", st, m)
	}
	if st, m := put("c", `{"ttl":-1}`); st != 201 || m["expiration"] != float64(0) {
		t.Fatalf("ttl -1: %d %v", st, m)
	}
	st, _, body = f.do("PUT", "/default/docs/d?collection=s.c&expiry=500", "application/json", `{"ttl":10}`)
	if st != 201 || jsonOf(t, body)["expiration"] != float64(t0+500) {
		t.Fatalf("request expiry over ttl: %d %s", st, body)
	}
	st, _, body = f.do("PUT", "/default/docs/e?collection=s.c", "application/json", `{"ttl":"soon"}`)
	if st != 400 || !strings.Contains(body, "ttl") {
		t.Fatalf("bad ttl: %d %s", st, body)
	}
	st, _, body = f.do("PUT", "/default/docs/e?collection=s.off", "application/json", `{"ttl":"soon"}`)
	if st != 201 || jsonOf(t, body)["expiration"] != float64(0) {
		t.Fatalf("ttl on a collection without defaultTTL: %d %s", st, body)
	}
	// meta.ts and meta.created.
	f.clk.Advance(5)
	put("a", `{"v":2}`)
	_, _, body = f.do("GET", "/default/docs/a?collection=s.c&meta=true", "", "")
	meta := jsonOf(t, body)["meta"].(map[string]any)
	if meta["ts"] != float64(t0+5) || meta["created"] != float64(t0) || meta["expiration"] != float64(t0+65) {
		t.Fatalf("meta: %s", body)
	}

	// PATCH: removing defaultTTL stops the rule's expiry.
	st, _, body = f.do("PATCH", "/pools/default/buckets/default/scopes/s/collections/c", formCT, "defaultTTL=null")
	if m := jsonOf(t, body); st != 200 || m["defaultTTL"] != nil || m["reevaluated"] != float64(2) {
		t.Fatalf("remove defaultTTL: %d %s", st, body)
	}
	for key, want := range map[string]string{"a": "0", "b": "0", "d": "1700000500"} {
		if _, h, _ := f.do("GET", "/default/docs/"+key+"?collection=s.c", "", ""); h.Get("X-Mayfly-Expiration") != want {
			t.Errorf("%s after removing defaultTTL: expiration %s, want %s", key, h.Get("X-Mayfly-Expiration"), want)
		}
	}
	// Setting it again (JSON body, POST) counts from each document's last write.
	st, _, body = f.do("POST", "/pools/default/buckets/default/scopes/s/collections/c", "application/json", `{"defaultTTL":100}`)
	if m := jsonOf(t, body); st != 200 || m["defaultTTL"] != float64(100) || m["reevaluated"] != float64(2) {
		t.Fatalf("set defaultTTL: %d %s", st, body)
	}
	if _, h, _ := f.do("GET", "/default/docs/a?collection=s.c", "", ""); h.Get("X-Mayfly-Expiration") != "1700000105" {
		t.Errorf("a: expiration %s", h.Get("X-Mayfly-Expiration"))
	}
	if _, h, _ := f.do("GET", "/default/docs/b?collection=s.c", "", ""); h.Get("X-Mayfly-Expiration") != "1700000010" {
		t.Errorf("b: expiration %s", h.Get("X-Mayfly-Expiration"))
	}
	_, _, body = f.do("GET", "/pools/default/buckets/default/scopes", "", "")
	if !strings.Contains(body, `"name":"c","uid":"8","maxTTL":0,"defaultTTL":100`) && !strings.Contains(body, `"defaultTTL":100`) {
		t.Errorf("scopes list: %s", body)
	}
	for _, bad := range []string{"maxTTL=5", "nonsense=1", "defaultTTL=0", "idleTTL=x"} {
		if st, _, body := f.do("PATCH", "/pools/default/buckets/default/scopes/s/collections/c", formCT, bad); st != 400 {
			t.Errorf("PATCH %s: %d %s", bad, st, body)
		}
	}
	if st, _, _ := f.do("PATCH", "/pools/default/buckets/default/scopes/s/collections/nope", formCT, "defaultTTL=5"); st != 404 {
		t.Errorf("PATCH a missing collection: %d", st)
	}
}

// TestSlidingExpiryAPI: idleTTL and maxLifetime through the document API,
// and ep_sliding_extends.
func TestSlidingExpiryAPI(t *testing.T) {
	f := newFixture(t)
	f.do("POST", "/pools/default/buckets/default/scopes", formCT, "name=s")
	if st, _, body := f.do("POST", "/pools/default/buckets/default/scopes/s/collections", formCT, "name=sessions&idleTTL=100&maxLifetime=250"); st != 200 {
		t.Fatalf("create: %d %s", st, body)
	}
	_, _, body := f.do("PUT", "/default/docs/u1?collection=s.sessions", "application/json", `{"user":"ann"}`)
	if jsonOf(t, body)["expiration"] != float64(t0+100) {
		t.Fatalf("write: %s", body)
	}
	b := f.mustBucket("default")
	for i, want := range []string{"1700000150", "1700000240", "1700000250"} {
		f.clk.Advance([]int64{50, 90, 90}[i])
		if st, _, _ := f.do("GET", "/default/docs/u1?collection=s.sessions", "", ""); st != 200 {
			t.Fatalf("read %d: %d", i, st)
		}
		b.Sync(context.Background())
		_, _, body := f.do("GET", "/default/docs/u1?collection=s.sessions&meta=true", "", "")
		if got := jsonOf(t, body)["meta"].(map[string]any); got["expiration"] != jsonNumber(want) || got["created"] != float64(t0) {
			t.Errorf("after read %d: %s, want expiration %s", i, body, want)
		}
	}
	if got := f.stats()["ep_sliding_extends"]; got != 3 {
		t.Errorf("ep_sliding_extends = %d, want 3", got)
	}
	st, _, body := f.do("PATCH", "/pools/default/buckets/default/scopes/s/collections/sessions", formCT, "idleTTL=0")
	if m := jsonOf(t, body); st != 200 || m["idleTTL"] != nil || m["maxLifetime"] != float64(250) {
		t.Fatalf("PATCH idleTTL=0: %d %s", st, body)
	}
}

func jsonNumber(s string) any {
	var n float64
	for _, c := range s {
		n = n*10 + float64(c-'0')
	}
	return n
}

// TestViewMetaTS: map functions see meta.ts and meta.created.
func TestViewMetaTS(t *testing.T) {
	f := newFixture(t)
	js := "application/json"
	f.do("PUT", "/default/docs/k", js, `{"v":1}`)
	f.clk.Advance(7)
	f.do("PUT", "/default/docs/k", js, `{"v":2}`)
	ddoc := `{"views":{"v":{"map":"function (doc, meta) { emit([meta.ts, meta.created], null); }"}}}`
	if st, _, body := f.do("PUT", "/default/_design/m", js, ddoc); st != 201 {
		t.Fatalf("ddoc: %d %s", st, body)
	}
	_, _, body := f.do("GET", "/default/_design/m/_view/v?stale=false", "", "")
	if !strings.Contains(body, `"key":[1700000007,1700000000]`) {
		t.Errorf("view rows: %s", body)
	}
}
