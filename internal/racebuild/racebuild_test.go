package racebuild_test

import (
	"runtime/debug"
	"testing"

	"github.com/mayflydb/mayfly/internal/racebuild"
)

// Enabled agrees with the build settings the toolchain records in the
// binary (-race=true when built with the race detector).
func TestEnabledMatchesTheBuild(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Skip("no build information in this binary")
	}
	race := false
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			race = s.Value == "true"
		}
	}
	if racebuild.Enabled != race {
		t.Fatalf("Enabled is %v, the build's -race setting %v", racebuild.Enabled, race)
	}
}

// Scale is n without the race detector, a quarter under it.
func TestScale(t *testing.T) {
	want := 3000
	if racebuild.Enabled {
		want = 750
	}
	if got := racebuild.Scale(3000); got != want {
		t.Fatalf("Scale(3000) = %d, want %d", got, want)
	}
	if got := racebuild.Scale(1); got != 1 {
		t.Fatalf("Scale(1) = %d, want 1", got)
	}
}
