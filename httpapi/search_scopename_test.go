package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// Couchbase 7.6's scoped index paths name an index within its bucket and
// scope: two scopes of a bucket (one per tenant, say) may each have an index
// "hotels", and creating one leaves the other alone. A PUT on scope t2's
// path must therefore not replace scope t1's index of that name: it either
// creates t2's own index, or is refused; t1's searches go on answering t1's
// documents. (A review found that the PUT silently replaced t1's index with
// t2's definition, so that t1's scoped searches answered t2's documents.)
func TestSearchScopedPutLeavesAnotherScopesIndex(t *testing.T) {
	eng, do := searchFront(t, nil, []string{"default"}, nil)
	ctx := context.Background()
	b, err := eng.Bucket("default")
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"t1", "t2"} {
		if err := b.CreateScope(ctx, tenant); err != nil {
			t.Fatal(err)
		}
		if _, err := b.CreateCollection(ctx, tenant, "hotels", 0); err != nil {
			t.Fatal(err)
		}
		c, err := b.Collection(tenant, "hotels")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Upsert(ctx, tenant+"-hotel", []byte(`{"name":"hotel of `+tenant+`"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	def := func(tenant string) string {
		return `{"type":"fulltext-index","sourceType":"couchbase","sourceName":"default","params":{
			"doc_config":{"mode":"scope.collection.type_field","type_field":"type"},
			"mapping":{"default_mapping":{"enabled":false},"types":{"` + tenant + `.hotels":{"enabled":true,"dynamic":true}}}}}`
	}
	const query = `{"query":{"match":"hotel","field":"name"},"ctl":{"consistency":{"level":"at_plus"}}}`
	path := func(tenant string) string { return "/api/bucket/default/scope/" + tenant + "/index/hotels" }

	if status, body := do("Administrator", http.MethodPut, path("t1"), def("t1")); status != http.StatusOK {
		t.Fatalf("create t1's index: %d %s", status, body)
	}
	if status, body := do("Administrator", http.MethodPost, path("t1")+"/query", query); status != http.StatusOK || !strings.Contains(body, `"id":"t1-hotel"`) {
		t.Fatalf("t1's search before t2's index: %d %s", status, body)
	}
	status, body := do("Administrator", http.MethodPut, path("t2"), def("t2"))
	switch {
	case status == http.StatusOK:
		// Couchbase 7.6: t2 has an index of its own.
		if s, body := do("Administrator", http.MethodPost, path("t2")+"/query", query); s != http.StatusOK || !strings.Contains(body, `"id":"t2-hotel"`) || strings.Contains(body, `"t1-hotel"`) {
			t.Errorf("t2's search of its own index: %d %s, want t2-hotel alone", s, body)
		}
	case status >= 400 && status < 500:
		// Refused: the name is taken in this bucket. Acceptable.
	default:
		t.Fatalf("create t2's index of the same name: %d %s", status, body)
	}
	s, body := do("Administrator", http.MethodPost, path("t1")+"/query", query)
	if s != http.StatusOK || !strings.Contains(body, `"id":"t1-hotel"`) || strings.Contains(body, `"t2-hotel"`) {
		t.Errorf("t1's search after t2's PUT (%d): %d %s; want t1's index untouched, answering t1-hotel and not t2's document", status, s, body)
	}
	if s, body := do("Administrator", http.MethodGet, path("t1"), ""); s != http.StatusOK || !strings.Contains(body, `"t1.hotels"`) {
		t.Errorf("t1's definition after t2's PUT: %d %s; want t1's (types t1.hotels)", s, body)
	}
}

// A scoped path reaches only the indexes that read its scope: on scope t2's
// path, scope t1's index is not found (GET, query, count, DELETE: the 400
// "index not found") nor listed, and a DELETE there leaves it in place.
// (A review found that the scope of the path was not checked, so t2's
// path read, queried and deleted t1's index.)
func TestSearchScopedPathReachesOnlyItsScopesIndexes(t *testing.T) {
	eng, do := searchFront(t, nil, []string{"default"}, nil)
	ctx := context.Background()
	b, err := eng.Bucket("default")
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"t1", "t2"} {
		if err := b.CreateScope(ctx, tenant); err != nil {
			t.Fatal(err)
		}
		if _, err := b.CreateCollection(ctx, tenant, "hotels", 0); err != nil {
			t.Fatal(err)
		}
	}
	path := func(tenant string) string { return "/api/bucket/default/scope/" + tenant + "/index" }
	if status, body := do("Administrator", http.MethodPut, path("t1")+"/hotels", `{"type":"fulltext-index","sourceName":"default","sourceCollection":"t1.hotels"}`); status != http.StatusOK {
		t.Fatalf("create t1's index: %d %s", status, body)
	}
	for _, r := range []struct{ method, path, body string }{
		{http.MethodGet, path("t2") + "/hotels", ""},
		{http.MethodPost, path("t2") + "/hotels/query", `{"query":{"match_all":{}}}`},
		{http.MethodGet, path("t2") + "/hotels/count", ""},
		{http.MethodDelete, path("t2") + "/hotels", ""},
	} {
		if status, body := do("Administrator", r.method, r.path, r.body); status != http.StatusBadRequest || !strings.Contains(body, "index not found") {
			t.Errorf("%s %s (t1's index): %d %s; want 400 index not found", r.method, r.path, status, body)
		}
	}
	if status, body := do("Administrator", http.MethodGet, path("t2"), ""); status != http.StatusOK || strings.Contains(body, `"hotels"`) {
		t.Errorf("t2's list: %d %s; want no hotels", status, body)
	}
	if status, body := do("Administrator", http.MethodGet, path("t1"), ""); status != http.StatusOK || !strings.Contains(body, `"hotels"`) {
		t.Errorf("t1's list: %d %s; want hotels", status, body)
	}
	if status, body := do("Administrator", http.MethodGet, path("t1")+"/hotels", ""); status != http.StatusOK {
		t.Errorf("t1's index after t2's DELETE: %d %s; want it still there", status, body)
	}
	// A definition of scope t1's collection is refused on t2's path.
	if status, body := do("Administrator", http.MethodPut, path("t2")+"/other", `{"type":"fulltext-index","sourceName":"default","sourceCollection":"t1.hotels"}`); status != http.StatusBadRequest || !strings.Contains(body, "scope t1") {
		t.Errorf("PUT on t2's path of a t1 definition: %d %s; want 400 naming scope t1", status, body)
	}
}
