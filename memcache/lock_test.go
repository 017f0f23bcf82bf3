package memcache

import (
	"context"
	"strconv"
	"testing"
)

// TestLockedItem: memcached has no locks; a write to an item a Couchbase
// SDK locked answers SERVER_ERROR (what every client raises), the
// read-modify-write commands stop on it instead of spinning, and reads see
// the item.
func TestLockedItem(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.do("set k 0 0 1\r\n5\r\n", "STORED\r\n")
	coll := f.bucket.DefaultCollection()
	l, err := coll.GetLocked(context.Background(), "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := coll.Get(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	locked := replyLocked + "\r\n"
	c.do("set k 0 0 1\r\n6\r\n", locked)
	c.do("append k 0 0 1\r\n0\r\n", locked)
	c.do("incr k 1\r\n", locked)
	c.do("cas k 0 0 1 "+strconv.FormatUint(d.CAS, 10)+"\r\n6\r\n", locked)
	c.do("delete k\r\n", locked)
	c.do("touch k 10\r\n", locked)
	c.do("get k\r\n", "VALUE k 0 1\r\n5\r\nEND\r\n")
	if err := coll.Unlock("k", l.CAS); err != nil {
		t.Fatal(err)
	}
	c.do("incr k 1\r\n", "6\r\n")
}
