package memcache

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestSlidingGet: on a collection with idleTTL and maxLifetime, get and gets
// slide the expiration (min(now + idleTTL, created + maxLifetime)) and keep
// the CAS, so a cas after gets still succeeds.
func TestSlidingGet(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	if _, _, err := f.bucket.UpdateCollection(ctx, "_default", "_default", func(cs *engine.CollectionSettings) error {
		cs.IdleTTL, cs.MaxLifetime = 100, 250
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	coll := f.bucket.DefaultCollection()
	c := f.dial(t)
	c.do("set k 0 0 1\r\nv\r\n", "STORED\r\n")
	c.do("set idle 0 0 1\r\nv\r\n", "STORED\r\n")
	exp := func(want int64) {
		t.Helper()
		f.bucket.Sync(ctx)
		d, err := coll.Peek("k")
		if err != nil || d.Expiration != want {
			t.Fatalf("at +%d: %v %v, want expiration %d", f.clock.Now()-t0, d, err, want)
		}
	}
	exp(t0 + 100)
	f.clock.Advance(50)
	c.do("get k\r\n", present)
	exp(t0 + 150)
	f.clock.Advance(90)
	d, _ := coll.Peek("k")
	c.do("gets k\r\n", fmt.Sprintf("VALUE k 0 1 %d\r\nv\r\nEND\r\n", d.CAS))
	exp(t0 + 240)
	c.do(fmt.Sprintf("cas k 0 0 1 %d\r\nw\r\n", d.CAS), "STORED\r\n")
	exp(t0 + 240) // the write: min(now + 100, created + 250)
	f.clock.Advance(20)
	c.do("get k\r\n", "VALUE k 0 1\r\nw\r\nEND\r\n")
	exp(t0 + 250)
	c.do("get idle\r\n", absent) // never read: gone after idleTTL
	if got := f.bucket.Stats().SlidingExtends; got != 3 {
		t.Errorf("SlidingExtends = %d, want 3", got)
	}
}

// TestDefaultTTLMemcached: a set with exptime 0 follows the collection's
// defaultTTL and the document's ttl field; a non-zero exptime wins; an
// invalid ttl field is refused.
func TestDefaultTTLMemcached(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	if _, _, err := f.bucket.UpdateCollection(ctx, "_default", "_default", func(cs *engine.CollectionSettings) error {
		cs.DefaultTTL = 60
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	coll := f.bucket.DefaultCollection()
	c := f.dial(t)
	c.do("set a 0 0 2\r\n{}\r\n", "STORED\r\n")
	c.do("set b 0 0 10\r\n{\"ttl\":10}\r\n", "STORED\r\n")
	c.do("set c 0 30 10\r\n{\"ttl\":10}\r\n", "STORED\r\n")
	for k, want := range map[string]int64{"a": t0 + 60, "b": t0 + 10, "c": t0 + 30} {
		if d, err := coll.Peek(k); err != nil || d.Expiration != want {
			t.Errorf("%s: %v %v, want expiration %d", k, d, err, want)
		}
	}
	c.send("set d 0 0 10\r\n{\"ttl\":-5}\r\n")
	if got := c.line(); !strings.HasPrefix(got, "SERVER_ERROR") || !strings.Contains(got, "ttl") {
		t.Errorf("invalid ttl: %q", got)
	}
}
