package search_test

import (
	"slices"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// A definition's mapping of the expiration field Mayfly adds to every
// document (its name is Mayfly's, though a mapping can name it) does not
// change how expiry works: a document still leaves the hits the second it
// expires. Before, a property of that name disabled in the mapping switched
// the field off, and expired documents stayed in the hits until purged.
func TestMappingCannotDisableExpiry(t *testing.T) {
	for _, prop := range []string{`{"enabled":false}`, `{"enabled":true,"dynamic":false,"fields":[{"name":"_mayfly_exp","type":"number","index":true}]}`} {
		e := newEnv(t, engine.Couchbase, search.Options{})
		e.createIndex("i", `{"type":"fulltext-index","sourceType":"couchbase","sourceName":"default","params":{"mapping":{"default_mapping":{"enabled":true,"dynamic":true,"properties":{"_mayfly_exp":`+prop+`}}}}}`)
		e.put("short", `{"city":"Paris"}`, 10)
		e.put("long", `{"city":"Paris"}`, 0)
		req := `{"query":{"match":"paris","field":"city"},"sort":["_id"],` + atPlus + `}`
		if got := e.query("i", req).ids(); !slices.Equal(got, []string{"long", "short"}) {
			t.Fatalf("mapping %s, before the expiry: hits %v, want [long short]", prop, got)
		}
		e.clk.Set(t0 + 10)
		if got := e.query("i", req).ids(); !slices.Equal(got, []string{"long"}) {
			t.Fatalf("mapping %s, at the expiry: hits %v, want [long]", prop, got)
		}
	}
}
