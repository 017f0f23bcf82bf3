package views_test

import (
	"errors"
	"net/url"
	"testing"

	"github.com/mayflydb/mayfly/views"
)

// FuzzParseViewParams: any query string and body either parse or give a
// *QueryError naming a parameter; nothing panics.
func FuzzParseViewParams(f *testing.F) {
	for _, s := range []string{
		"", "key=1", "keys=[1,2]", "startkey=%5B1%5D&endkey=%5B2%5D&descending=true", "limit=-1", "skip=x",
		"group=true&group_level=2", "stale=later", "reduce=maybe", "on_error=stop&connection_timeout=5",
		"startkey=notjson", "keys=%7B%7D", "count=3", "inclusive_end=false&startkey_docid=a&endkey_docid=b",
	} {
		f.Add(s, "")
	}
	f.Add("", `{"keys":[1,"a",null]}`)
	f.Add("key=1", `{"keys":[1]}`)
	f.Add("", `{"keys":`)
	f.Fuzz(func(t *testing.T, query, body string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		p, err := views.ParseParams(q, []byte(body))
		if err != nil {
			var qe *views.QueryError
			if !errors.As(err, &qe) || qe.Param == "" || qe.Reason == "" || (qe.Code != "query_parse_error" && qe.Code != "bad_request") {
				t.Fatalf("error is not a complete QueryError: %#v", err)
			}
			return
		}
		if p.Limit < -1 || p.Skip < 0 || p.GroupLevel < -1 {
			t.Fatalf("out-of-range values accepted: %+v", p)
		}
	})
}

func TestParseParamsDefaults(t *testing.T) {
	p, err := views.ParseParams(url.Values{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.InclusiveEnd || p.Descending || p.Limit != -1 || p.Skip != 0 || p.Group || p.GroupLevel != -1 ||
		p.Reduce != nil || p.IncludeDocs || p.Stale != views.StaleUpdateAfter || p.Keys != nil {
		t.Fatalf("defaults: %+v", p)
	}
	p, _ = views.ParseParams(url.Values{"stale": {"OK"}, "descending": {"TRUE"}}, nil)
	if p.Stale != views.StaleOK || !p.Descending {
		t.Fatalf("case-insensitive stale and booleans: %+v", p)
	}
}
