//go:build !chaos

package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// nodeTags are the build tags of the tests' server processes when they
// are not this test binary (nodeBinary): none in a normal build.
func nodeTags() []string { return nil }

// A normal build has no fault injection: serve does not know the chaos
// build's --chaos-cut-file (and never sets replica's FaultCut).
func TestNoFaultInjectionWithoutChaosTag(t *testing.T) {
	code, _, errOut := runCmd("serve", "--chaos-cut-file", t.TempDir()+"/cut")
	if code != 2 || !strings.Contains(errOut, "chaos-cut-file") {
		t.Fatalf("serve --chaos-cut-file in a normal build: exit %d, %q; want a usage error naming the flag", code, errOut)
	}
	var f faultConfig
	if f.cut() != nil {
		t.Fatal("a normal build's FaultCut is not nil")
	}
}

// A normal build serves no chaos read of its groups' progress: the path
// is the API's like any other (which answers it not found).
func TestNoProgressReadWithoutChaosTag(t *testing.T) {
	var f faultConfig
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	rec := httptest.NewRecorder()
	f.handler(api, &router{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/_chaos/progress/default", nil))
	if rec.Code != http.StatusTeapot {
		t.Fatalf("GET /_chaos/progress/default in a normal build: %d, want the API's answer", rec.Code)
	}
}
