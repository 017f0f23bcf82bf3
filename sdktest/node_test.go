package sdktest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNodeSDK runs node/smoke.js, the official Couchbase Node.js SDK
// (couchbase on npm, pinned in node/package-lock.json), against a server:
// SCRAM login, an upsert with an expiry read back, a view made through its
// view index manager and queried. `make sdk` installs the package (npm ci)
// first; without node or the package the test skips, saying which.
func TestNodeSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: make sdk installs the Node.js SDK with npm ci when node and npm are")
	}
	dir, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "couchbase", "package.json")); err != nil {
		t.Skip("the couchbase npm package is not installed: run `npm ci` in sdktest/node (make sdk does)")
	}
	s := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // only a hang
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "smoke.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"MAYFLY_CONNSTR=couchbase://"+s.addr,
		"MAYFLY_USER="+adminUser, "MAYFLY_PASSWORD="+adminPassword, "MAYFLY_BUCKET="+bucketName)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Fatalf("node smoke.js: %v\n%s", err, out)
	}
}
