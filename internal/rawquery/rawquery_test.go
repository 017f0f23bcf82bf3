package rawquery_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/internal/rawquery"
)

// Parse answers as url.ParseQuery's Values do (Get and Has), whatever the
// query: the permission checks and the view parameters rely on it to see
// exactly what the handlers saw when they parsed with URL.Query.
func TestQueryMatchesParseQuery(t *testing.T) {
	names := []string{"include_docs", "a", "", "x y", "touch", "startkey"}
	for _, raw := range []string{
		"", "include_docs=true", "include_docs", "include_docs=", "a=1&include_docs=false&include_docs=true",
		"include%5Fdocs=true", "include_docs=%ZZ&include_docs=yes", "include_docs;x=1&include_docs=2",
		"%ZZ=1&include_docs=3", "include+docs=1", "include_docs=a+b%20c", "&&include_docs=x&&", "=1&=2",
		"x+y=1&x%20y=2", "stale=ok&reduce=false&limit=100&startkey=%5B%22t3%22,123%5D",
		strings.Repeat("a=1&", 99) + "include_docs=true", strings.Repeat("a=1&", 100) + "include_docs=true",
		strings.Repeat("a=1&", 20000) + "include_docs=true",
	} {
		for _, name := range names {
			check(t, raw, name)
		}
	}
}

func FuzzQuery(f *testing.F) {
	f.Add("include_docs=true&x=%5B1%5D", "include_docs")
	f.Add("touch;=1&touch=%41", "touch")
	f.Add("a=%zz&a=2", "a")
	f.Fuzz(check)
}

func check(t *testing.T, raw, name string) {
	t.Helper()
	q, _ := url.ParseQuery(raw)
	for _, got := range []rawquery.Query{rawquery.Parse(raw), rawquery.FromValues(q)} {
		v, ok := got.Lookup(name)
		if v != q.Get(name) || ok != q.Has(name) || got.Get(name) != v || got.Has(name) != ok {
			t.Fatalf("Lookup(%q) in %.80q = %q, %v; url.ParseQuery: %q, %v", name, raw, v, ok, q.Get(name), q.Has(name))
		}
	}
}
