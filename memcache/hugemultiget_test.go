package memcache

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// TestHugeMultiGetOfAGoneClientFreesItsLoop checks that a multi-get naming
// a large value a quarter of a million times (a 1 MB line, under
// MaxGetLineLen), whose client hangs up without reading, stops costing the
// server once the client is gone: fresh connections, whichever loop they
// land on, are answered. A review found that each time the connection's
// output bound lets the command go on, its whole line is tokenized again,
// so the command costs the square of its line and keeps its event loop
// (and every connection on it, and Server.Close) busy long after the
// client left.
func TestHugeMultiGetOfAGoneClientFreesItsLoop(t *testing.T) {
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 64})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "default", Type: engine.Ephemeral})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr, done := serve(t, b, nil)
	t.Cleanup(func() {
		if t.Failed() {
			return // the loop may still be busy: Close would wait for it
		}
		srv.Close()
		<-done
		eng.Close()
	})
	c := dialAddr(t, addr)
	c.send("set big 0 0 524288\r\n" + strings.Repeat("v", 512<<10) + "\r\n")
	if l := c.line(); l != "STORED\r\n" {
		t.Fatalf("set: %q", l)
	}
	a, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("get " + strings.Repeat("big ", 250_000) + "\r\n"))
	// Let the server begin answering, then hang up unread.
	time.Sleep(500 * time.Millisecond)
	a.Close()

	// Fresh connections go to the loops in turn: enough to reach each.
	for i := range 8 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(15 * time.Second)) // generous: only a busy loop trips it
		if _, err := nc.Write([]byte("version\r\n")); err != nil {
			t.Fatal(err)
		}
		l, err := bufio.NewReader(nc).ReadString('\n')
		if err != nil || l != "VERSION "+DefaultVersion+"\r\n" {
			t.Fatalf("connection %d after the abandoned multi-get: %q, %v", i, l, err)
		}
	}
}

// TestHugeMultiGetOfAGoneClientLeavesTheWritesAfterIt checks that when the
// client of a multi-get held back by its unsent answer hangs up, the
// server stops the multi-get but still runs the writes that arrived whole
// after it: a noreply set sent behind the get is stored.
func TestHugeMultiGetOfAGoneClientLeavesTheWritesAfterIt(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(t)
	c.send("set big 0 0 524288\r\n" + strings.Repeat("v", 512<<10) + "\r\n")
	if l := c.line(); l != "STORED\r\n" {
		t.Fatalf("set: %q", l)
	}
	a, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("get " + strings.Repeat("big ", 20_000) + "\r\nset after 0 0 1 noreply\r\nx\r\n"))
	time.Sleep(500 * time.Millisecond) // let the server begin answering
	a.Close()

	// Generous: the set runs once the server sees the hang-up.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.send("get after\r\n")
		l := c.line()
		if l == "VALUE after 0 1\r\n" {
			c.line() // x
			if l := c.line(); l != "END\r\n" {
				t.Fatalf("get after: %q", l)
			}
			return
		}
		if l != "END\r\n" {
			t.Fatalf("get after: %q", l)
		}
		if time.Now().After(deadline) {
			t.Fatal("the noreply set sent after the abandoned multi-get was not stored")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
