package mayflybin_test

import (
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
	bin, err := mayflybin.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "mayfly") {
		t.Fatalf("mayfly version: %v %s", err, out)
	}
}
