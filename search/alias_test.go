package search_test

import (
	"context"
	"errors"
	"slices"
	"sort"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// TestAlias: an alias ("fulltext-alias") searches its target indexes
// together — hits, total_hits, facets and count merged, each hit naming its
// index — leaves out expired documents like an index does, survives a
// restart, and is refused when its targets are not indexes of the bucket.
func TestAlias(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	ctx := context.Background()
	b := e.bucket()
	if err := b.CreateScope(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateCollection(ctx, "s", "c", 0); err != nil {
		t.Fatal(err)
	}
	coll, _ := b.Collection("s", "c")
	e.put("d1", `{"text":"red fox","color":"red"}`, 0)
	e.put("d2", `{"text":"blue fox","color":"blue"}`, t0+10)
	if _, err := coll.Upsert(ctx, "c1", []byte(`{"text":"red fox in a collection","color":"red"}`), nil); err != nil {
		t.Fatal(err)
	}
	e.createIndex("dflt", `{}`)
	e.createIndex("inc", `{"sourceCollection":"s.c"}`)
	// With no bucket and no sourceName, the alias lives in its targets'
	// bucket.
	def := []byte(`{"type":"fulltext-alias","params":{"targets":{"dflt":{},"inc":{}}}}`)
	bucket, err := e.svc.SourceBucket(def)
	if err != nil || bucket != "default" {
		t.Fatalf("SourceBucket: %q, %v; want default", bucket, err)
	}
	if _, err := e.svc.PutIndex(ctx, bucket, "both", def); err != nil {
		t.Fatal(err)
	}
	req := `{"query":{"match":"fox","field":"text"},"size":10,"facets":{"colors":{"field":"color","size":5}},` + atPlus + `}`
	check := func(wantIDs []string, wantFacet string) {
		t.Helper()
		a := e.query("both", req)
		got := a.ids()
		sort.Strings(got)
		if !slices.Equal(got, wantIDs) || a.TotalHits != uint64(len(wantIDs)) {
			t.Fatalf("alias hits %v (total %d), want %v", got, a.TotalHits, wantIDs)
		}
		for _, h := range a.Hits {
			if want := map[bool]string{true: "inc", false: "dflt"}[h.ID == "c1"]; h.Index != want {
				t.Errorf("hit %s names index %q, want %q", h.ID, h.Index, want)
			}
		}
		if got := facetString(facet(t, a, "colors")); got != wantFacet {
			t.Fatalf("alias facet %s, want %s", got, wantFacet)
		}
		if n, err := e.svc.Count(ctx, "default", "both"); err != nil || n != uint64(len(wantIDs)) {
			t.Fatalf("alias count %d, %v; want %d", n, err, len(wantIDs))
		}
	}
	check([]string{"c1", "d1", "d2"}, "total=3 red=2 blue=1")
	e.clk.Set(t0 + 10) // d2 expires, not purged
	check([]string{"c1", "d1"}, "total=2 red=2")
	// It is listed, and survives a restart.
	defs, err := e.svc.ListIndexes(ctx, "default")
	if err != nil || len(defs) != 3 || defs[0].Name != "both" || !defs[0].IsAlias() || !slices.Equal(defs[0].Targets(), []string{"dflt", "inc"}) {
		t.Fatalf("list: %v %v", defs, err)
	}
	e.close()
	e.open()
	check([]string{"c1", "d1"}, "total=2 red=2")

	var de *search.DefError
	for _, bad := range []string{
		`{"type":"fulltext-alias","params":{"targets":{"nothere":{}}}}`,
		`{"type":"fulltext-alias","params":{"targets":{"both":{}}}}`,
		`{"type":"fulltext-alias","params":{"targets":{}}}`,
		`{"type":"fulltext-alias","sourceType":"couchbase","params":{"targets":{"dflt":{}}}}`,
	} {
		if _, err := e.svc.PutIndex(ctx, "default", "bad", []byte(bad)); !errors.As(err, &de) {
			t.Errorf("%s: %v, want a DefError", bad, err)
		}
	}
	// A target deleted: the alias answers that it is missing.
	if err := e.svc.DeleteIndex(ctx, "default", "inc"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Query(ctx, "default", "both", []byte(req)); !errors.Is(err, search.ErrNotFound) {
		t.Fatalf("alias of a deleted index: %v, want ErrNotFound", err)
	}
	// Replaced by an index of the same name, then deleted.
	e.createIndex("both", `{}`)
	if a := e.query("both", req); a.TotalHits != 1 {
		t.Fatalf("index replacing the alias: %v", a.ids())
	}
	if err := e.svc.DeleteIndex(ctx, "default", "both"); err != nil {
		t.Fatal(err)
	}
}
