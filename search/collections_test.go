package search_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// TestScopedTypeMappings: Couchbase 7's doc_config mode
// "scope.collection.type_field" indexes the collection its type mappings
// name: "scope.collection.TYPE" the documents of that type, and
// "scope.collection" the others; definitions naming two collections or
// badly named types are refused with a reason.
func TestScopedTypeMappings(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	ctx := context.Background()
	b := e.bucket()
	if err := b.CreateScope(ctx, "inventory"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateCollection(ctx, "inventory", "hotel", 0); err != nil {
		t.Fatal(err)
	}
	coll, _ := b.Collection("inventory", "hotel")
	for k, v := range map[string]string{
		"h1": `{"type":"hotel","name":"Grand","city":"Paris"}`,
		"h2": `{"type":"hotel","name":"Small","city":"Lyon"}`,
		"m1": `{"type":"motel","name":"Roadside","city":"Paris"}`,
	} {
		if _, err := coll.Upsert(ctx, k, []byte(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	e.put("d1", `{"type":"hotel","name":"Default","city":"Paris"}`, 0)
	// Only hotels, only their name.
	e.createIndex("hotels", `{"params":{"doc_config":{"mode":"scope.collection.type_field","type_field":"type"},
		"mapping":{"default_mapping":{"enabled":true},"types":{"inventory.hotel.hotel":{"dynamic":false,"properties":{"name":{"fields":[{"name":"name","type":"text","index":true}]}}}}}}}`)
	if a := e.query("hotels", `{"query":{"match_all":{}},"sort":["_id"],`+atPlus+`}`); !slices.Equal(a.ids(), []string{"h1", "h2"}) {
		t.Fatalf("hotels: %v", a.ids())
	}
	if a := e.query("hotels", `{"query":{"match":"paris","field":"city"},`+atPlus+`}`); a.TotalHits != 0 {
		t.Fatalf("unmapped field indexed: %v", a.ids())
	}
	// The whole collection, motels included.
	e.createIndex("all", `{"params":{"doc_config":{"mode":"scope.collection.type_field","type_field":"type"},
		"mapping":{"types":{"inventory.hotel":{"dynamic":true}}}}}`)
	if a := e.query("all", `{"query":{"match":"paris","field":"city"},"sort":["_id"],`+atPlus+`}`); !slices.Equal(a.ids(), []string{"h1", "m1"}) {
		t.Fatalf("all: %v", a.ids())
	}
	for _, bad := range []string{
		`{"params":{"doc_config":{"mode":"scope.collection.type_field"},"mapping":{"types":{"inventory.hotel":{},"inventory.motel":{}}}}}`,
		`{"params":{"doc_config":{"mode":"scope.collection.type_field"},"mapping":{"types":{"hotel":{}}}}}`,
		`{"params":{"doc_config":{"mode":"scope.collection.type_field"}}}`,
		`{"params":{"doc_config":{"mode":"scope.collection.docid_prefix"},"mapping":{"types":{"inventory.hotel":{}}}}}`,
		`{"sourceCollection":"inventory.other","params":{"doc_config":{"mode":"scope.collection.type_field"},"mapping":{"types":{"inventory.hotel":{}}}}}`,
		`{"params":{"doc_config":{"mode":"scope.collection.type_field"},"mapping":{"types":{"inventory.nothere":{}}}}}`,
	} {
		var de *search.DefError
		if _, err := e.svc.PutIndex(ctx, "default", "bad", []byte(bad)); !errors.As(err, &de) {
			t.Errorf("%s: %v, want a DefError", bad, err)
		}
	}
}

// TestDroppedCollection: when an index's source collection is dropped, its
// documents leave the index's answers at once (no write needed), the index
// keeps working, and a collection created again under the name is indexed
// afresh; across a restart too. The indexes follow the feed only when asked
// (at_plus), so that the answers after the drop owe nothing to an indexer
// that happened to run.
func TestDroppedCollection(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{NoAutoUpdate: true})
	ctx := context.Background()
	b := e.bucket()
	if err := b.CreateScope(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	create := func(keys ...string) {
		t.Helper()
		if _, err := b.CreateCollection(ctx, "s", "c", 0); err != nil {
			t.Fatal(err)
		}
		coll, _ := b.Collection("s", "c")
		for _, k := range keys {
			if _, err := coll.Upsert(ctx, k, []byte(fmt.Sprintf(`{"text":"fox %s"}`, k)), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	ids := func(req string) []string {
		t.Helper()
		got := e.query("c", req).ids()
		sort.Strings(got)
		return got
	}
	create("a", "b")
	e.put("d", `{"text":"fox d"}`, 0)
	e.createIndex("c", `{"sourceCollection":"s.c"}`)
	e.createIndex("d", `{}`)
	q := `{"query":{"match":"fox","field":"text"}`
	if got := ids(q + `,` + atPlus + `}`); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("before the drop: %v", got)
	}
	if err := b.DropCollection(ctx, "s", "c"); err != nil {
		t.Fatal(err)
	}
	if got := ids(q + `}`); len(got) != 0 {
		t.Fatalf("after the drop: %v", got)
	}
	if n, err := e.svc.Count(ctx, "default", "c"); err != nil || n != 0 {
		t.Fatalf("count after the drop: %d, %v", n, err)
	}
	if err := e.svc.Check(ctx); err != nil {
		t.Fatal(err)
	}
	// The index of _default._default is untouched.
	if a := e.query("d", q+`,`+atPlus+`}`); !slices.Equal(a.ids(), []string{"d"}) {
		t.Fatalf("default index: %v", a.ids())
	}
	// Created again: its documents, and only those, are indexed.
	create("x")
	if got := ids(q + `,` + atPlus + `}`); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("created again: %v", got)
	}
	// Dropped while the service is down: the index opens, empty.
	e.svc.Close()
	e.svc = nil
	if err := b.DropCollection(ctx, "s", "c"); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.svc, err = search.New(ctx, e.eng, &e.opts); err != nil {
		t.Fatal(err)
	}
	if got := ids(q + `,` + atPlus + `}`); len(got) != 0 {
		t.Fatalf("after a restart: %v", got)
	}
	if errs, _ := e.svc.LoadErrors(ctx, "default"); len(errs) != 0 {
		t.Fatalf("load errors %v", errs)
	}
	create("y")
	if got := ids(q + `,` + atPlus + `}`); !slices.Equal(got, []string{"y"}) {
		t.Fatalf("created again after a restart: %v", got)
	}
}
