package memcache

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/testfs"
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
	dir := testfs.MountSmall(t, 3<<20)
	eng, err := engine.Open(filepath.Join(dir, "data"), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "default", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	defer func() {
		srv.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	value := strings.Repeat("v", 16000)
	reply := ""
	for i := range 1000 {
		fmt.Fprintf(conn, "set k%d 0 0 %d\r\n%s\r\n", i, len(value), value)
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line != "STORED\r\n" {
			reply = line
			break
		}
	}
	if !strings.Contains(reply, "no space left on device") {
		t.Fatalf("reply to a write on a full disk: %q", reply)
	}
	checkReply(t, "full disk", strings.TrimSuffix(reply, "\r\n"))
	if err := eng.Close(); err != nil {
		t.Logf("closing a full engine: %v", err)
	}
	for _, req := range []string{"get k1\r\n", "set z 0 0 1\r\nz\r\n", "incr k1 1\r\n"} {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(conn, req)
		line, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		checkReply(t, "closed engine: "+strings.TrimSpace(req), strings.TrimSuffix(line, "\r\n"))
	}
}
