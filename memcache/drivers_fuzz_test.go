package memcache

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// FuzzDrivers sends the same bytes, in one write followed by the client's
// half-close, to a server of each driver (IOEventLoop and IOGoroutines,
// each over its own bucket at the same fake moment) and requires the same
// answer, byte for byte, up to the close: the two share the protocol code
// and differ only in how bytes come and go, so any difference is a driver
// bug. Stats lines, which count the connection's own bytes and the
// process's, are left out of the comparison.
func FuzzDrivers(f *testing.F) {
	if !eventLoopSupported {
		f.Skip("no event loops here")
	}
	for _, s := range []string{
		"set k 0 0 1\r\nv\r\nget k\r\n",
		"set k 0 0 5\r\nhello\r\nappend k 0 0 1\r\n!\r\nprepend k 0 0 1\r\n>\r\ngets k\r\ndelete k\r\nget k\r\n",
		"set n 0 0 2\r\n10\r\nincr n 5\r\ndecr n 100\r\ntouch n 10\r\ngat 0 n\r\n",
		"set q 0 0 1 noreply\r\nA\r\nappend q 0 0 1 noreply\r\nB\r\nget q\r\nquit\r\nget q\r\n",
		"set bad 0 0 1\r\nxyz\r\nadd k 0 0 1\r\nx\r\nadd k 0 0 1\r\ny\r\nreplace nope 0 0 1\r\nz\r\n",
		"cas k 0 0 1 1\r\nc\r\nflush_all\r\nget k\r\nversion\r\nverbosity 1\r\n",
		"set k 0 0 10\r\nshort\r\n", "get " + strings.Repeat("k ", 40) + "\r\n", "bogus\r\n\r\n\n",
		"set big 0 0 2000000\r\n" + strings.Repeat("x", 100) + "\r\nget big\r\n",
		"set k 0 0 1\r\nv\r\nstats\r\nget k\r\n", strings.Repeat("g", 3000) + "\r\nget k\r\n",
		"\x800", // a binary header cut short by the client's close
		// answers (one from a handed-off command) before a line too long
		"set k 0 0 1\r\nv\r\nflush_all\r\nget k\r\nversion " + strings.Repeat("\f", 3000) + "\n",
	} {
		f.Add([]byte(s))
	}
	type side struct {
		addr string
	}
	var sides [2]side
	for i, io := range []IOModel{IOEventLoop, IOGoroutines} {
		clock := engine.NewFakeClock(t0)
		eng, err := engine.Open(f.TempDir(), &engine.Options{Clock: clock, NumPartitions: 16})
		if err != nil {
			f.Fatal(err)
		}
		b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "default", Type: engine.Ephemeral, FlushEnabled: true})
		if err != nil {
			f.Fatal(err)
		}
		srv, addr, done := serve(f, b, &Options{IO: io, MaxItemSize: 1 << 16})
		f.Cleanup(func() {
			srv.Close()
			<-done
			eng.Close()
		})
		sides[i].addr = addr
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var got [2][]byte
		for i := range sides {
			var reset bool
			if got[i], reset = exchange(t, sides[i].addr, in); reset {
				// Closed with input unread: the reset may have cut the
				// answer anywhere on its way, so there is nothing to compare.
				return
			}
		}
		if a, b := dropStats(got[0]), dropStats(got[1]); !bytes.Equal(a, b) {
			t.Fatalf("input %q:\nevent loop: %q\ngoroutines: %q", in, a, b)
		}
	})
}

// exchange sends in on a new connection, half-closes it, and returns
// everything the server answers until it closes, and whether the close was
// a reset.
func exchange(t *testing.T, addr string, in []byte) ([]byte, bool) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := &client{t: t, nc: nc}
	go func() {
		nc.Write(in)
		nc.(*net.TCPConn).CloseWrite()
	}()
	var out []byte
	err = c.withTimeout(func() error { var err error; out, err = io.ReadAll(nc); return err })
	if errors.Is(err, syscall.ECONNRESET) {
		return out, true
	}
	if err != nil {
		t.Fatalf("input %q: read: %v", in, err)
	}
	return out, false
}

// dropStats removes the "STAT ..." lines of an answer.
func dropStats(b []byte) []byte {
	var out []byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		line := b
		if i >= 0 {
			line = b[:i+1]
		}
		b = b[len(line):]
		if !bytes.HasPrefix(line, []byte("STAT ")) {
			out = append(out, line...)
		}
	}
	return out
}
