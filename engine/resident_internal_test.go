package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestResidentWritesNeedingTheStore: a write asked to be done from memory
// alone (WriteOptions.Resident) that would read the store first (the
// metadata of an item out of memory whole, the ejected value a touch
// builds on) returns ErrWouldBlock having read and changed nothing, and
// the same write without Resident then does it; one that needs nothing of
// the store (a new key the Bloom filter rules out, a set over an ejected
// value) is done at once.
func TestResidentWritesNeedingTheStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // catches a hang only
	defer cancel()
	eng, err := Open(t.TempDir(), &Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	s := DefaultBucketSettings("b")
	s.EvictionPolicy = FullEviction
	b, err := eng.CreateBucket(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	const n = 6
	for i := range n {
		if _, err := c.Upsert(ctx, fmt.Sprint("k", i), []byte(fmt.Sprintf(`{"n":%d}`, i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := evictItems(b, func(string) bool { return true }); got != n {
		t.Fatalf("%d items left memory, want %d", got, n)
	}
	resident := &WriteOptions{Resident: true}
	writes := []struct {
		name string
		do   func(key string, o *WriteOptions) error
	}{
		{"Upsert", func(k string, o *WriteOptions) error { _, err := c.Upsert(ctx, k, []byte(`{}`), o); return err }},
		{"Insert", func(k string, o *WriteOptions) error { _, err := c.Insert(ctx, k, []byte(`{}`), o); return err }},
		{"Replace", func(k string, o *WriteOptions) error { _, err := c.Replace(ctx, k, []byte(`{}`), o); return err }},
		{"Delete", func(k string, o *WriteOptions) error { _, err := c.Delete(ctx, k, o); return err }},
		{"TouchWith", func(k string, o *WriteOptions) error { _, err := c.TouchWith(ctx, k, o); return err }},
	}
	for i, w := range writes {
		k := fmt.Sprint("k", i)
		before := b.Stats()
		if err := w.do(k, resident); !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("%s, resident, of an item out of memory: %v, want ErrWouldBlock", w.name, err)
		}
		after := b.Stats()
		if after.BgFetched != before.BgFetched || after.Bloom.MetaFetched != before.Bloom.MetaFetched || after.CurrItems != before.CurrItems {
			t.Fatalf("%s, resident, refused: fetched %d/%d -> %d/%d, curr_items %d -> %d; want nothing read or changed",
				w.name, before.BgFetched, before.Bloom.MetaFetched, after.BgFetched, after.Bloom.MetaFetched, before.CurrItems, after.CurrItems)
		}
		if _, err := c.GetResident(ctx, k); !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("%s, resident, refused: %s is back in memory (%v)", w.name, k, err)
		}
		err := w.do(k, nil)
		if w.name == "Insert" {
			if !errors.Is(err, ErrKeyExists) {
				t.Fatalf("Insert of a stored key out of memory: %v, want ErrKeyExists", err)
			}
		} else if err != nil {
			t.Fatalf("%s of an item out of memory: %v", w.name, err)
		}
	}
	// A new key: the Bloom filter rules it out, nothing to read.
	if _, err := c.Upsert(ctx, "new", []byte(`{}`), resident); err != nil {
		t.Fatalf("Upsert, resident, of a new key: %v", err)
	}

	// An ejected value: a touch needs it, a set does not.
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := c.Get(ctx, "k5")
	if err != nil {
		t.Fatal(err)
	}
	if !ejectDoc(b, d) {
		t.Fatal("k5's value was not ejected")
	}
	if _, err := c.TouchWith(ctx, "k5", &WriteOptions{Expiry: 100, Resident: true}); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("TouchWith, resident, of an ejected value: %v, want ErrWouldBlock", err)
	}
	if d, err := c.Get(ctx, "k5"); err != nil || d.Expiration != 0 {
		t.Fatalf("k5 after the refused touch: %+v, %v; want no expiration", d, err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	d, err = c.Get(ctx, "k5")
	if err != nil {
		t.Fatal(err)
	}
	if !ejectDoc(b, d) {
		t.Fatal("k5's value was not ejected again")
	}
	if _, err := c.Upsert(ctx, "k5", []byte(`{"n":"five"}`), resident); err != nil {
		t.Fatalf("Upsert, resident, over an ejected value: %v", err)
	}
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
}
