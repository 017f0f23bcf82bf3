package main

import (
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	a, b := runCmdResult("version"), runCmdResult("--version")
	if a.code != 0 || b.code != 0 || a.out != b.out {
		t.Fatalf("version: %v; --version: %v", a, b)
	}
	if !strings.HasPrefix(a.out, "mayfly ") || !strings.Contains(a.out, "\ngo "+strings.TrimPrefix(runtime.Version(), "go")+"\n") {
		t.Fatalf("version prints %q", a.out)
	}
}
