//go:build chaos

package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/mayflydb/mayfly/replica"
)

// nodeTags are the build tags of the tests' server processes when they
// are not this test binary (nodeBinary): a chaos build's, so that its
// process tests can cut a node's Raft traffic.
func nodeTags() []string { return []string{"chaos"} }

// The chaos build's --chaos-cut-file: the peers it names are cut, others
// not; a new content is picked up within the polling interval, an empty
// or removed file cuts nobody.
func TestChaosCutFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cut")
	if err := os.WriteFile(path, []byte("n2, n3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var f faultConfig
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse([]string{"--chaos-cut-file", path}); err != nil {
		t.Fatal(err)
	}
	cut := f.cut()
	if cut == nil {
		t.Fatal("no FaultCut with --chaos-cut-file")
	}
	n1, n2, n3 := replica.NodeID("n1"), replica.NodeID("n2"), replica.NodeID("n3")
	if cut(n1) || !cut(n2) || !cut(n3) {
		t.Fatalf("cut n1 %v n2 %v n3 %v; want only n2 and n3", cut(n1), cut(n2), cut(n3))
	}
	// eventually polls cut until it reports want for n2 (a hang guard, not
	// a speed assert).
	eventually := func(want bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); cut(n2) != want; time.Sleep(10 * time.Millisecond) { // wall clock: a hang guard
			if time.Now().After(deadline) { // wall clock: a hang guard
				t.Fatalf("n2 cut %v, want %v", !want, want)
			}
		}
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(false)
	if cut(n3) {
		t.Fatal("n3 still cut after the file was emptied")
	}
	if err := os.WriteFile(path, []byte("n2"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(true)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	eventually(false)
}

// A chaos build's progress read is served beside the API on a cluster
// node only: a single node (no router) and every other path reach the
// API.
func TestChaosProgressReadBesideTheAPI(t *testing.T) {
	var f faultConfig
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for _, c := range []struct {
		rt   *router
		path string
	}{{nil, progressPath + "default"}, {&router{}, "/pools/default"}} {
		rec := httptest.NewRecorder()
		f.handler(api, c.rt).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
		if rec.Code != http.StatusTeapot {
			t.Fatalf("GET %s (router %v): %d, want the API's answer", c.path, c.rt != nil, rec.Code)
		}
	}
}
