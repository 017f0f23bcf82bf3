package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// api sends one request as the administrator and returns the status and
// body.
func (f *cliFixture) api(t *testing.T, method, path, ctype, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.SetBasicAuth(adminUser, adminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// bulk posts lines to the default bucket's _bulk and fails on any error
// line.
func (f *cliFixture) bulk(t *testing.T, lines string) {
	t.Helper()
	st, body := f.api(t, "POST", "/default/_bulk", "application/x-ndjson", lines)
	if st != 200 || strings.Contains(body, `"error"`) {
		t.Fatalf("bulk: %d %s", st, body)
	}
}

// listedRow is a row of the collection listing with include_docs, without
// what a server gives each write of its own (cas, rev, the meta).
type listedRow struct {
	ID         string `json:"id"`
	Expiration int64  `json:"expiration"`
	Flags      uint32 `json:"flags"`
	Type       string `json:"type"`
	Doc        struct {
		JSON   json.RawMessage `json:"json"`
		Base64 *string         `json:"base64"`
	} `json:"doc"`
}

// listing is collection coll's listing with its documents, each JSON value
// compacted (so that a value stored over several lines, which an export
// puts on one, compares equal).
func (f *cliFixture) listing(t *testing.T, coll string) (int, []listedRow) {
	t.Helper()
	scope, name, _ := strings.Cut(coll, ".")
	st, body := f.api(t, "GET", "/pools/default/buckets/default/scopes/"+scope+"/collections/"+name+"/docs?include_docs=true&limit=10000", "", "")
	if st != 200 {
		t.Fatalf("listing %s: %d %s", coll, st, body)
	}
	var page struct {
		Total int         `json:"total_rows"`
		Rows  []listedRow `json:"rows"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	for i := range page.Rows {
		if j := page.Rows[i].Doc.JSON; j != nil {
			var buf bytes.Buffer
			if err := json.Compact(&buf, j); err != nil {
				t.Fatal(err)
			}
			page.Rows[i].Doc.JSON = buf.Bytes()
		}
	}
	return page.Total, page.Rows
}

// mayfly export, then mayfly load into a second, empty server, moves the
// bucket: every live document of every collection with its value (JSON as
// it was stored, binary as its bytes), flags and absolute expiration; the
// two listings are the same. A document whose expiration has passed but
// that is not purged yet is not moved. The export reads several pages.
func TestExportThenLoadMovesABucket(t *testing.T) {
	src, dst := cliServer(t), cliServer(t)
	var lines strings.Builder
	for i := range 30 {
		fmt.Fprintf(&lines, `{"op":"upsert","id":"doc%02d","doc":{"i":%d},"flags":%d}`+"\n", i, i, i)
	}
	for i := range 12 {
		fmt.Fprintf(&lines, `{"op":"upsert","id":"p%02d","doc":{"name":"n%d"},"collection":"app.people","expiry":%d}`+"\n", i, i, t0+3600+i)
	}
	lines.WriteString(`{"op":"upsert","id":"soon","doc":{"gone":true},"expiry":` + fmt.Sprint(t0+10) + "}\n")
	lines.WriteString(`{"op":"upsert","id":"edge","doc":1}` + "\n")
	lines.WriteString(`{"op":"upsert","id":"edge\u0001","doc":2}` + "\n") // a key right after "edge"
	lines.WriteString(`{"op":"upsert","id":"text","doc":"a string","expiry":` + fmt.Sprint(t0+7200) + "}\n")
	src.bulk(t, lines.String())
	const spaced = `{ "html": "<b>Tom & Jerry</b>",  "n": [1, 2] }`
	const multiline = "{\n  \"a\": 1,\n  \"b\": \"x\"\n}"
	for key, body := range map[string]string{"spaced": spaced, "multiline": multiline} {
		if st, out := src.api(t, "PUT", "/default/docs/"+key, "application/json", body); st/100 != 2 {
			t.Fatalf("put %s: %d %s", key, st, out)
		}
	}
	if st, out := src.api(t, "PUT", "/default/docs/bin?flags=33554432&expiry="+fmt.Sprint(t0+5000), "application/octet-stream", "\x00\xffraw\n"); st/100 != 2 {
		t.Fatalf("put bin: %d %s", st, out)
	}
	// "soon" expires; nothing purges it, and the count still holds it.
	src.clock.Advance(20)
	if n := src.def.DefaultCollection().Count(); n != 30+7 {
		t.Fatalf("the source counts %d documents", n)
	}

	path := writeFile(t, "default.ndjson", "")
	r := src.mf("", "export", path, "--page", "7")
	if r.code != 0 || r.errOut != "" || !strings.Contains(r.out, "exported 48 documents (1 binary) from default") ||
		!strings.Contains(r.out, "collections: _default._default, app.people") {
		t.Fatalf("export: %v", r)
	}
	r = dst.mf("", "load", path, "--batch", "10")
	if r.code != 0 || !strings.Contains(r.out, "loaded 48 documents into default") {
		t.Fatalf("load: %v", r)
	}

	for _, coll := range []string{"_default._default", "app.people"} {
		srcTotal, srcRows := src.listing(t, coll)
		dstTotal, dstRows := dst.listing(t, coll)
		if srcTotal != dstTotal || !reflect.DeepEqual(srcRows, dstRows) {
			t.Errorf("%s: the target lists %d documents\n%+v\nthe source %d\n%+v", coll, dstTotal, dstRows, srcTotal, srcRows)
		}
	}
	if _, rows := dst.listing(t, "app.people"); len(rows) != 12 || rows[11].ID != "p11" || rows[11].Expiration != t0+3600+11 {
		t.Errorf("app.people on the target: %+v", rows)
	}
	// Values byte for byte, with their flags, expirations and types.
	for key, want := range map[string]string{"spaced": spaced, "bin": "\x00\xffraw\n", "text": `"a string"`, "doc07": `{"i":7}`, "edge\x01": "2"} {
		s, d := src.doc(t, "", key), dst.doc(t, "", key)
		if string(d.Value) != want || string(s.Value) != want || d.Flags != s.Flags || d.Expiration != s.Expiration || d.Type != s.Type {
			t.Errorf("%q: source %q %s flags %d exp %d, target %q %s flags %d exp %d", key, s.Value, s.Type, s.Flags, s.Expiration, d.Value, d.Type, d.Flags, d.Expiration)
		}
	}
	if d := dst.doc(t, "", "bin"); d.Type != engine.TypeBinary || d.Flags != 33554432 || d.Expiration != t0+5000 {
		t.Errorf("bin on the target: %s flags %d expiration %d", d.Type, d.Flags, d.Expiration)
	}
	if d := dst.doc(t, "", "multiline"); string(d.Value) != `{"a":1,"b":"x"}` {
		t.Errorf("multiline on the target: %q", d.Value)
	}
	if _, err := dst.def.DefaultCollection().Get(context.Background(), "soon"); err == nil {
		t.Error("a document expired on the source was moved")
	}
}

// Exported to standard output and loaded from standard input, as a pipe
// between two servers would: the lines go to stdout, the summary to
// stderr (to stdout when the lines go to a file). --collection exports one collection.
func TestExportToStdoutOneCollection(t *testing.T) {
	src, dst := cliServer(t), cliServer(t)
	src.bulk(t, `{"op":"upsert","id":"a","doc":{"v":1},"flags":5}
{"op":"upsert","id":"p1","doc":{"name":"Ada"},"collection":"app.people","expiry":1800000000}
`)
	r := src.mf("", "export", "-", "--collection", "app.people")
	want := `{"op":"upsert","id":"p1","doc":{"name":"Ada"},"collection":"app.people","flags":0,"expiry":1800000000}` + "\n"
	if r.code != 0 || r.out != want || !strings.Contains(r.errOut, "exported 1 documents (0 binary)") {
		t.Fatalf("export of app.people: %v", r)
	}
	if r := dst.mf(r.out, "load", "-"); r.code != 0 || !strings.Contains(r.out, "loaded 1 documents") {
		t.Fatalf("load from stdin: %v", r)
	}
	if d := dst.doc(t, "app.people", "p1"); string(d.Value) != `{"name":"Ada"}` || d.Expiration != 1800000000 {
		t.Errorf("p1 on the target: %s expires %d", d.Value, d.Expiration)
	}
	if _, err := dst.def.DefaultCollection().Get(context.Background(), "a"); err == nil {
		t.Error("a document of another collection was moved")
	}

	for _, args := range [][]string{{"export"}, {"export", "-", "--collection", "people"}, {"export", "-", "--page", "0"}} {
		if r := src.mf("", args...); r.code != 2 {
			t.Errorf("%v: %v", args, r)
		}
	}
	if r := src.mf("", "export", "-", "-b", "nope"); r.code != 1 || !strings.Contains(r.errOut, "nope") {
		t.Errorf("export of a missing bucket: %v", r)
	}
}

// mayfly load reads a file of _bulk lines (its first line starts with
// "op") as such: each line's collection, flags and absolute expiry are
// kept, unless --collection or --expiry replace them; --format ndjson
// reads the same lines as documents.
func TestLoadBulkLines(t *testing.T) {
	f := cliServer(t)
	in := `{"op":"upsert","id":"b1","doc":{"html":"<i>"},"collection":"app.people","flags":9,"expiry":1800000000}
{"op":"upsert","id":"b2","base64":"AAE=","flags":2}

{"op":"upsert","doc":{}}
not json
{"op":"insert","id":"b1","doc":{},"collection":"app.people"}
`
	path := writeFile(t, "dump.ndjson", in)
	r := f.mf("", "load", path)
	if r.code != 1 || !strings.Contains(r.out, "loaded 2 documents") || !strings.Contains(r.out, "3 failed") {
		t.Fatalf("load of _bulk lines: %v", r)
	}
	for _, want := range []string{"no_id: 1", "line 4", "invalid_json: 1", "line 5", "key_exists: 1", "b1"} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("failure summary lacks %q: %q", want, r.errOut)
		}
	}
	if d := f.doc(t, "app.people", "b1"); string(d.Value) != `{"html":"<i>"}` || d.Flags != 9 || d.Expiration != 1800000000 {
		t.Errorf("b1: %s flags %d expires %d", d.Value, d.Flags, d.Expiration)
	}
	if d := f.doc(t, "", "b2"); string(d.Value) != "\x00\x01" || d.Type != engine.TypeBinary || d.Flags != 2 {
		t.Errorf("b2: %q %s flags %d", d.Value, d.Type, d.Flags)
	}
	// --collection and --expiry replace the lines' own.
	path = writeFile(t, "one.ndjson", `{"op":"upsert","id":"c1","doc":{"html":"<i>"},"collection":"app.people","flags":3,"expiry":1800000000}`+"\n")
	if r := f.mf("", "load", path, "--collection", "_default._default", "--expiry", "60"); r.code != 0 {
		t.Fatalf("load with --collection and --expiry: %v", r)
	}
	if d := f.doc(t, "", "c1"); string(d.Value) != `{"html":"<i>"}` || d.Flags != 3 || d.Expiration != t0+60 {
		t.Errorf("c1: %s flags %d expires %d", d.Value, d.Flags, d.Expiration)
	}
	// --format ndjson: the lines are documents, whose id is their "id".
	if r := f.mf("", "load", path, "--format", "ndjson"); r.code != 0 {
		t.Fatalf("load --format ndjson: %v", r)
	}
	if d := f.doc(t, "", "c1"); !strings.HasPrefix(string(d.Value), `{"op":"upsert"`) {
		t.Errorf("c1 loaded as a document: %s", d.Value)
	}
}

// Only a first line whose first field is "op", naming a _bulk operation,
// makes the input _bulk lines; a document with an "op" field elsewhere
// stays a document. The look ahead stops at the first line's end.
func TestLooksBulk(t *testing.T) {
	for in, want := range map[string]bool{
		`{"op":"upsert","id":"a","doc":{}}`:             true,
		"\n\n" + `{ "op" : "delete" , "id":"a"}` + "\n": true,
		`{"op":"touch"}`:            true,
		`{"_id":"a","op":"upsert"}`: false,
		`{"op":"add","id":"a"}`:     false,
		`{"op":1}`:                  false,
		`{"op":"upsert"`:            false,
		`[{"op":"upsert"}]`:         false,
		"":                          false,
	} {
		if got := looksBulk(bufio.NewReader(strings.NewReader(in))); got != want {
			t.Errorf("looksBulk(%q) = %v", in, got)
		}
	}
	// A first line that arrives while the rest has not: no wait for more.
	pr, pw := io.Pipe()
	defer pw.Close()
	go io.WriteString(pw, `{"op":"upsert","id":"a","doc":{}}`+"\n")
	if !looksBulk(bufio.NewReaderSize(pr, 256<<10)) {
		t.Error("a first line alone is not taken for _bulk")
	}
}

// The export asks for the page after the last key it got, not for a skip
// past it: a document deleted between two pages (here the last of the
// first page, just after the page was read) does not make it miss the
// next one.
func TestExportPagesByKey(t *testing.T) {
	f := cliServer(t)
	var lines strings.Builder
	for i := range 5 {
		fmt.Fprintf(&lines, `{"op":"upsert","id":"k%d","doc":{"i":%d}}`+"\n", i, i)
	}
	f.bulk(t, lines.String())
	target, err := url.Parse(f.url)
	if err != nil {
		t.Fatal(err)
	}
	pages := 0
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }}
	proxy.ModifyResponse = func(resp *http.Response) error {
		if strings.HasSuffix(resp.Request.URL.Path, "/docs") {
			if pages++; pages == 1 {
				if _, err := f.def.DefaultCollection().Delete(context.Background(), "k1", nil); err != nil {
					return err
				}
			}
		}
		return nil
	}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	var out, errOut bytes.Buffer
	code := runWith(strings.NewReader(""), []string{"export", "-", "--collection", "_default._default", "--page", "2", "--host", srv.URL, "-u", adminU}, &out, &errOut)
	if code != 0 || pages < 3 {
		t.Fatalf("export: %d %q %q, %d pages", code, out.String(), errOut.String(), pages)
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != 5 {
		t.Fatalf("%d lines: %q", len(got), out.String())
	}
	for i, line := range got {
		if want := fmt.Sprintf(`{"op":"upsert","id":"k%d","doc":{"i":%d},"collection":"_default._default","flags":0}`, i, i); line != want {
			t.Errorf("line %d: %s, want %s", i+1, line, want)
		}
	}
}
