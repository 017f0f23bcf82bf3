package main

import (
	"strings"
	"testing"
)

// load checks --collection's shape (scope.collection) before it reads its
// input, as export does: a malformed one is a mistake in the command line,
// exit 2, and no line is read or sent; a review found load sent every line
// and reported each one failed (bad_request, exit 1), a whole file's work
// for a typo.
func TestLoadRefusesMalformedCollectionFlag(t *testing.T) {
	f := cliServer(t)
	in := `{"_id":"a","x":1}` + "\n" + `{"_id":"b","x":2}` + "\n"
	for _, coll := range []string{"people", "app.", ".people", "app.people.more"} {
		r := f.mf(in, "load", "-", "--collection", coll)
		if r.code != 2 || !strings.Contains(r.errOut, "--collection") || strings.Contains(r.out, "loaded") {
			t.Errorf("load --collection %q: %v, want exit 2 naming --collection, nothing loaded", coll, r)
		}
	}
	if r := f.mf("", "export", "-", "--collection", "people"); r.code != 2 {
		t.Errorf("export --collection people: %v, want exit 2 (as load)", r)
	}
}
