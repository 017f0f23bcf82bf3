package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

const scoresNDJSON = `{"_id":"s1","type":"score","player":"ann","level":1,"score":120}
{"_id":"s2","type":"score","player":"bo","level":1,"score":80}
{"_id":"s3","type":"score","player":"ann","level":2,"score":30}
`

func TestQuery(t *testing.T) {
	f := cliServer(t)
	if r := f.mf(scoresDDoc, "ddoc", "put", "scores", "-"); r.code != 0 {
		t.Fatal(r)
	}
	if r := f.mf(scoresNDJSON, "load", "-"); r.code != 0 {
		t.Fatal(r)
	}
	// The shell completes DDOC/VIEW from the server.
	var comp bytes.Buffer
	if code := run([]string{"__complete", "query", "--host", f.url, "-u", adminU, ""}, &comp, io.Discard); code != 0 ||
		!strings.Contains(comp.String(), "scores/by_player\n") || !strings.Contains(comp.String(), "scores/by_level\n") {
		t.Errorf("completing query's argument: %d %q", code, comp.String())
	}
	// The first query waits for the index (a bar may show, then clears).
	r := f.mf("", "query", "scores/by_player", "--stale=false", "--reduce=false", "--progress", "always")
	want := "KEY    VALUE  ID\n" +
		`"ann"  120    s1` + "\n" +
		`"ann"  30     s3` + "\n" +
		`"bo"   80     s2` + "\n" +
		"3 rows (total_rows 3)\n"
	if r.code != 0 || r.out != want {
		t.Fatalf("query table:\n%s\nwant\n%s\n(%v)", r.out, want, r)
	}
	// Flags before and after the positional argument; a key that is not
	// JSON is taken as a string.
	if r := f.mf("", "query", "--group", "scores/by_player", "--key", "ann"); r.code != 0 || r.out != "KEY    VALUE\n\"ann\"  150\n1 rows\n" {
		t.Errorf("--group --key ann: %v", r)
	}
	if r := f.mf("", "query", "scores/by_level", "--group-level", "1"); r.code != 0 || r.out != "KEY  VALUE\n[1]  2\n[2]  1\n2 rows\n" {
		t.Errorf("--group-level 1: %v", r)
	}
	if r := f.mf("", "query", "scores/by_player", "--keys", `["bo","zed"]`, "--reduce=false"); r.code != 0 || r.out != "KEY   VALUE  ID\n\"bo\"  80     s2\n1 rows (total_rows 3)\n" {
		t.Errorf("--keys: %v", r)
	}
	r = f.mf("", "query", "scores/by_player", "--reduce=false", "--descending", "--limit", "1", "--skip", "1", "--json")
	var ans struct {
		TotalRows int `json:"total_rows"`
		Rows      []struct {
			ID    string `json:"id"`
			Value int    `json:"value"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(r.out), &ans); r.code != 0 || err != nil || len(ans.Rows) != 1 || ans.Rows[0].ID != "s3" || ans.TotalRows != 3 {
		t.Errorf("--json: %v", r)
	}
	// include_docs: a document that has expired but is not purged yet shows
	// as null.
	if r := f.mf("", "touch", "s2", "--expiry", "10"); r.code != 0 {
		t.Fatal(r)
	}
	f.clock.Advance(20)
	r = f.mf("", "query", "scores/by_player", "--reduce=false", "--include-docs", "--startkey", `"bo"`, "--stale=false")
	if r.code != 0 || !strings.Contains(r.out, "DOC") || !strings.Contains(r.out, "s2  null") {
		t.Errorf("--include-docs with an expired document: %v", r)
	}
	// --expired exclude: the expired document's row and its share of the
	// reduce are left out before the pager purges it.
	if r := f.mf("", "query", "scores/by_player", "--group", "--expired", "exclude"); r.code != 0 || r.out != "KEY    VALUE\n\"ann\"  150\n1 rows\n" {
		t.Errorf("--group --expired exclude: %v", r)
	}
	if r := f.mf("", "query", "scores/by_player", "--group", "--expired", "include"); r.code != 0 || !strings.Contains(r.out, "\"bo\"   80") {
		t.Errorf("--group --expired include: %v", r)
	}
	// Errors and usage.
	if r := f.mf("", "query", "scores/nope"); r.code != 1 || !strings.Contains(r.errOut, "nope") {
		t.Errorf("a missing view: %v", r)
	}
	if r := f.mf("", "query", "scores/by_player", "--stale", "sometimes"); r.code != 1 || !strings.Contains(r.errOut, "stale") {
		t.Errorf("a bad stale value: %v", r)
	}
	for _, args := range [][]string{{"query"}, {"query", "scores"}, {"query", "scores/by_player", "--limit", "-1"}, {"query", "scores/by_player", "--keys", "ann"}} {
		if r := f.mf("", args...); r.code != 2 {
			t.Errorf("%v: %v", args, r)
		}
	}
}

// While a --stale=false query waits, a bar shows the build progress _info
// reports, and clears before the rows print. The server here is a stand-in
// whose view answer waits until _info has been asked three times, so the wait is
// certain.
func TestQueryBuildProgress(t *testing.T) {
	var infos atomic.Int32
	polled := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /default/_design/d/_info", func(w http.ResponseWriter, r *http.Request) {
		n := infos.Add(1)
		fmt.Fprintf(w, `{"name":"_design/d","building":true,"docs_indexed":%d,"docs_to_index":%d,"rate":500,"eta_seconds":%d}`, 1000*n, 5000-1000*n, 10-2*n)
		if n == 3 {
			close(polled)
		}
	})
	mux.HandleFunc("GET /default/_design/d/_view/v", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("stale") != "false" {
			t.Errorf("query %s", r.URL.RawQuery)
		}
		select {
		case <-polled:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, `{"total_rows":1,"rows":[{"id":"a","key":"k","value":1}]}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var out, errOut bytes.Buffer
	code := run([]string{"query", "d/v", "--stale=false", "--progress", "always", "--host", srv.URL, "-u", adminU}, &out, &errOut)
	if code != 0 || out.String() != "KEY  VALUE  ID\n\"k\"  1      a\n1 rows (total_rows 1)\n" {
		t.Fatalf("query: %d %q %q", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "indexing d: 500 changes/s") || !strings.Contains(errOut.String(), "(2000/5000)") {
		t.Fatalf("no build progress on stderr: %q", errOut.String())
	}
	// Without --progress always, stderr (no terminal) gets no bar, and
	// _info is not asked (polled is closed: the view answers at once).
	infos.Store(0)
	errOut.Reset()
	if code := run([]string{"query", "d/v", "--stale=false", "--host", srv.URL, "-u", adminU}, io.Discard, &errOut); code != 0 || errOut.Len() != 0 || infos.Load() != 0 {
		t.Fatalf("query with no terminal: %d %q, %d _info calls", code, errOut.String(), infos.Load())
	}
}

// An answer from an index that is still building says so on stderr.
func TestQueryBuildingNote(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /default/_design/d/_view/v", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Mayfly-Index-Building", "true")
		w.Header().Set("X-Mayfly-Index-Pending", "42")
		io.WriteString(w, `{"total_rows":0,"rows":[]}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var out, errOut bytes.Buffer
	if code := run([]string{"query", "d/v", "--stale", "ok", "--host", srv.URL, "-u", adminU}, &out, &errOut); code != 0 || out.String() != "0 rows (total_rows 0)\n" ||
		!strings.Contains(errOut.String(), "still building (42 changes to index)") {
		t.Fatalf("query: %d %q %q", code, out.String(), errOut.String())
	}
}
