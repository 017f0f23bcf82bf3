package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const scoresDDoc = `{"views":{
 "by_player":{"map":"function (doc, meta) { if (doc.type === 'score') emit(doc.player, doc.score); }","reduce":"_sum"},
 "by_level":{"map":"function (doc, meta) { if (doc.type === 'score') emit([doc.level, doc.player], doc.score); }","reduce":"_count"}}}`

func TestDesignDocRoundTrip(t *testing.T) {
	f := cliServer(t)
	path := writeFile(t, "scores.json", scoresDDoc)
	if r := f.mf("", "ddoc", "put", "scores", path); r.code != 0 || r.out != "stored _design/scores\n" {
		t.Fatalf("ddoc put: %v", r)
	}
	if r := f.mf(`{"views":{"all":{"map":"function (d, m) { emit(m.id, null); }"}}}`, "ddoc", "put", "dev_all", "-"); r.code != 0 {
		t.Fatalf("ddoc put from stdin: %v", r)
	}
	r := f.mf("", "ddoc", "get", "_design/scores")
	var got, want any
	json.Unmarshal([]byte(scoresDDoc), &want)
	if err := json.Unmarshal([]byte(r.out), &got); r.code != 0 || err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ddoc get: %v", r)
	}
	r = f.mf("", "ddoc", "ls")
	if r.code != 0 || !strings.Contains(r.out, "by_level (reduce _count), by_player (reduce _sum)\n") || !strings.Contains(r.out, "dev_all") {
		t.Fatalf("ddoc ls: %v", r)
	}
	if r := f.mf("", "ddoc", "ls", "--json"); r.code != 0 || !strings.Contains(r.out, `"_design/dev_all"`) {
		t.Fatalf("ddoc ls --json: %v", r)
	}
	if r := f.mf("", "ddoc", "put", "broken", "-"); r.code != 1 || !strings.Contains(r.errOut, "mayfly ddoc put: ") {
		t.Fatalf("ddoc put of nothing: %v", r)
	}
	for _, name := range []string{"scores", "dev_all"} {
		if r := f.mf("", "ddoc", "rm", name); r.code != 0 || r.out != "deleted _design/"+name+"\n" {
			t.Fatalf("ddoc rm %s: %v", name, r)
		}
	}
	if r := f.mf("", "ddoc", "ls"); r.code != 0 || r.out != "no design documents in default\n" {
		t.Fatalf("ddoc ls after rm: %v", r)
	}
	if r := f.mf("", "ddoc", "get", "scores"); r.code != 1 || !strings.Contains(r.errOut, "not_found") {
		t.Fatalf("ddoc get after rm: %v", r)
	}
	for _, args := range [][]string{{"ddoc"}, {"ddoc", "frob"}, {"ddoc", "get"}, {"ddoc", "put", "x"}} {
		if r := f.mf("", args...); r.code != 2 {
			t.Errorf("%v: %v", args, r)
		}
	}
}
