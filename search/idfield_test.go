package search_test

import (
	"slices"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// A hit names its document by the document's key, whatever the document
// holds: a field named "_id" in its JSON (as documents loaded with
// `mayfly load --id-field F` keep theirs, or those of other databases'
// exports) is a field like any other. A review found such a field replaced
// the key in the hits: a document "zz" holding {"_id":"other"} came back as
// "other", one holding {"_id":5} as bytes of an encoded number, and one
// holding its key came back twice.
func TestHitIDIsTheKeyNotAnIDField(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	e.createIndex("i", `{"type":"fulltext-index","sourceType":"couchbase","sourceName":"default"}`)
	e.put("zz", `{"_id":"other","name":"zed"}`, 0)
	e.put("nu", `{"_id":5,"name":"zed"}`, 0)
	e.put("ann", `{"_id":"score::ann","name":"zed"}`, 0)
	e.put("score::ann", `{"_id":"score::ann","name":"zed"}`, 0)
	req := `{"query":{"match":"zed","field":"name"},"sort":["_id"],"size":10,` + atPlus + `}`
	if got, want := e.query("i", req).ids(), []string{"ann", "nu", "score::ann", "zz"}; !slices.Equal(got, want) {
		t.Errorf("hits %q, want %q (each document once, under its key)", got, want)
	}
}
