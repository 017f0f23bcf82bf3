package httpapi_test

import (
	"context"
	"testing"
)

// TestSlidingReadAfterMaxTTLLoweredKeepsDocument: a bucket's maxTTL, changed,
// applies to later writes only (README), and on a collection with idleTTL a
// read slides a document's expiration forward ("a key in use lives on"). So
// after the bucket's maxTTL is lowered, a read of a live session written long
// before leaves it readable: a read only moves an expiration later, never
// to now or before, where a review found its "extension" set last write +
// the new maxTTL, already past, and the next read answered 404.
func TestSlidingReadAfterMaxTTLLoweredKeepsDocument(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if st, _, body := f.do("POST", "/pools/default/buckets/default/scopes", formCT, "name=s"); st != 200 {
		t.Fatalf("create scope: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/default/scopes/s/collections", formCT, "name=sessions&idleTTL=1800"); st != 200 {
		t.Fatalf("create collection: %d %s", st, body)
	}
	const doc = "/default/docs/u1?collection=s.sessions"
	if st, _, body := f.do("PUT", doc, "application/json", `{"user":"ann"}`); st != 201 {
		t.Fatalf("write: %d %s", st, body)
	}
	b := f.mustBucket("default")
	f.clk.Advance(1000)
	if st, _, body := f.do("GET", doc, "", ""); st != 200 {
		t.Fatalf("read at +1000 s: %d %s", st, body)
	}
	b.Sync(ctx) // the read's extension, to t0+2800, is committed
	if st, _, body := f.do("POST", "/pools/default/buckets/default", formCT, "maxTTL=60"); st != 200 {
		t.Fatalf("lower the bucket's maxTTL: %d %s", st, body)
	}
	f.clk.Advance(10)
	if st, _, body := f.do("GET", doc, "", ""); st != 200 {
		t.Fatalf("read at +1010 s, the session live until +2800 s: %d %s", st, body)
	}
	b.Sync(ctx)
	st, _, body := f.do("GET", doc+"&meta=true", "", "")
	if st != 200 {
		t.Fatalf("read again at once after a read of the live session: %d %s; want 200 (a read must not expire the document it served)", st, body)
	}
	if exp := jsonOf(t, body)["meta"].(map[string]any)["expiration"].(float64); int64(exp) <= t0+1010 {
		t.Errorf("expiration after the read: %d, at or before now (%d)", int64(exp), t0+1010)
	}
}
