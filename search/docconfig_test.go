package search_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// TestDocIDTypeModes: Couchbase's doc_config modes "docid_prefix" (a
// document's type is its key up to the first docid_prefix_delim) and
// "docid_regexp" (the first match of docid_regexp in its key) pick the type
// mapping by the key, as the definitions Couchbase's console writes for
// them expect: with the default mapping disabled, only the keys of a mapped
// type are indexed, each with its type's fields. A mode Couchbase does not
// have, or a docid_regexp that does not compile, is refused with a reason
// rather than silently indexing by the type field.
func TestDocIDTypeModes(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	ctx := context.Background()
	for k, v := range map[string]string{
		"hotel::1":   `{"name":"Grand","city":"Paris","type":"inn"}`,
		"hotel::2":   `{"name":"Small","city":"Lyon"}`,
		"airport::1": `{"name":"Orly","city":"Paris"}`,
		"airline_7":  `{"name":"Air Paris","city":"Paris"}`,
		"plain":      `{"name":"Untyped","city":"Paris"}`,
		"::odd":      `{"name":"Empty prefix","city":"Paris"}`,
	} {
		e.put(k, v, 0)
	}
	// Hotels by their key's prefix; only their name is indexed.
	e.createIndex("hotels", `{"params":{"doc_config":{"mode":"docid_prefix","docid_prefix_delim":"::","type_field":"type"},
		"mapping":{"default_mapping":{"enabled":false},"types":{"hotel":{"dynamic":false,"properties":{"name":{"fields":[{"name":"name","type":"text","index":true}]}}}}}}}`)
	if a := e.query("hotels", `{"query":{"match_all":{}},"sort":["_id"],`+atPlus+`}`); !slices.Equal(a.ids(), []string{"hotel::1", "hotel::2"}) {
		t.Errorf("docid_prefix: match_all finds %v, want the two hotel:: keys", a.ids())
	}
	if a := e.query("hotels", `{"query":{"match":"paris","field":"city"},`+atPlus+`}`); a.TotalHits != 0 {
		t.Errorf("docid_prefix: a field the hotel mapping leaves out is indexed: %v", a.ids())
	}
	if a := e.query("hotels", `{"query":{"match":"grand","field":"name"},`+atPlus+`}`); !slices.Equal(a.ids(), []string{"hotel::1"}) {
		t.Errorf("docid_prefix: name grand finds %v", a.ids())
	}
	// Airports and airlines by a regexp on the key.
	e.createIndex("air", `{"params":{"doc_config":{"mode":"docid_regexp","docid_regexp":"air[a-z]{4}"},
		"mapping":{"default_mapping":{"enabled":false},"types":{"airport":{"dynamic":true},"airline":{"dynamic":true}}}}}`)
	if a := e.query("air", `{"query":{"match":"paris","field":"city"},"sort":["_id"],`+atPlus+`}`); !slices.Equal(a.ids(), []string{"airline_7", "airport::1"}) {
		t.Errorf("docid_regexp: city paris finds %v, want airline_7 and airport::1", a.ids())
	}
	// Its fields are the document's own: in _all, and stored as they are.
	if a := e.query("air", `{"query":{"query":"orly"},"fields":["*"],`+atPlus+`}`); !slices.Equal(a.ids(), []string{"airport::1"}) || a.Hits[0].Fields["name"] != "Orly" {
		t.Errorf("docid_regexp: query string orly finds %v, want airport::1 with its name stored", a.Hits)
	}
	if err := e.svc.Check(ctx); err != nil {
		t.Errorf("Check: %v", err)
	}
	for _, bad := range []string{
		`{"params":{"doc_config":{"mode":"docid_regexp","docid_regexp":"air["}}}`,
		`{"params":{"doc_config":{"mode":"typefield"}}}`,
	} {
		var de *search.DefError
		if _, err := e.svc.PutIndex(ctx, "default", "bad", []byte(bad)); !errors.As(err, &de) {
			t.Errorf("%s: %v, want a DefError", bad, err)
		}
	}
}
