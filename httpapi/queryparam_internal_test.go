package httpapi

import (
	"net/url"
	"strings"
	"testing"
)

// queryParam answers as url.ParseQuery's Values do (Get and Has), whatever
// the query: the permission checks rely on it to see include_docs exactly
// where the handler will.
func TestQueryParamMatchesParseQuery(t *testing.T) {
	for _, raw := range []string{
		"", "include_docs=true", "include_docs", "include_docs=", "a=1&include_docs=false&include_docs=true",
		"include%5Fdocs=true", "include_docs=%ZZ&include_docs=yes", "include_docs;x=1&include_docs=2",
		"%ZZ=1&include_docs=3", "include+docs=1", "include_docs=a+b%20c", "&&include_docs=x&&",
		"stale=ok&reduce=false&limit=100&startkey=%5B%22t3%22,123%5D",
		strings.Repeat("a=1&", 20000) + "include_docs=true",
	} {
		checkQueryParam(t, raw, "include_docs")
	}
}

func FuzzQueryParam(f *testing.F) {
	f.Add("include_docs=true&x=%5B1%5D", "include_docs")
	f.Add("touch;=1&touch=%41", "touch")
	f.Fuzz(func(t *testing.T, raw, name string) { checkQueryParam(t, raw, name) })
}

func checkQueryParam(t *testing.T, raw, name string) {
	t.Helper()
	q, _ := url.ParseQuery(raw)
	v, ok := queryParam(raw, name)
	if v != q.Get(name) || ok != q.Has(name) {
		t.Fatalf("queryParam(%.80q, %q) = %q, %v; url.ParseQuery: %q, %v", raw, name, v, ok, q.Get(name), q.Has(name))
	}
}
