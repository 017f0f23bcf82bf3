package search_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/search"
)

// TestNestedQueryCostIsBoundedBySize checks that parsing a search request
// whose query nests compound queries deeply (conjuncts inside conjuncts)
// costs memory in proportion to the request, or is refused, rather than
// growing with the square of its depth. A review found that each level is
// decoded again from its raw JSON, so a 78 KB request of depth 4,900 (under
// encoding/json's nesting limit) allocates about 7 GB and takes seconds of
// CPU before ctl.timeout applies: a few such requests, from any user who may
// search, keep the server's cores busy.
func TestNestedQueryCostIsBoundedBySize(t *testing.T) {
	const depth = 1500
	req := `{"query":` + strings.Repeat(`{"conjuncts":[`, depth) + `{"match":"x"}` + strings.Repeat(`]}`, depth) + `,"size":10}`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, _, err := search.ParseRequest([]byte(req))
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	// Generous: over a thousand times the request's size.
	const bound = 32 << 20
	if allocated > bound {
		t.Fatalf("parsing a %d-byte request nested %d deep allocated %d MiB (bound %d MiB); err=%v", len(req), depth, allocated>>20, bound>>20, err)
	}
	t.Logf("allocated %d KiB; err=%v", allocated>>10, err)
}

// A compound query nested a hundred levels deep, beyond any a person or an
// SDK writes, still parses under search.MaxRequestDepth.
func TestNestedQueryOfAHundredLevelsParses(t *testing.T) {
	const depth = 100
	req := `{"query":` + strings.Repeat(`{"conjuncts":[`, depth) + `{"match":"x"}` + strings.Repeat(`]}`, depth) + `,"size":10}`
	if _, _, _, err := search.ParseRequest([]byte(req)); err != nil {
		t.Fatalf("a query nested %d compound levels deep: %v", depth, err)
	}
}
