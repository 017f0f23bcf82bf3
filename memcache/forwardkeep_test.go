package memcache

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// cutPeer is a node that takes each forwarded command and closes the
// connection without answering it (it broke off once sent). It stops at
// the test's end, once the servers registered after it are closed.
func cutPeer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				if l, _ := r.ReadString('\n'); !strings.HasPrefix(l, forwardHello) {
					return
				}
				c.Write([]byte("OK\r\n"))
				r.ReadString('\n') // the command, never answered
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// unreachablePeers is a follower whose Route sends the keys starting
// with "far" to a live leader, those starting with "dead" to a port no
// one listens on, those starting with "cut" to a node that breaks off
// once sent (cutPeer), and "electing" nowhere (its partition has no
// leader); it carries the others out itself.
func unreachablePeers(t *testing.T, io IOModel) (f, l *fixture) {
	t.Helper()
	t.Cleanup(func() { checkNoLeaks(t) }) // runs last: after every server closed
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	cut := cutPeer(t)
	l = bareFixture(t, &Options{IO: io})
	f = bareFixture(t, &Options{IO: io, Route: func(_ context.Context, key string) (Route, error) {
		switch {
		case key == "electing":
			return Route{}, fmt.Errorf("%w: partition 7 has no leader at the moment; retry shortly", engine.ErrNotMyVBucket)
		case strings.HasPrefix(key, "far"):
			return Route{Node: "lead", Addr: l.addr}, nil
		case strings.HasPrefix(key, "dead"):
			return Route{Node: "dead", Addr: dead}, nil
		case strings.HasPrefix(key, "cut"):
			return Route{Node: "cut", Addr: cut}, nil
		}
		return Route{}, nil
	}})
	return f, l
}

// TestGetNotForwardedKeepsTheConnection: a get (gets, gat, gats, a
// multi-get) that fails at a key another node leads before any of its
// VALUE blocks was written (no leader known, a leader that cannot be
// reached, one that broke off once sent, a local miss before it) is
// answered SERVER_ERROR on a connection that serves on: the commands the
// client pipelined after it in the same write are answered, in order.
func TestGetNotForwardedKeepsTheConnection(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		f, _ := unreachablePeers(t, io)
		put(t, f, "near", "here", 0)
		c := f.dial(t)
		long := strings.Repeat("k", 251)
		gets := []string{
			"get electing", "get dead1", "get cut1",
			"gets dead1", "gat 100 dead1", "gats 100 cut1", "gat 100 electing",
			"get nomiss dead1 near", "gets nomiss cut1 cut2 near",
			// The keys before a bad one are answered to no one: nothing
			// of the answer was written.
			"get near dead1 " + long,
		}
		for i, get := range gets {
			v := fmt.Sprint(i % 10)
			c.send(get + "\r\nset k2 0 0 1\r\n" + v + "\r\nget k2\r\n")
			if got := c.line(); !strings.HasPrefix(got, "SERVER_ERROR ") {
				t.Fatalf("%q: %q, want a SERVER_ERROR", get, got)
			}
			want := "STORED\r\nVALUE k2 0 1\r\n" + v + "\r\nEND\r\n"
			if got := c.read(len(want)); got != want {
				t.Fatalf("the commands pipelined after %q: %q, want %q", get, got, want)
			}
		}
		c.do("get near\r\n", "VALUE near 0 4\r\nhere\r\nEND\r\n")
	})
}

// TestGetNotForwardedAfterAValueCloses: a multi-get that fails at a key
// another node leads after it wrote a VALUE block (of a key this node
// leads, or one a live leader answered) ends with the SERVER_ERROR and
// the connection closes: neither END nor more VALUE blocks would be true.
func TestGetNotForwardedAfterAValueCloses(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		f, l := unreachablePeers(t, io)
		put(t, f, "near", "here", 0)
		put(t, l, "far1", "there", 0)
		for _, tc := range []struct{ get, values string }{
			{"get near dead1", "VALUE near 0 4\r\nhere\r\n"},
			{"get nomiss near cut1", "VALUE near 0 4\r\nhere\r\n"},
			{"gat 100 far1 electing", "VALUE far1 0 5\r\nthere\r\n"},
			{"gets far1 cut1", "VALUE far1 0 5 "},
		} {
			c := f.dial(t)
			c.send(tc.get + "\r\n")
			if got := c.read(len(tc.values)); got != tc.values {
				t.Fatalf("%q: %q, want %q first", tc.get, got, tc.values)
			}
			if strings.HasPrefix(tc.get, "gets") {
				c.line() // the CAS and the value
				c.line()
			}
			if got := c.line(); !strings.HasPrefix(got, "SERVER_ERROR ") {
				t.Fatalf("%q after its value: %q, want a SERVER_ERROR", tc.get, got)
			}
			c.expectClosed("")
		}
	})
}
