package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// Dropping a collection removes its documents from memory, disk and the
// counters, refuses later writes to it, and leaves other collections alone;
// dropping a scope drops its collections. The _default scope and collection
// stay.
func TestDropCollectionAndScope(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err := b.CreateScope(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"c1", "c2"} {
		if _, err := b.CreateCollection(ctx, "s", n, 0); err != nil {
			t.Fatal(err)
		}
	}
	c1, _ := b.Collection("s", "c1")
	c2, _ := b.Collection("s", "c2")
	for i := range 20 {
		for _, c := range []*engine.Collection{c1, c2, b.DefaultCollection()} {
			if _, err := c.Upsert(ctx, fmt.Sprint("k", i), []byte(`{}`), &engine.WriteOptions{Expiry: 100}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := c1.Delete(ctx, "k0", nil); err != nil {
		t.Fatal(err)
	}
	if n := b.Stats().CurrItems; n != 59 {
		t.Fatalf("curr_items %d, want 59", n)
	}
	if err := b.DropCollection(ctx, "s", "c1"); err != nil {
		t.Fatal(err)
	}
	if n := b.Stats().CurrItems; n != 40 {
		t.Errorf("after dropping c1: curr_items %d, want 40", n)
	}
	if _, err := c1.Upsert(ctx, "new", []byte(`{}`), nil); !errors.Is(err, engine.ErrCollectionNotFound) {
		t.Errorf("write to a dropped collection: %v", err)
	}
	if _, err := c2.Get(ctx, "k3"); err != nil {
		t.Errorf("another collection lost a document: %v", err)
	}
	if err := eng.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.DropScope(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if n := b.Stats().CurrItems; n != 20 {
		t.Errorf("after dropping the scope: curr_items %d, want 20", n)
	}
	if _, err := b.Collection("s", "c2"); !errors.Is(err, engine.ErrScopeNotFound) {
		t.Errorf("dropped scope still there: %v", err)
	}
	if err := b.DropScope(ctx, "_default"); !errors.Is(err, engine.ErrInvalidSetting) {
		t.Errorf("dropping _default: %v", err)
	}
	if err := b.DropCollection(ctx, "_default", "_default"); !errors.Is(err, engine.ErrInvalidSetting) {
		t.Errorf("dropping _default._default: %v", err)
	}
	if err := eng.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	eng = openAt(t, dir)
	b, _ = eng.Bucket("b")
	if n := b.Stats().CurrItems; n != 20 {
		t.Errorf("after restart: curr_items %d, want 20", n)
	}
}
