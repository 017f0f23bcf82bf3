package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDocumentCommands(t *testing.T) {
	f := cliServer(t)
	r := f.mf("", "put", "user::1", `{"name":"Ada"}`, "--expiry", "100")
	if r.code != 0 || !strings.Contains(r.out, `"id":"user::1"`) {
		t.Fatalf("put: %v", r)
	}
	if d := f.doc(t, "", "user::1"); d.Expiration != t0+100 || string(d.Value) != `{"name":"Ada"}` {
		t.Fatalf("stored %s expiring %d", d.Value, d.Expiration)
	}
	if r := f.mf("", "get", "user::1"); r.code != 0 || r.out != `{"name":"Ada"}`+"\n" {
		t.Fatalf("get: %v", r)
	}
	var env struct {
		Meta struct{ Expiration int64 }
		JSON map[string]string
	}
	r = f.mf("", "get", "--meta", "user::1")
	if err := json.Unmarshal([]byte(r.out), &env); r.code != 0 || err != nil || env.Meta.Expiration != t0+100 || env.JSON["name"] != "Ada" {
		t.Fatalf("get --meta: %v", r)
	}
	if r := f.mf("", "touch", "user::1", "--expiry", "5"); r.code != 0 {
		t.Fatalf("touch: %v", r)
	}
	if d := f.doc(t, "", "user::1"); d.Expiration != t0+5 {
		t.Fatalf("touch left expiration %d", d.Expiration)
	}
	// The value from standard input, into a collection; a key with a slash.
	r = f.mf(`{"name":"Bob"}`, "put", "--collection", "app.people", "p/2", "-")
	if r.code != 0 {
		t.Fatalf("put from stdin: %v", r)
	}
	if d := f.doc(t, "app.people", "p/2"); string(d.Value) != `{"name":"Bob"}` {
		t.Fatalf("stored %s", d.Value)
	}
	if r := f.mf("", "get", "p/2"); r.code != 1 || !strings.Contains(r.errOut, "not found") {
		t.Fatalf("the collection's document in the default collection: %v", r)
	}
	if r := f.mf("", "rm", "p/2", "--collection", "app.people"); r.code != 0 {
		t.Fatalf("rm: %v", r)
	}
	// Errors: the server's reason, no Go package prefix, exit 1.
	r = f.mf("", "get", "p/2", "--collection", "app.people")
	if r.code != 1 || !strings.HasPrefix(r.errOut, "mayfly get: ") || !strings.Contains(r.errOut, "not found") || strings.Contains(r.errOut, "engine:") {
		t.Fatalf("get after rm: %v", r)
	}
	if r := f.mf("", "put", "bad", `{"a":`); r.code != 1 || !strings.Contains(r.errOut, "not valid JSON") {
		t.Fatalf("put of broken JSON: %v", r)
	}
	if r := f.mf("", "put", "k", `{}`, "--op", "replace"); r.code != 1 || !strings.Contains(r.errOut, "not_found") {
		t.Fatalf("replace of a missing document: %v", r)
	}
	// Usage errors exit 2.
	for _, args := range [][]string{{"get"}, {"get", "a", "b"}, {"touch", "a"}, {"put", "a"}, {"rm", "--bogus", "a"}} {
		if r := f.mf("", args...); r.code != 2 || !strings.Contains(r.errOut, "--help") {
			t.Errorf("%v: %v", args, r)
		}
	}
}
