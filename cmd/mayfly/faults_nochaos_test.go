//go:build !chaos

package main

import (
	"strings"
	"testing"
)

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
