package main

import (
	"encoding/json"
	"strings"
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
