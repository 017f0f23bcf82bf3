// Package mayflybin builds the mayfly command from this module's source, for
// tests that run the server in processes of their own (the crash and chaos
// tests, the README test, cmd/mayfly's cluster tests).
package mayflybin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// keepUnused is how long a build directory no Build has used is kept.
const keepUnused = 5 * 24 * time.Hour

// Build builds ./cmd/mayfly of the module the working directory is in, with
// the build tags given, and returns the binary's path. The build runs
// without the race detector whatever the caller was built with, and without
// cmd/mayfly/default.pgo (-pgo=off): a build with the profile compiles every
// package again for no gain a test could see.
//
// The binary is kept between builds, one per checkout and set of tags, under
// the user's cache directory (os.UserCacheDir, else os.TempDir), in
// mayfly/testbin: go build links it again only when it is out of date with
// the source (go compares the build ID the binary carries with the one the
// source makes), so every build after the first of a make test run (the
// crash test's three tests, the README test, cmd/mayfly's, this package's,
// each test binary a process of its own) costs under a CPU-second instead
// of a link's ~9. Builds of one binary take turns (a lock file, where the
// system has flock), so test binaries started together link it once; go
// build renames the new binary into place, so a server started from the
// path always runs a whole binary. Directories no Build has used for five
// days are removed.
func Build(tags ...string) (string, error) {
	root, err := os.UserCacheDir()
	if err != nil {
		root = os.TempDir()
	}
	return build(filepath.Join(root, "mayfly", "testbin"), tags...)
}

// build is Build with the directory of the build directories given.
func build(root string, tags ...string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module")
	}
	key := sha256.Sum256([]byte(filepath.Dir(gomod) + "\x00" + strings.Join(tags, ",")))
	dir := filepath.Join(root, hex.EncodeToString(key[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lock(filepath.Join(dir, "lock"))
	if err != nil {
		return "", fmt.Errorf("locking %s: %w", dir, err)
	}
	defer unlock()
	now := time.Now() // wall clock: the build directory's last use, for removing unused ones
	_ = os.Chtimes(dir, now, now)
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
	removeUnused(root, dir, now)
	return bin, nil
}

// removeUnused removes the build directories of root other than keep that
// no build has used since keepUnused before now. Errors are ignored: another
// process may be removing them too.
func removeUnused(root, keep string, now time.Time) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if !e.IsDir() || p == keep {
			continue
		}
		if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > keepUnused {
			_ = os.RemoveAll(p)
		}
	}
}
