package memcache

import (
	"errors"
	"fmt"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
)

// TestGomemcacheClient drives the server with a real memcached client
// library, over a loopback port.
func TestGomemcacheClient(t *testing.T) {
	f := newFixture(t, nil)
	mc := gomemcache.New(f.addr)
	defer mc.Close()

	// set with flags and exptime, get.
	if err := mc.Set(&gomemcache.Item{Key: "doc", Value: []byte(`{"n":1}`), Flags: 7, Expiration: 100}); err != nil {
		t.Fatal(err)
	}
	it, err := mc.Get("doc")
	if err != nil {
		t.Fatal(err)
	}
	if string(it.Value) != `{"n":1}` || it.Flags != 7 {
		t.Fatalf("get: %+v", it)
	}
	d, err := f.bucket.DefaultCollection().Get(t.Context(), "doc")
	if err != nil {
		t.Fatal(err)
	}
	if d.Expiration != t0+100 || d.Type != "json" || d.Flags != 7 {
		t.Fatalf("engine document: expiration %d type %s flags %d", d.Expiration, d.Type, d.Flags)
	}

	// gets/cas: CompareAndSwap succeeds with a fresh CAS, fails with a stale one.
	it.Value = []byte(`{"n":2}`)
	if err := mc.CompareAndSwap(it); err != nil {
		t.Fatalf("CompareAndSwap: %v", err)
	}
	if err := mc.CompareAndSwap(it); !errors.Is(err, gomemcache.ErrCASConflict) {
		t.Fatalf("stale CompareAndSwap: %v, want ErrCASConflict", err)
	}
	it2, err := mc.Get("doc")
	if err != nil || string(it2.Value) != `{"n":2}` {
		t.Fatalf("after cas: %+v %v", it2, err)
	}
	if it2.CasID != f.mustDoc(t, "doc").CAS {
		t.Fatalf("cas unique %d is not the engine CAS", it2.CasID)
	}

	// add, replace, append, prepend.
	if err := mc.Add(&gomemcache.Item{Key: "doc", Value: []byte("x")}); !errors.Is(err, gomemcache.ErrNotStored) {
		t.Fatalf("add over existing: %v", err)
	}
	if err := mc.Replace(&gomemcache.Item{Key: "nope", Value: []byte("x")}); !errors.Is(err, gomemcache.ErrNotStored) {
		t.Fatalf("replace missing: %v", err)
	}
	if err := mc.Set(&gomemcache.Item{Key: "s", Value: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if err := mc.Append(&gomemcache.Item{Key: "s", Value: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	if err := mc.Prepend(&gomemcache.Item{Key: "s", Value: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if it, err := mc.Get("s"); err != nil || string(it.Value) != "abc" {
		t.Fatalf("append/prepend: %+v %v", it, err)
	}

	// touch: the expiry moves.
	if err := mc.Touch("doc", 10); err != nil {
		t.Fatal(err)
	}
	if err := mc.Touch("nope", 10); !errors.Is(err, gomemcache.ErrCacheMiss) {
		t.Fatalf("touch missing: %v", err)
	}
	f.clock.Advance(10)
	if _, err := mc.Get("doc"); !errors.Is(err, gomemcache.ErrCacheMiss) {
		t.Fatalf("get after touch expiry: %v", err)
	}

	// gat through the library, and raw on a plain connection.
	if err := mc.Set(&gomemcache.Item{Key: "g", Value: []byte("v"), Expiration: 5}); err != nil {
		t.Fatal(err)
	}
	if it, err := mc.GetAndTouch("g", 50); err != nil || string(it.Value) != "v" {
		t.Fatalf("GetAndTouch: %+v %v", it, err)
	}
	c := f.dial(t)
	c.do("gat 100 g\r\n", "VALUE g 0 1\r\nv\r\nEND\r\n")
	f.clock.Advance(99)
	if _, err := mc.Get("g"); err != nil {
		t.Fatalf("get after gat: %v", err)
	}
	f.clock.Advance(1)
	if _, err := mc.Get("g"); !errors.Is(err, gomemcache.ErrCacheMiss) {
		t.Fatalf("get after gat expiry: %v", err)
	}

	// incr/decr.
	if err := mc.Set(&gomemcache.Item{Key: "n", Value: []byte("10")}); err != nil {
		t.Fatal(err)
	}
	if v, err := mc.Increment("n", 5); err != nil || v != 15 {
		t.Fatalf("incr: %d %v", v, err)
	}
	if v, err := mc.Decrement("n", 100); err != nil || v != 0 {
		t.Fatalf("decr: %d %v", v, err)
	}
	if _, err := mc.Increment("nope", 1); !errors.Is(err, gomemcache.ErrCacheMiss) {
		t.Fatalf("incr missing: %v", err)
	}
	if _, err := mc.Increment("s", 1); err == nil {
		t.Fatal("incr on a non-number succeeded")
	}

	// GetMulti.
	want := map[string]string{}
	for i := range 20 {
		k, v := fmt.Sprintf("m%d", i), fmt.Sprintf("value %d", i)
		want[k] = v
		if err := mc.Set(&gomemcache.Item{Key: k, Value: []byte(v), Flags: uint32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	keys := []string{"absent"}
	for k := range want {
		keys = append(keys, k)
	}
	got, err := mc.GetMulti(keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("GetMulti returned %d items, want %d", len(got), len(want))
	}
	for k, v := range want {
		if string(got[k].Value) != v {
			t.Fatalf("GetMulti %s = %q, want %q", k, got[k].Value, v)
		}
	}

	// delete, flush.
	if err := mc.Delete("m0"); err != nil {
		t.Fatal(err)
	}
	if err := mc.Delete("m0"); !errors.Is(err, gomemcache.ErrCacheMiss) {
		t.Fatalf("delete twice: %v", err)
	}
	if err := mc.FlushAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Get("m1"); !errors.Is(err, gomemcache.ErrCacheMiss) {
		t.Fatalf("get after flush_all: %v", err)
	}
	if err := mc.Ping(); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) mustDoc(t *testing.T, key string) *engineDoc {
	t.Helper()
	d, err := f.bucket.DefaultCollection().Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
