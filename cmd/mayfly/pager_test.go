package main

import (
	"strings"
	"testing"
)

func TestPagerRun(t *testing.T) {
	f := cliServer(t)
	if r := f.mf(`{"_id":"a"}`+"\n"+`{"_id":"b"}`, "load", "-", "--expiry", "10"); r.code != 0 {
		t.Fatal(r)
	}
	if r := f.mf("", "pager", "run"); r.code != 0 || !strings.HasPrefix(r.out, "purged 0 expired documents from default") {
		t.Fatalf("pager run before expiry: %v", r)
	}
	f.clock.Advance(11)
	if r := f.mf("", "pager", "run"); r.code != 0 || !strings.HasPrefix(r.out, "purged 2 expired documents from default") {
		t.Fatalf("pager run after expiry: %v", r)
	}
	if r := f.mf("", "pager", "run", "-b", "nope"); r.code != 1 || !strings.Contains(r.errOut, "nope") {
		t.Fatalf("pager run on a missing bucket: %v", r)
	}
	if r := f.mf("", "pager"); r.code != 2 {
		t.Fatalf("pager alone: %v", r)
	}
}
