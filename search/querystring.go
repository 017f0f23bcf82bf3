package search

import (
	"strings"

	"github.com/blevesearch/bleve/v2/search/query"
)

// Query strings and boolean fields.
//
// bleve's query string syntax reads field:true as a match query for the
// text "true", which never finds a boolean field: bleve indexes a boolean as
// the term "T" or "F", and the match query analyses its text as the field's
// analyser does, so it looks for "true" (bleve issues #626 and #1889). In a
// query string, Mayfly reads field:true and field:false as the text match
// bleve makes *or* a boolean field of that value, so `-retired:true` leaves
// out the documents whose retired is true, and a text field that holds the
// word "true" still matches as before.

// withBooleans returns q with every query string in it parsed and its
// field:true and field:false clauses also matching a boolean field of that
// value. q itself is left unchanged (it is the request the answer shows);
// the parts that change are copies. A query string that does not parse is
// left as it is, for bleve to report.
func withBooleans(q query.Query) query.Query {
	switch v := q.(type) {
	case *query.QueryStringQuery:
		if v == nil {
			return q
		}
		parsed, err := v.Parse()
		if err != nil {
			return q
		}
		return booleanMatches(parsed)
	case *query.BooleanQuery:
		if v == nil {
			return q
		}
		c := *v
		c.Must = withBooleans(v.Must)
		c.Should = withBooleans(v.Should)
		c.MustNot = withBooleans(v.MustNot)
		c.Filter = withBooleans(v.Filter)
		return &c
	case *query.ConjunctionQuery:
		if v == nil {
			return q
		}
		c := *v
		c.Conjuncts = make([]query.Query, len(v.Conjuncts))
		for i, sub := range v.Conjuncts {
			c.Conjuncts[i] = withBooleans(sub)
		}
		return &c
	case *query.DisjunctionQuery:
		if v == nil {
			return q
		}
		c := *v
		c.Disjuncts = make([]query.Query, len(v.Disjuncts))
		for i, sub := range v.Disjuncts {
			c.Disjuncts[i] = withBooleans(sub)
		}
		return &c
	}
	return q
}

// booleanMatches rewrites, in a query a query string parsed into (which
// nothing else holds), each match query of a field for the text true or
// false into that match or the boolean field query of that value.
func booleanMatches(q query.Query) query.Query {
	switch v := q.(type) {
	case *query.MatchQuery:
		if v == nil || v.FieldVal == "" {
			return q
		}
		var b bool
		switch {
		case strings.EqualFold(v.Match, "true"):
			b = true
		case strings.EqualFold(v.Match, "false"):
		default:
			return q
		}
		bq := query.NewBoolFieldQuery(b)
		bq.SetField(v.FieldVal)
		bq.SetBoost(v.BoostVal.Value())
		return query.NewDisjunctionQuery([]query.Query{v, bq})
	case *query.BooleanQuery:
		if v == nil {
			return q
		}
		v.Must = booleanMatches(v.Must)
		v.Should = booleanMatches(v.Should)
		v.MustNot = booleanMatches(v.MustNot)
		v.Filter = booleanMatches(v.Filter)
	case *query.ConjunctionQuery:
		if v == nil {
			return q
		}
		for i, sub := range v.Conjuncts {
			v.Conjuncts[i] = booleanMatches(sub)
		}
	case *query.DisjunctionQuery:
		if v == nil {
			return q
		}
		for i, sub := range v.Disjuncts {
			v.Disjuncts[i] = booleanMatches(sub)
		}
	}
	return q
}
