package views_test

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/views"
)

// FuzzParseViewParams: any query string and body either parse or give a
// *QueryError naming a parameter; nothing panics. ParseRawParams, reading
// the query in place, gives the same answer or the same error as
// ParseParams of url.ParseQuery's values (the HTTP handler used to parse
// URL.Query, which keeps what ParseQuery parsed even when it errs).
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
	f.Add("limit=1;x&limit=2&stale=%zz&stale=ok&startkey=%5B1", "")
	f.Add("descending=yes&group=maybe&inclusive_end=no&include_docs=0", "")
	f.Add(strings.Repeat("a&", 120)+"limit=x", "")
	f.Fuzz(func(t *testing.T, query, body string) {
		q, err := url.ParseQuery(query)
		raw := views.Params{Limit: 7, Keys: [][]byte{}} // not reset: ParseRawParams must do it
		rawErr := views.ParseRawParams(&raw, query, []byte(body))
		byMap, mapErr := views.ParseParams(q, []byte(body))
		if fmt.Sprint(rawErr) != fmt.Sprint(mapErr) || mapErr == nil && !reflect.DeepEqual(&raw, byMap) {
			t.Fatalf("query %q: ParseRawParams: %+v, %v; ParseParams: %+v, %v", query, raw, rawErr, byMap, mapErr)
		}
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

// A key that no view can hold is refused before anything else is done with
// it, and so are keys whose whole would take too much memory; the keys are
// slices of the body, not copies.
func TestParseParamsKeyBounds(t *testing.T) {
	long := `"` + strings.Repeat("x", views.MaxKeySize) + `"`
	for _, c := range []struct {
		name  string
		query url.Values
		body  string
	}{
		{"key", url.Values{"key": {long}}, ""},
		{"keys in the query", url.Values{"keys": {"[" + long + "]"}}, ""},
		{"keys in the body", url.Values{}, `{"keys":[1,` + long + `]}`},
		{"too many keys", url.Values{}, `{"keys":[` + strings.Repeat("1,", views.MaxKeysSize/64) + `1]}`},
	} {
		_, err := views.ParseParams(c.query, []byte(c.body))
		var qe *views.QueryError
		if !errors.As(err, &qe) || qe.Param == "" || qe.Code != "bad_request" {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	under := `"` + strings.Repeat("y", views.MaxKeySize-3) + `"`
	body := []byte(`{"keys": [` + under + `, [1, 2] ]}`)
	p, err := views.ParseParams(url.Values{}, body)
	if err != nil || len(p.Keys) != 2 || string(p.Keys[0]) != under || string(p.Keys[1]) != "[1, 2]" {
		t.Fatalf("keys just under the limit: %v %+v", err, p)
	}
	body[len(`{"keys": [`)+1] = 'z' // the keys are the body's own bytes
	if p.Keys[0][1] != 'z' {
		t.Fatal("keys were copied out of the body")
	}
}
