package httpapi_test

import (
	"encoding/json"
	"testing"
)

func TestBrowseDocs(t *testing.T) {
	f := newFixture(t)
	f.bulkLines(`{"op":"upsert","id":"b","doc":{"v":"b"},"flags":7}
{"op":"upsert","id":"a","doc":{"v":"a"}}
{"op":"upsert","id":"c","doc":"text","expiry":100}
{"op":"upsert","id":"gone","doc":1,"expiry":5}
{"op":"upsert","id":"A","doc":2}
`)
	f.clk.Advance(10) // "gone" expires
	const base = "/pools/default/buckets/default/scopes/_default/collections/_default/docs"
	type page struct {
		Total int `json:"total_rows"`
		Rows  []struct {
			ID         string         `json:"id"`
			CAS        uint64         `json:"cas"`
			Expiration int64          `json:"expiration"`
			Flags      uint32         `json:"flags"`
			Type       string         `json:"type"`
			Doc        map[string]any `json:"doc"`
		} `json:"rows"`
	}
	get := func(q string) page {
		t.Helper()
		st, _, body := f.do("GET", base+q, "", "")
		if st != 200 {
			t.Fatalf("%s: %d %s", q, st, body)
		}
		var p page
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ids := func(p page) (out []string) {
		for _, r := range p.Rows {
			out = append(out, r.ID)
		}
		return out
	}
	p := get("")
	if got := ids(p); len(got) != 4 || got[0] != "A" || got[1] != "a" || got[2] != "b" || got[3] != "c" || p.Total != 4 {
		t.Fatalf("all: %v total %d", got, p.Total)
	}
	if r := p.Rows[2]; r.Flags != 7 || r.Type != "json" || r.CAS == 0 || r.Doc != nil {
		t.Errorf("b: %+v", r)
	}
	if r := p.Rows[3]; r.Expiration != t0+100 {
		t.Errorf("c: %+v", r)
	}
	p = get(`?startkey="a"&endkey=b&include_docs=true`)
	if got := ids(p); len(got) != 2 || got[0] != "a" || got[1] != "b" || p.Total != 2 {
		t.Fatalf("range: %v", got)
	}
	if j := p.Rows[0].Doc["json"].(map[string]any); j["v"] != "a" {
		t.Errorf("include_docs: %v", p.Rows[0].Doc)
	}
	if got := ids(get("?skip=1&limit=2")); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("skip/limit: %v", got)
	}
	for _, bad := range []string{"?limit=0", "?skip=-1", "?limit=x", `?startkey="a`, "?include_docs=maybe"} {
		if st, _, body := f.do("GET", base+bad, "", ""); st != 400 {
			t.Errorf("%s: %d %s", bad, st, body)
		}
	}
	if st, _, _ := f.do("GET", "/pools/default/buckets/default/scopes/_default/collections/nope/docs", "", ""); st != 404 {
		t.Errorf("no collection: %d", st)
	}
	f.addUser("reader", "readerpw", "data_reader[default]")
	f.addUser("viewer", "viewerpw", "views_reader[default]")
	if st, _, _ := f.doAs("reader", "readerpw", "GET", base, "", ""); st != 200 {
		t.Errorf("reader: %d", st)
	}
	if st, _, _ := f.doAs("viewer", "viewerpw", "GET", base, "", ""); st != 403 {
		t.Errorf("viewer: %d", st)
	}
}

// A listing's include_docs gives each value as it is stored: a value read
// to be copied elsewhere (mayfly export) is the same bytes, not a
// re-encoding with its spaces dropped and its '<', '>' and '&' escaped.
func TestBrowseDocsValuesAsStored(t *testing.T) {
	f := newFixture(t)
	const stored = `{ "html": "<b>Tom & Jerry</b>",  "n": [1, 2] }`
	if st, _, body := f.do("PUT", "/default/docs/spaced", "application/json", stored); st/100 != 2 {
		t.Fatalf("put: %d %s", st, body)
	}
	if st, _, body := f.do("PUT", "/default/docs/bin", "application/octet-stream", "\x00\xffraw"); st/100 != 2 {
		t.Fatalf("put: %d %s", st, body)
	}
	st, _, body := f.do("GET", "/pools/default/buckets/default/scopes/_default/collections/_default/docs?include_docs=true", "", "")
	if st != 200 {
		t.Fatalf("listing: %d %s", st, body)
	}
	var p struct {
		Rows []struct {
			ID  string `json:"id"`
			Doc struct {
				JSON   json.RawMessage `json:"json"`
				Base64 []byte          `json:"base64"`
				Meta   struct {
					ID   string `json:"id"`
					Type string `json:"type"`
				} `json:"meta"`
			} `json:"doc"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if len(p.Rows) != 2 || p.Rows[0].ID != "bin" || p.Rows[1].ID != "spaced" {
		t.Fatalf("rows: %s", body)
	}
	if got := p.Rows[0].Doc; string(got.Base64) != "\x00\xffraw" || got.JSON != nil || got.Meta.Type != "base64" || got.Meta.ID != "bin" {
		t.Errorf("binary row: %s", body)
	}
	if got := p.Rows[1].Doc; string(got.JSON) != stored || got.Meta.Type != "json" {
		t.Errorf("the listing's value is %s, stored %s", got.JSON, stored)
	}
}
