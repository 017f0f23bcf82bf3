package memcache

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"strings"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/views"
)

// TestDocumentsWrittenThroughThePortAppearInViews: JSON set by a memcached
// client is a json document the views index, with its flags and expiry in
// meta; include_docs shows it, and "doc": null once it has expired.
func TestDocumentsWrittenThroughThePortAppearInViews(t *testing.T) {
	ctx := context.Background()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: clk, NumPartitions: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := views.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer vs.Close()
	srv, err := New(b, withIO(nil))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ctx, ln)
	defer srv.Close()

	if _, err := vs.PutDesignDoc(ctx, "default", "d", []byte(`{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, [meta.type, meta.flags, meta.expiration]); }"}}}`)); err != nil {
		t.Fatal(err)
	}
	mc := gomemcache.New(ln.Addr().String())
	defer mc.Close()
	if err := mc.Set(&gomemcache.Item{Key: "player:1", Value: []byte(`{"score":7}`), Flags: 3, Expiration: 60}); err != nil {
		t.Fatal(err)
	}
	if err := mc.Set(&gomemcache.Item{Key: "raw", Value: []byte("not json")}); err != nil {
		t.Fatal(err)
	}
	query := func() string {
		q, _ := url.ParseQuery("stale=false&include_docs=true")
		p, _ := views.ParseParams(q, nil)
		prep, err := vs.Prepare(ctx, "default", "d", "v", p)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := prep.Run(ctx, &buf); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	got := query()
	for _, want := range []string{
		`"id":"player:1","key":"player:1","value":["json",3,1700000060],"doc":{"meta":{"id":"player:1",`,
		`"json":{"score":7}}`,
		`"id":"raw","key":"raw","value":["base64",0,0],"doc":{"meta":{"id":"raw",`,
		`"base64":"bm90IGpzb24="}`,
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("view lacks %s:\n%s", want, got)
		}
	}
	clk.Advance(60)
	if got := query(); !strings.Contains(got, `"id":"player:1","key":"player:1","value":["json",3,1700000060],"doc":null`) {
		t.Fatalf("after expiry:\n%s", got)
	}
}
