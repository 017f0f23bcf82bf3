package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

func keysOf(docs []*engine.Document) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.Key
	}
	return out
}

func TestCollectionKeys(t *testing.T) {
	b, clk := newBucket(t, engine.Couchbase)
	ctx := context.Background()
	if err := b.CreateScope(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateCollection(ctx, "s", "c", 0); err != nil {
		t.Fatal(err)
	}
	other, err := b.Collection("s", "c")
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	// Inserted out of order; byte order puts "B" before "a" and "a10" before "a2".
	for _, k := range []string{"a2", "a10", "B", "a1", "z", "gone", "dead", "a3"} {
		o := &engine.WriteOptions{}
		if k == "gone" {
			o.Expiry = 5
		}
		if _, err := c.Upsert(ctx, k, []byte(`{"k":"`+k+`"}`), o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Upsert(ctx, "a5", []byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, "dead", nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10) // "gone" has expired
	cases := []struct {
		start, end  string
		skip, limit int
		want        string
		total       int
	}{
		{"", "", 0, 0, "[B a1 a10 a2 a3 z]", 6},
		{"a", "a3", 0, 0, "[a1 a10 a2 a3]", 4},
		{"a1", "", 1, 2, "[a10 a2]", 5},
		{"", "", 10, 0, "[]", 6},
		{"zz", "", 0, 0, "[]", 0},
	}
	for _, tc := range cases {
		docs, total, err := c.Keys(ctx, tc.start, tc.end, tc.skip, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(keysOf(docs)); got != tc.want || total != tc.total {
			t.Errorf("Keys(%q, %q, %d, %d) = %s, %d; want %s, %d", tc.start, tc.end, tc.skip, tc.limit, got, total, tc.want, tc.total)
		}
	}
	docs, _, _ := other.Keys(ctx, "", "", 0, 0)
	if fmt.Sprint(keysOf(docs)) != "[a5]" {
		t.Errorf("other collection: %v", keysOf(docs))
	}
	// Keys leaves an expired document for the pager: Peek and Keys agree.
	if _, err := c.Peek("gone"); err == nil {
		t.Error("gone is visible")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := c.Keys(cctx, "", "", 0, 0); err == nil {
		t.Error("cancelled context: no error")
	}
}
