// Package rawquery reads the parameters of a URL's query string in place,
// answering as the url.Values that url.ParseQuery builds would (Get and Has:
// the first value of a name; pairs it cannot parse, with a ";" or a bad
// escape, skipped), without building them: the view handler and the
// permission checks look up a few names per request, and a map of every
// parameter, each value in its own slice, cost a view query more than its
// other parsing.
package rawquery

import (
	"net/url"
	"strings"
)

// maxScanned is the most parameters Query reads in place: past it, Parse
// parses once (and so keeps url.ParseQuery's own limit of parameters,
// GODEBUG urlmaxqueryparams, whatever it is), so that many lookups in a
// long query do not scan it each time.
const maxScanned = 100

// Query is a parsed query string. Its zero value has no parameters.
type Query struct {
	raw    string
	vals   url.Values
	parsed bool // vals holds the parameters, not raw
}

// Parse returns the parameters of raw, a URL's RawQuery.
func Parse(raw string) Query {
	if strings.Count(raw, "&") >= maxScanned {
		v, _ := url.ParseQuery(raw) // what it parsed, as URL.Query keeps it
		return Query{vals: v, parsed: true}
	}
	return Query{raw: raw}
}

// FromValues returns the parameters of v.
func FromValues(v url.Values) Query {
	return Query{vals: v, parsed: true}
}

// Lookup returns the first value of name and whether name is there at all
// (url.Values' Get and Has in one).
func (q Query) Lookup(name string) (string, bool) {
	if q.parsed {
		vs, ok := q.vals[name]
		if len(vs) == 0 {
			return "", ok
		}
		return vs[0], true
	}
	for raw := q.raw; raw != ""; {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" || strings.Contains(pair, ";") {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k, err := url.QueryUnescape(k) // no allocation unless escaped
		if err != nil || k != name {
			continue
		}
		if v, err = url.QueryUnescape(v); err != nil {
			continue
		}
		return v, true
	}
	return "", false
}

// Get returns the first value of name, "" when it has none.
func (q Query) Get(name string) string {
	v, _ := q.Lookup(name)
	return v
}

// Has says whether name is there, with a value or not.
func (q Query) Has(name string) bool {
	_, ok := q.Lookup(name)
	return ok
}
