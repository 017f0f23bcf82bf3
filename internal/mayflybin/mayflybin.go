// Package mayflybin builds the mayfly command from this module's source, for
// tests that run the server in processes of their own (the crash and chaos
// tests, the README test, cmd/mayfly's cluster tests).
package mayflybin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build builds ./cmd/mayfly of the module the working directory is in into
// dir/mayfly, with the build tags given, and returns its path. The build
// runs without the race detector whatever the caller was built with, and
// without cmd/mayfly/default.pgo (-pgo=off): a build with the profile
// compiles every package again for no gain a test could see.
func Build(dir string, tags ...string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module")
	}
	bin := filepath.Join(dir, "mayfly")
	args := []string{"build", "-pgo=off", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, "./cmd/mayfly")...)
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s ./cmd/mayfly: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}
