package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAllDocs: GET /{bucket}/_all_docs answers CouchDB's shape (total_rows,
// offset, rows of id, key and value.rev) in key order, with startkey,
// endkey, inclusive_end, key, descending, skip, limit and include_docs, and
// leaves expired documents out.
func TestAllDocs(t *testing.T) {
	f := newFixture(t)
	f.do("POST", "/pools/default/buckets/default/scopes", formCT, "name=s")
	f.do("POST", "/pools/default/buckets/default/scopes/s/collections", formCT, "name=c")
	f.bulkLines(`{"op":"upsert","id":"b","doc":{"v":"b","_id":"stale"}}
{"op":"upsert","id":"a","doc":{"v":"a"}}
{"op":"upsert","id":"c","doc":"text","expiry":100}
{"op":"upsert","id":"gone","doc":1,"expiry":5}
{"op":"upsert","id":"A","doc":2}
{"op":"upsert","id":"x","doc":{"v":"x"},"collection":"s.c"}
`)
	f.clk.Advance(10) // "gone" expires
	type page struct {
		Total  int `json:"total_rows"`
		Offset int `json:"offset"`
		Rows   []struct {
			ID    string `json:"id"`
			Key   string `json:"key"`
			Value struct {
				Rev string `json:"rev"`
			} `json:"value"`
			Doc map[string]any `json:"doc"`
		} `json:"rows"`
	}
	get := func(q string) page {
		t.Helper()
		st, _, body := f.do("GET", "/default/_all_docs"+q, "", "")
		if st != 200 {
			t.Fatalf("%s: %d %s", q, st, body)
		}
		var p page
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatalf("%s: %v\n%s", q, err, body)
		}
		return p
	}
	for _, c := range []struct {
		q      string
		ids    string
		offset int
	}{
		{"", "A a b c", 0},
		{`?startkey="a"&endkey="b"`, "a b", 1},
		{`?start_key="a"&end_key="b"&inclusive_end=false`, "a", 1},
		{`?startkey="a0"`, "b c", 2},
		{`?key="b"`, "b", 2},
		{`?key="nope"`, "", 4},
		{`?key="a0"`, "", 2},
		{"?skip=1&limit=2", "a b", 1},
		{"?limit=0", "", 0},
		{"?descending=true", "c b a A", 0},
		{`?descending=true&startkey="b"&endkey="a"`, "b a", 1},
		{`?descending=true&startkey="b"&endkey="a"&inclusive_end=false`, "b", 1},
		{`?descending=true&skip=1&limit=1`, "b", 1},
		{"?skip=9", "", 4},
		{"?collection=s.c", "x", 0},
	} {
		p := get(c.q)
		var ids []string
		for _, r := range p.Rows {
			ids = append(ids, r.ID)
			if r.Key != r.ID || !strings.HasPrefix(r.Value.Rev, "1-") || r.Doc != nil {
				t.Errorf("%s: row %+v", c.q, r)
			}
		}
		want := 4
		if c.q == "?collection=s.c" {
			want = 1
		}
		if strings.Join(ids, " ") != c.ids || p.Offset != c.offset || p.Total != want {
			t.Errorf("%s: rows %q offset %d total %d, want %q offset %d total %d", c.q, ids, p.Offset, p.Total, c.ids, c.offset, want)
		}
	}
	p := get("?include_docs=true")
	docs := map[string]map[string]any{}
	for _, r := range p.Rows {
		docs[r.ID] = r.Doc
		if r.Doc["_id"] != r.ID || r.Doc["_rev"] != r.Value.Rev {
			t.Errorf("include_docs: %s: %v", r.ID, r.Doc)
		}
	}
	if docs["a"]["v"] != "a" || docs["b"]["v"] != "b" || docs["c"]["json"] != "text" || docs["A"]["json"] != 2.0 {
		t.Errorf("include_docs: %v", docs)
	}
	for _, bad := range []string{"?limit=-1", "?skip=-1", "?limit=x", `?startkey="a`, "?include_docs=maybe", "?descending=2", "?collection=nope"} {
		if st, _, body := f.do("GET", "/default/_all_docs"+bad, "", ""); st != 400 {
			t.Errorf("%s: %d %s", bad, st, body)
		}
	}
	if st, _, _ := f.do("GET", "/nope/_all_docs", "", ""); st != 404 {
		t.Errorf("no bucket: %d", st)
	}
	f.addUser("viewer", "viewerpw", "views_reader[default]")
	if st, _, _ := f.doAs("viewer", "viewerpw", "GET", "/default/_all_docs", "", ""); st != 403 {
		t.Errorf("a user without data_reader: %d", st)
	}
}
