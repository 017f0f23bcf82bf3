package search_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

var update = flag.Bool("update", false, "rewrite the golden answers in testdata")

// goldenQueries are whole answers compared with testdata/NAME.json (took
// zeroed): Couchbase's shape, scores, fragments, locations and facets.
var goldenQueries = map[string]string{
	"match_highlight_facets": `{"query":{"match":"river rooms","field":"desc"},"fields":["name","city","stars"],
		"highlight":{"style":"html","fields":["desc"]},"includeLocations":true,
		"facets":{"cities":{"field":"city","size":3},"stars":{"field":"stars","size":3,"numeric_ranges":[{"name":"low","max":3},{"name":"high","min":3}]}},
		"ctl":{"consistency":{"level":"at_plus"}}}`,
	"query_string_sorted": `{"query":{"query":"city:london city:paris -stars:<2"},"sort":["-price","_id"],"fields":["price"],"size":3,"from":1,
		"ctl":{"consistency":{"level":"at_plus"}}}`,
	"date_facet_after": `{"query":{"date_range":"x","start":"1990-01-01T00:00:00Z","field":"opened"},"size":2,"sort":["_id"],"search_after":["h2"],
		"facets":{"decades":{"field":"opened","size":5,"date_ranges":[{"name":"1990s","start":"1990-01-01T00:00:00Z","end":"2000-01-01T00:00:00Z"},{"name":"2000s","start":"2000-01-01T00:00:00Z","end":"2010-01-01T00:00:00Z"},{"name":"2010s","start":"2010-01-01T00:00:00Z"}]}},
		"ctl":{"consistency":{"level":"at_plus"}}}`,
}

func TestGolden(t *testing.T) {
	e := loadHotels(t, engine.Couchbase)
	for name, req := range goldenQueries {
		t.Run(name, func(t *testing.T) {
			raw, err := e.svc.Query(context.Background(), "default", "hotels", []byte(req))
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			m["took"] = 0
			m["cost"] = 0 // bytes read: depends on how the batches made segments
			got, _ := json.MarshalIndent(m, "", "  ")
			got = append(got, '\n')
			path := filepath.Join("testdata", name+".json")
			if *update {
				os.MkdirAll("testdata", 0o755)
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("answer differs from %s:\n%s", path, got)
			}
		})
	}
}
