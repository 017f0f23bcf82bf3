package main

import (
	"errors"
	"strings"
	"testing"
)

// TestServeRefusesPprofBeyondLoopback: Go's profiles have no
// authentication (a heap profile holds whatever the process holds, the
// command line an --admin-password), so --pprof listens on loopback only,
// as its help says, password or not.
func TestServeRefusesPprofBeyondLoopback(t *testing.T) {
	t.Setenv("MAYFLY_ADMIN_PASSWORD", "s3cret")
	for _, c := range []struct {
		addr    string
		refused bool
	}{
		{"0.0.0.0:6060", true},
		{":6060", true},
		{"db.example:6060", true},
		{"127.0.0.1:6060", false},
		{"[::1]:6060", false},
		{"localhost:6060", false},
	} {
		var stderr strings.Builder
		_, err := parseServeFlags([]string{"--pprof", c.addr}, &stderr)
		if got := errors.Is(err, errUsage) && strings.Contains(stderr.String(), "--pprof"); got != c.refused {
			t.Errorf("--pprof %s: refused %v, want %v (%v %q)", c.addr, got, c.refused, err, stderr.String())
		}
	}
}
