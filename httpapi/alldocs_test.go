package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestAllDocs: GET /{bucket}/_all_docs answers CouchDB's shape (total_rows,
// offset, rows of id, key and value.rev) in key order, with startkey,
// endkey, inclusive_end, key, descending, skip, limit and include_docs, and
// leaves expired documents out. offset is given where it costs no count
// (no start key) and left out otherwise; total_rows counts an expired
// document until the pager purges it, as curr_items does.
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
		Total  int  `json:"total_rows"`
		Offset *int `json:"offset"`
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
		offset int // -1: left out
	}{
		{"", "A a b c", 0},
		{`?startkey="a"&endkey="b"`, "a b", -1},
		{`?start_key="a"&end_key="b"&inclusive_end=false`, "a", -1},
		{`?startkey="a0"`, "b c", -1},
		{`?startkey=a0`, "b c", -1}, // a bare key is the key as it is
		{`?endkey="a"`, "A a", 0},
		{`?endkey="a"&inclusive_end=false`, "A", 0},
		{`?key="b"`, "b", -1},
		{`?key="nope"`, "", -1},
		{`?key="a0"`, "", -1},
		{"?skip=1&limit=2", "a b", 1},
		{"?limit=0", "", 0},
		{"?descending=true", "c b a A", 0},
		{`?descending=true&startkey="b"&endkey="a"`, "b a", -1},
		{`?descending=true&startkey="b"&endkey="a"&inclusive_end=false`, "b", -1},
		{`?descending=true&endkey="b"`, "c b", 0},
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
		want := 5 // "gone" counts until purged
		if c.q == "?collection=s.c" {
			want = 1
		}
		offset := -1
		if p.Offset != nil {
			offset = *p.Offset
		}
		if strings.Join(ids, " ") != c.ids || offset != c.offset || p.Total != want {
			t.Errorf("%s: rows %q offset %d total %d, want %q offset %d total %d", c.q, ids, offset, p.Total, c.ids, c.offset, want)
		}
	}
	// A read of "gone" deletes it (lazy expiry), as the pager would.
	if st, _, _ := f.do("GET", "/default/docs/gone", "", ""); st != 404 {
		t.Errorf("GET of an expired document: %d", st)
	}
	if p := get("?limit=1"); p.Total != 4 {
		t.Errorf("total_rows once the expired document is deleted: %d, want 4", p.Total)
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
	for _, bad := range []struct{ q, reason string }{
		{"?limit=-1", `Invalid value for positive integer parameter: "-1"`},
		{"?skip=-1", `Invalid value for positive integer parameter: "-1"`},
		{"?limit=x", `Invalid value for integer parameter: "x"`},
		{`?startkey="a`, `invalid UTF-8 JSON: "\"a"`},
		{"?include_docs=maybe", `Invalid boolean parameter: "maybe"`},
		{"?descending=2", `Invalid boolean parameter: "2"`},
		{"?update_seq=yes", `Invalid boolean parameter: "yes"`},
		{`?startkey="b"&endkey="a"`, "No rows can match your key range, reverse your start_key and end_key or set descending=true"},
		{`?startkey="a"&endkey="b"&descending=true`, "No rows can match your key range, reverse your start_key and end_key or set descending=false"},
		{`?keys=["a"]&startkey="a"`, "Query parameter `start_key` is not compatible with multi-get"},
		{`?keys={"a":1}`, "`keys` parameter is not an array."},
		{"?collection=nope", ""},
	} {
		st, _, body := f.do("GET", "/default/_all_docs"+bad.q, "", "")
		var e struct{ Error, Reason string }
		json.Unmarshal([]byte(body), &e)
		if st != 400 || bad.reason != "" && e.Reason != bad.reason {
			t.Errorf("%s: %d %s, want 400 with reason %q", bad.q, st, body, bad.reason)
		}
	}
	// param is the parameter as the query spelled it.
	for _, bad := range []struct{ q, param string }{
		{`?startkey="b"&endkey="a"`, "startkey"},
		{`?start_key="b"&end_key="a"`, "start_key"},
		{`?keys=["a"]&endkey="a"`, "endkey"},
	} {
		st, _, body := f.do("GET", "/default/_all_docs"+bad.q, "", "")
		var e struct{ Param string }
		json.Unmarshal([]byte(body), &e)
		if st != 400 || e.Param != bad.param {
			t.Errorf("%s: %d %s, want 400 with param %q", bad.q, st, body, bad.param)
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

// TestAllDocsKeys: keys, in the query or a POST body, answers a row for
// each key in the order given — a live document's, a deleted one's
// (value.deleted, doc null) and not_found for a missing or expired one —
// with skip, limit, descending and include_docs applied to those rows;
// update_seq is a since from which _changes sends later writes only; an
// ephemeral bucket lists as a couchbase one does.
func TestAllDocsKeys(t *testing.T) {
	f := newFixture(t)
	f.bulkLines(`{"op":"upsert","id":"a","doc":{"v":"a"}}
{"op":"upsert","id":"b","doc":{"v":"b"}}
{"op":"upsert","id":"del","doc":1}
{"op":"upsert","id":"gone","doc":1,"expiry":5}
`)
	if st, _, body := f.do("DELETE", "/default/docs/del", "", ""); st != 200 {
		t.Fatalf("delete: %d %s", st, body)
	}
	f.clk.Advance(10)
	type answer struct {
		Total     int     `json:"total_rows"`
		Offset    *int    `json:"offset"`
		UpdateSeq *string `json:"update_seq"`
		Rows      []struct {
			ID    string `json:"id"`
			Key   any    `json:"key"`
			Error string `json:"error"`
			Value struct {
				Rev     string `json:"rev"`
				Deleted bool   `json:"deleted"`
			} `json:"value"`
			Doc json.RawMessage `json:"doc"`
		} `json:"rows"`
	}
	query := func(method, q, body string) answer {
		t.Helper()
		st, _, out := f.do(method, "/default/_all_docs"+q, "application/json", body)
		if st != 200 {
			t.Fatalf("%s %s %s: %d %s", method, q, body, st, out)
		}
		var a answer
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatalf("%s: %v\n%s", q, err, out)
		}
		if a.Offset != nil {
			t.Errorf("%s %s: a keys query gave offset %d", q, body, *a.Offset)
		}
		return a
	}
	summary := func(a answer) string {
		var out []string
		for _, r := range a.Rows {
			switch {
			case r.Error != "":
				out = append(out, fmt.Sprintf("%v:%s", r.Key, r.Error))
			case r.Value.Deleted:
				out = append(out, r.ID+":deleted:"+string(r.Doc))
			default:
				out = append(out, r.ID)
			}
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct{ method, q, body, want string }{
		{"GET", `?keys=["b","nope","a","del","gone",1]`, "", "b nope:not_found a del:deleted: gone:not_found 1:not_found"},
		{"POST", "", `{"keys":["b","a"]}`, "b a"},
		{"POST", "?descending=true&skip=1&limit=2", `{"keys":["b","nope","a","del"]}`, "a nope:not_found"},
		{"GET", `?keys=["del"]&include_docs=true`, "", "del:deleted:null"},
	} {
		if got := summary(query(c.method, c.q, c.body)); got != c.want {
			t.Errorf("%s %s %s: %s, want %s", c.method, c.q, c.body, got, c.want)
		}
	}
	a := query("POST", "?include_docs=true&update_seq=true", `{"keys":["a"]}`)
	if len(a.Rows) != 1 || !strings.Contains(string(a.Rows[0].Doc), `"v":"a"`) || a.UpdateSeq == nil {
		t.Fatalf("include_docs and update_seq: %+v", a)
	}
	// update_seq is where the listing started: _changes from it sends what
	// was written after, and nothing before.
	f.bulkLines(`{"op":"upsert","id":"later","doc":1}` + "\n")
	_, _, body := f.do("GET", "/default/_changes?since="+*a.UpdateSeq, "", "")
	if !strings.Contains(body, `"id":"later"`) || strings.Contains(body, `"id":"a"`) {
		t.Errorf("_changes since update_seq: %s", body)
	}

	// An ephemeral bucket: the same answers, from its partitions.
	if st, _, body := f.do("POST", "/pools/default/buckets", formCT, "name=eph&bucketType=ephemeral&ramQuota=100"); st != 202 {
		t.Fatalf("create: %d %s", st, body)
	}
	for _, k := range []string{"z", "m", "a"} {
		if st, _, body := f.do("PUT", "/eph/docs/"+k, "application/json", `{}`); st != 200 && st != 201 {
			t.Fatalf("put: %d %s", st, body)
		}
	}
	st, _, body := f.do("GET", `/eph/_all_docs?descending=true&startkey="y"`, "", "")
	if st != 200 || !strings.Contains(body, `"total_rows":3,"rows":[`) || !strings.Contains(body, `"id":"m"`) || strings.Contains(body, `"id":"z"`) {
		t.Errorf("ephemeral: %d %s", st, body)
	}
}
