package memcache

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// goPrefix matches a Go package prefix at the start of an error reply's
// text or of any part of a chain of wrapped errors.
var goPrefix = regexp.MustCompile(`^(SERVER_ERROR|CLIENT_ERROR) (.*: )?(engine|jsruntime|views|index|search|pager|auth|httpapi|memcache|audit|json): `)

// checkReply fails the test unless reply is an error reply free of Go
// package prefixes.
func checkReply(t *testing.T, what, reply string) {
	t.Helper()
	if !strings.HasPrefix(reply, "SERVER_ERROR ") && !strings.HasPrefix(reply, "CLIENT_ERROR ") {
		t.Errorf("%s: %q, want an error reply", what, reply)
		return
	}
	if goPrefix.MatchString(reply) {
		t.Errorf("%s: %q has a Go package prefix", what, reply)
		return
	}
	t.Logf("%s: %q", what, reply)
}

// Error replies do not leak Go package prefixes: bad command lines, bad
// values, an engine that is closed, a full disk.
func TestErrorRepliesHaveNoPackagePrefix(t *testing.T) {
	f := newFixture(t, nil)
	for _, c := range []struct{ what, req string }{
		{"bad flags", "set k abc 0 1\r\nx\r\n"},
		{"bad exptime", "touch k abc\r\n"},
		{"bad data chunk", "set k 0 0 1\r\nxyz\r\n"},
		{"oversize value", fmt.Sprintf("set k 0 0 %d\r\n%s\r\n", 2<<20, strings.Repeat("v", 2<<20))},
		{"key too long", "set " + strings.Repeat("k", 300) + " 0 0 1\r\nx\r\n"},
		{"bad delta", "incr k abc\r\n"},
		{"non-numeric value", "set n 0 0 1\r\nx\r\nincr n 1\r\n"},
	} {
		cl := f.dial(t)
		cl.send(c.req)
		reply := cl.line()
		if reply == "STORED\r\n" { // the set before the command under test
			reply = cl.line()
		}
		checkReply(t, c.what, strings.TrimSuffix(reply, "\r\n"))
		cl.nc.Close()
	}
}

// An engine that is closed, and a full disk, answer SERVER_ERROR with the
// cause in plain words.
func TestEngineErrorRepliesHaveNoPackagePrefix(t *testing.T) {
	d := fillDisk(t)
	if !strings.Contains(d.reply, "no space left on device") {
		t.Fatalf("reply to a write on a full disk: %q", d.reply)
	}
	checkReply(t, "full disk", strings.TrimSuffix(d.reply, "\r\n"))
	if err := d.eng.Close(); err != nil {
		t.Logf("closing a full engine: %v", err)
	}
	for _, req := range []string{"get k1\r\n", "set z 0 0 1\r\nz\r\n", "incr k1 1\r\n"} {
		cl := dialAddr(t, d.addr)
		cl.send(req)
		line := cl.line()
		cl.nc.Close()
		checkReply(t, "closed engine: "+strings.TrimSpace(req), strings.TrimSuffix(line, "\r\n"))
	}
}
