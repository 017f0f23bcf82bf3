package search_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
)

// hotels is the fixed data set of the query tests.
var hotels = map[string]string{
	"h1": `{"type":"hotel","name":"Grand Hotel","city":"Paris","desc":"A grand old hotel by the river Seine","stars":5,"price":300,"opened":"1995-04-01T00:00:00Z","free_wifi":true}`,
	"h2": `{"type":"hotel","name":"River Inn","city":"London","desc":"A small inn on the river, quiet rooms","stars":3,"price":120,"opened":"2005-06-15T00:00:00Z","free_wifi":false}`,
	"h3": `{"type":"hotel","name":"Budget Rooms","city":"London","desc":"Cheap rooms near the station","stars":1,"price":45,"opened":"2015-01-20T00:00:00Z","free_wifi":true}`,
	"h4": `{"type":"hotel","name":"Palace","city":"Paris","desc":"Luxury palace with a garden and a spa","stars":5,"price":550,"opened":"1920-09-09T00:00:00Z","free_wifi":true}`,
	"h5": `{"type":"hotel","name":"Seaside Lodge","city":"Brighton","desc":"A lodge by the sea; the rooms look at the water","stars":2,"price":80,"opened":"2019-07-01T00:00:00Z","free_wifi":false}`,
	"h6": `{"type":"hotel","name":"Riverside Hostel","city":"Berlin","desc":"Hostel for travellers, riverside views","stars":1,"price":25,"opened":"2010-03-03T00:00:00Z","free_wifi":true}`,
	"b1": `["not", "an", "object"]`,
	"b2": `"a string"`,
}

func loadHotels(t testing.TB, typ engine.BucketType) *env {
	e := newEnv(t, typ, search.Options{})
	e.createIndex("hotels", `{"type":"fulltext-index","name":"hotels","sourceType":"couchbase","sourceName":"default","params":{"mapping":{"default_mapping":{"enabled":true,"dynamic":true}}}}`)
	for _, k := range slices.Sorted(maps.Keys(hotels)) {
		e.put(k, hotels[k], 0)
	}
	if _, err := e.bucket().DefaultCollection().Upsert(context.Background(), "bin", []byte{0xff, 0, 1}, nil); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestQueryTypes: every query type bleve parses answers what it should on
// the hotel data set.
func TestQueryTypes(t *testing.T) {
	for _, typ := range []engine.BucketType{engine.Couchbase, engine.Ephemeral} {
		t.Run(string(typ), func(t *testing.T) {
			e := loadHotels(t, typ)
			cases := []struct {
				name, query string
				want        []string // sorted by _id
			}{
				{"match", `{"match":"river","field":"desc"}`, []string{"h1", "h2"}},
				{"match fuzzy", `{"match":"rivr","field":"desc","fuzziness":1}`, []string{"h1", "h2"}},
				{"match and", `{"match":"river quiet","field":"desc","operator":"and"}`, []string{"h2"}},
				{"match_phrase", `{"match_phrase":"grand old hotel","field":"desc"}`, []string{"h1"}},
				{"term", `{"term":"london","field":"city"}`, []string{"h2", "h3"}},
				{"term not analysed", `{"term":"London","field":"city"}`, []string{}},
				{"prefix", `{"prefix":"river","field":"desc"}`, []string{"h1", "h2", "h6"}},
				{"wildcard", `{"wildcard":"r*er","field":"desc"}`, []string{"h1", "h2"}},
				{"regexp", `{"regexp":"lo.ge","field":"desc"}`, []string{"h5"}},
				{"fuzzy", `{"term":"palce","field":"name","fuzziness":2}`, []string{"h4"}},
				{"conjunction", `{"conjuncts":[{"match":"paris","field":"city"},{"match":"luxury","field":"desc"}]}`, []string{"h4"}},
				{"disjunction", `{"disjuncts":[{"match":"berlin","field":"city"},{"match":"brighton","field":"city"}]}`, []string{"h5", "h6"}},
				{"disjunction min", `{"disjuncts":[{"match":"paris","field":"city"},{"match":"river","field":"desc"}],"min":2}`, []string{"h1"}},
				{"boolean", `{"must":{"conjuncts":[{"match":"london","field":"city"}]},"must_not":{"disjuncts":[{"match":"cheap","field":"desc"}]}}`, []string{"h2"}},
				{"numeric_range", `{"min":100,"max":300,"inclusive_max":true,"field":"price"}`, []string{"h1", "h2"}},
				{"date_range", `{"start":"2005-01-01T00:00:00Z","end":"2016-01-01T00:00:00Z","field":"opened"}`, []string{"h2", "h3", "h6"}},
				{"bool", `{"bool":false,"field":"free_wifi"}`, []string{"h2", "h5"}},
				{"query_string", `{"query":"+city:paris stars:>4"}`, []string{"h1", "h4"}},
				{"query_string all", `{"query":"spa"}`, []string{"h4"}},
				{"match_all", `{"match_all":{}}`, []string{"h1", "h2", "h3", "h4", "h5", "h6"}},
				{"match_none", `{"match_none":{}}`, []string{}},
				{"docids", `{"ids":["h3","h5","nope"]}`, []string{"h3", "h5"}},
			}
			for i, c := range cases {
				req := fmt.Sprintf(`{"query":%s,"size":20,"sort":["_id"]`, c.query)
				if i == 0 {
					req += `,"ctl":{"consistency":{"level":"at_plus"},"timeout":10000}`
				}
				a := e.query("hotels", req+"}")
				if got := a.ids(); !slices.Equal(got, c.want) {
					t.Errorf("%s: hits %v, want %v", c.name, got, c.want)
				}
				if a.TotalHits != uint64(len(c.want)) {
					t.Errorf("%s: total_hits %d, want %d", c.name, a.TotalHits, len(c.want))
				}
				if a.Status.Total != 1 || a.Status.Successful != 1 || a.Status.Failed != 0 {
					t.Errorf("%s: status %+v", c.name, a.Status)
				}
				for _, h := range a.Hits {
					if h.Index != "hotels" {
						t.Errorf("%s: hit index %q", c.name, h.Index)
					}
				}
				if !strings.Contains(string(a.Request), `"sort":["_id"]`) || strings.Contains(string(a.Request), "_mayfly_exp") {
					t.Errorf("%s: request not as given: %s", c.name, a.Request)
				}
			}
			n, err := e.svc.Count(context.Background(), "default", "hotels")
			if err != nil || n != 6 {
				t.Fatalf("count %d, %v; want 6", n, err)
			}
		})
	}
}

// TestScoresAndFields: hits come best first with scores the expiry filter
// leaves alone, and stored fields without the expiry field.
func TestScoresAndFields(t *testing.T) {
	e := loadHotels(t, engine.Couchbase)
	a := e.query("hotels", `{"query":{"match":"river rooms","field":"desc"},"fields":["*"],"ctl":{"consistency":{"level":"at_plus"}}}`)
	if len(a.Hits) != 4 || a.TotalHits != 4 {
		t.Fatalf("hits %v (%d)", a.ids(), a.TotalHits)
	}
	if a.Hits[0].ID != "h2" { // both terms
		t.Fatalf("best hit %s, want h2: %v", a.Hits[0].ID, a.ids())
	}
	for i := 1; i < len(a.Hits); i++ {
		if a.Hits[i].Score > a.Hits[i-1].Score {
			t.Fatalf("hits not by score: %v", a.Hits)
		}
	}
	if a.MaxScore != a.Hits[0].Score || a.MaxScore <= 0 {
		t.Fatalf("max_score %v, best %v", a.MaxScore, a.Hits[0].Score)
	}
	f := a.Hits[0].Fields
	if f["name"] != "River Inn" || f["city"] != "London" || f["stars"] != 3.0 {
		t.Fatalf("fields %v", f)
	}
	if _, ok := f["_mayfly_exp"]; ok {
		t.Fatalf("the expiry field leaks: %v", f)
	}
	// The same query on a plain bleve index scores the same.
	b := e.query("hotels", `{"query":{"match":"river rooms","field":"desc"},"explain":true}`)
	if b.Hits[0].Score != a.Hits[0].Score {
		t.Fatalf("explain changed the score: %v vs %v", b.Hits[0].Score, a.Hits[0].Score)
	}
}

// TestHighlight: fragments mark the matched terms; locations say where.
func TestHighlight(t *testing.T) {
	e := loadHotels(t, engine.Couchbase)
	a := e.query("hotels", `{"query":{"match":"river","field":"desc"},"highlight":{"style":"html","fields":["desc"]},"includeLocations":true,"sort":["_id"],"ctl":{"consistency":{"level":"at_plus"}}}`)
	if got := a.ids(); !slices.Equal(got, []string{"h1", "h2"}) {
		t.Fatalf("hits %v", got)
	}
	want := map[string]string{
		"h1": "A grand old hotel by the <mark>river</mark> Seine",
		"h2": "A small inn on the <mark>river</mark>, quiet rooms",
	}
	for _, h := range a.Hits {
		if fr := h.Fragments["desc"]; len(fr) != 1 || fr[0] != want[h.ID] {
			t.Errorf("%s: fragments %q, want %q", h.ID, fr, want[h.ID])
		}
		if len(h.Locations["desc"]["river"]) != 1 {
			t.Errorf("%s: locations %v", h.ID, h.Locations)
		}
	}
	a = e.query("hotels", `{"query":{"match":"river","field":"desc"},"highlight":{"style":"ansi"},"sort":["_id"]}`)
	if fr := a.Hits[0].Fragments["desc"]; len(fr) != 1 || !strings.Contains(fr[0], "\x1b[43mriver\x1b[0m") {
		t.Errorf("ansi fragments %q", fr)
	}
	// The SDKs' default style is "" (gocb sends {"style":"","fields":null}
	// for SearchHighlightOptions{}): the default highlighter, html.
	a = e.query("hotels", `{"query":{"match":"river","field":"desc"},"highlight":{"style":"","fields":null},"sort":["_id"]}`)
	if fr := a.Hits[0].Fragments["desc"]; len(fr) != 1 || fr[0] != want["h1"] {
		t.Errorf("default-style fragments %q, want %q", fr, want["h1"])
	}
}

type termFacet struct {
	Field   string `json:"field"`
	Total   int    `json:"total"`
	Missing int    `json:"missing"`
	Other   int    `json:"other"`
	Terms   []struct {
		Term  string `json:"term"`
		Count int    `json:"count"`
	} `json:"terms"`
	NumericRanges []struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	} `json:"numeric_ranges"`
	DateRanges []struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	} `json:"date_ranges"`
}

func facet(t *testing.T, a *answer, name string) termFacet {
	t.Helper()
	var f termFacet
	if err := json.Unmarshal(a.Facets[name], &f); err != nil {
		t.Fatalf("facet %s: %s: %v", name, a.Facets[name], err)
	}
	return f
}

func facetString(f termFacet) string {
	var parts []string
	for _, x := range f.Terms {
		parts = append(parts, fmt.Sprintf("%s=%d", x.Term, x.Count))
	}
	for _, x := range f.NumericRanges {
		parts = append(parts, fmt.Sprintf("%s=%d", x.Name, x.Count))
	}
	for _, x := range f.DateRanges {
		parts = append(parts, fmt.Sprintf("%s=%d", x.Name, x.Count))
	}
	return fmt.Sprintf("total=%d %s", f.Total, strings.Join(parts, " "))
}

const facetsReq = `{"query":{"match_all":{}},"size":0,"facets":{
	"cities":{"field":"city","size":10},
	"prices":{"field":"price","size":10,"numeric_ranges":[{"name":"cheap","max":100},{"name":"mid","min":100,"max":400},{"name":"dear","min":400}]},
	"opened":{"field":"opened","size":10,"date_ranges":[{"name":"old","end":"2000-01-01T00:00:00Z"},{"name":"new","start":"2000-01-01T00:00:00Z"}]}},
	"ctl":{"consistency":{"level":"at_plus"}}}`

// TestFacets: term, numeric range and date range facets count the hits.
func TestFacets(t *testing.T) {
	e := loadHotels(t, engine.Couchbase)
	a := e.query("hotels", facetsReq)
	if a.TotalHits != 6 || len(a.Hits) != 0 {
		t.Fatalf("total_hits %d, hits %d", a.TotalHits, len(a.Hits))
	}
	for name, want := range map[string]string{
		"cities": "total=6 london=2 paris=2 berlin=1 brighton=1",
		"prices": "total=6 cheap=3 mid=2 dear=1",
		"opened": "total=6 new=4 old=2",
	} {
		if got := facetString(facet(t, a, name)); got != want {
			t.Errorf("facet %s: %s, want %s", name, got, want)
		}
	}
}

// TestBadRequests: requests that do not parse or ask too much are
// *QueryError; a missing index is ErrNotFound.
func TestBadRequests(t *testing.T) {
	e := loadHotels(t, engine.Couchbase)
	ctx := context.Background()
	for _, req := range []string{
		`not json`,
		`{}`,
		`{"query":{"nonsense":1}}`,
		`{"query":{"match_all":{}},"size":10001}`,
		`{"query":{"match_all":{}},"ctl":{"consistency":{"level":"sometimes"}}}`,
		`{"query":{"regexp":"[","field":"desc"}}`,
	} {
		_, err := e.svc.Query(ctx, "default", "hotels", []byte(req))
		var qe *search.QueryError
		if !errors.As(err, &qe) {
			t.Errorf("%s: %v, want a QueryError", req, err)
		}
	}
	if _, err := e.svc.Query(ctx, "default", "nope", []byte(`{"query":{"match_all":{}}}`)); !errors.Is(err, search.ErrNotFound) {
		t.Errorf("missing index: %v", err)
	}
	st, err := e.svc.IndexStats(ctx, "default", "hotels")
	if err != nil {
		t.Fatal(err)
	}
	if st.Queries != 6 || st.QueryErrors != 6 {
		t.Errorf("stats %+v", st)
	}
}

// TestAnalyzers: the analyzers Couchbase offers can be named in a mapping
// (here English, which stems).
func TestAnalyzers(t *testing.T) {
	e := loadHotels(t, engine.Couchbase)
	e.createIndex("en", `{"params":{"mapping":{"default_analyzer":"en"}}}`)
	a := e.query("en", `{"query":{"match":"rivers","field":"desc"},"sort":["_id"],"ctl":{"consistency":{"level":"at_plus"}}}`)
	if got := a.ids(); !slices.Equal(got, []string{"h1", "h2"}) {
		t.Fatalf("en: %v", got)
	}
	a = e.query("hotels", `{"query":{"match":"rivers","field":"desc"}}`)
	if a.TotalHits != 0 {
		t.Fatalf("standard stems: %v", a.ids())
	}
}

// TestQueryStringBooleans: in a query string, field:true and field:false
// find a boolean field of that value (bleve's syntax alone looks for the
// text "true", which a boolean field never holds), -field:true leaves such
// documents out, a text field holding the word still matches, and the
// answer shows the request as it was sent.
func TestQueryStringBooleans(t *testing.T) {
	e := newEnv(t, engine.Couchbase, search.Options{})
	e.createIndex("players", `{"type":"fulltext-index","name":"players","sourceType":"couchbase","sourceName":"default"}`)
	for k, v := range map[string]string{
		"ann":  `{"bio":"chess","country":"fr","retired":false}`,
		"bo":   `{"bio":"chess","country":"fr","retired":true}`,
		"cy":   `{"bio":"chess","country":"it","retired":false}`,
		"note": `{"bio":"a true story","retired":"true"}`,
	} {
		e.put(k, v, 0)
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{`{"query":"retired:true"}`, []string{"bo", "note"}},
		{`{"query":"retired:false"}`, []string{"ann", "cy"}},
		{`{"query":"retired:TRUE"}`, []string{"bo", "note"}},
		{`{"query":"chess +country:fr -retired:true"}`, []string{"ann"}},
		{`{"query":"bio:true"}`, []string{"note"}},
		{`{"conjuncts":[{"query":"-retired:false"},{"match":"chess","field":"bio"}]}`, []string{"bo"}},
		{`{"query":"retired:\"true\""}`, []string{"note"}}, // a phrase stays text
	} {
		a := e.query("players", fmt.Sprintf(`{"query":%s,"size":10,"sort":["_id"],"ctl":{"consistency":{"level":"at_plus"}}}`, c.query))
		if got := a.ids(); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.query, got, c.want)
		}
		var req struct {
			Query json.RawMessage `json:"query"`
		}
		if err := json.Unmarshal(a.Request, &req); err != nil || !strings.Contains(string(req.Query), `"query":"`) || strings.Contains(string(req.Query), `"bool"`) {
			t.Errorf("%s: the answer's request is %s, not the request sent", c.query, a.Request)
		}
	}
}
