package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A serve flag whose value can never work (a log level slog does not know,
// a memcached item size outside 314 bytes to 20 MiB) is a mistake in the
// command line: exit 2 with the flag named, before the data directory is
// made, as every other serve flag is checked; a review found both exited 1,
// the item size only after the data directory and its default bucket were
// created.
func TestServeFlagValueMistakesExitTwo(t *testing.T) {
	for _, c := range []struct {
		flag, value string
	}{
		{"--log-level", "loud"},
		{"--memcached-item-size-max", "100"},
		{"--memcached-item-size-max", "999999999"},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		var stdout, stderr strings.Builder
		code := run([]string{"serve", "--data", dir, c.flag, c.value, "--http", "127.0.0.1:0",
			"--memcached", "127.0.0.1:0", "--kv", "", "--kv-tls", "", "--views", "", "--search", "",
			"--admin-password", adminPass}, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.flag) {
			t.Errorf("serve %s %s: exit %d, stderr %q; want exit 2 naming %s", c.flag, c.value, code, stderr.String(), c.flag)
		}
	}
}
