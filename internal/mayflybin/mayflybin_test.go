package mayflybin_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/internal/mayflybin"
)

// Build makes a mayfly binary that runs: its version command answers.
func TestBuildRuns(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not installed")
	}
	bin, err := mayflybin.Build()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "mayfly") {
		t.Fatalf("mayfly version: %v %s", err, out)
	}
}

// A second build of an unchanged source keeps the binary the first made:
// the same file, not one linked again and renamed into place (go build
// touches its modification time all the same).
func TestBuildKeepsAnUpToDateBinary(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not installed")
	}
	first, err := mayflybin.Build()
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	second, err := mayflybin.Build()
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(second)
	if err != nil {
		t.Fatal(err)
	}
	if second != first || !os.SameFile(before, after) {
		t.Fatalf("second build: %s, first %s: not the same file", second, first)
	}
}
