package memcache

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestForwardAfterLeaderClosedIdlePooledConnection: a command forwarded
// over a pooled connection the leader has since closed as idle (its
// --memcached-idle-timeout shorter than the pool's reuse window) is
// answered as the leader answers it, on a fresh connection: the stale one
// carried nothing. A review found the client was answered a SERVER_ERROR
// instead ("a write's outcome is unknown" for a set that was never
// applied, and an error for a plain get).
func TestForwardAfterLeaderClosedIdlePooledConnection(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		t.Cleanup(func() { checkNoLeaks(t) })
		leader := bareFixture(t, &Options{IO: io, IdleTimeout: 300 * time.Millisecond})
		route := func(_ context.Context, key string) (Route, error) {
			if strings.HasPrefix(key, "far") {
				return Route{Node: "lead", Addr: leader.addr}, nil
			}
			return Route{}, nil
		}
		follower := bareFixture(t, &Options{IO: io, Route: route})
		c := follower.dial(t)

		for i := range 3 {
			before := leader.srv.Stats().IdleKicks
			c.do(fmt.Sprintf("set far%d 0 0 1\r\nx\r\n", i), "STORED\r\n")
			// The leader closes the pooled forwarding connection as idle.
			deadline := time.Now().Add(30 * time.Second)
			for leader.srv.Stats().IdleKicks <= before {
				if time.Now().After(deadline) {
					t.Fatalf("the leader never closed the idle forwarding connection")
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // its FIN reaches the follower
			c.send(fmt.Sprintf("set far%d 0 0 1\r\ny\r\n", i))
			if got := c.line(); got != "STORED\r\n" {
				t.Fatalf("a set forwarded after the leader closed the idle pooled connection: %q, want STORED", got)
			}
			if d, err := leader.bucket.DefaultCollection().Get(context.Background(), fmt.Sprintf("far%d", i)); err != nil || string(d.Value) != "y" {
				t.Fatalf("the leader holds %+v, %v", d, err)
			}
			before = leader.srv.Stats().IdleKicks
			for leader.srv.Stats().IdleKicks <= before {
				if time.Now().After(deadline) {
					t.Fatalf("the leader never closed the idle forwarding connection")
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			c.do(fmt.Sprintf("get far%d\r\n", i), fmt.Sprintf("VALUE far%d 0 1\r\ny\r\nEND\r\n", i))
		}
	})
}

// TestForwardAfterLeaderRestarted: a leader's memcached port restarted at
// the same address (a node restarted, its pooled forwarding connections
// from the other nodes now dead) answers the next commands forwarded to
// it as it answers any: the forwarding node dials it again rather than
// answer from a dead pooled connection. A review found the client was
// answered "SERVER_ERROR ... EOF (a write's outcome is unknown)" for a
// set the leader never received.
func TestForwardAfterLeaderRestarted(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		t.Cleanup(func() { checkNoLeaks(t) })
		leader := bareFixture(t, &Options{IO: io})
		route := func(_ context.Context, key string) (Route, error) {
			if strings.HasPrefix(key, "far") {
				return Route{Node: "lead", Addr: leader.addr}, nil
			}
			return Route{}, nil
		}
		follower := bareFixture(t, &Options{IO: io, Route: route})
		c := follower.dial(t)
		c.do("set far1 0 0 1\r\nx\r\n", "STORED\r\n")

		// The leader's port stops and starts again at the same address,
		// serving the same bucket.
		if err := leader.srv.Close(); err != nil {
			t.Fatal(err)
		}
		srv, err := New(leader.bucket, withIO(&Options{IO: io}))
		if err != nil {
			t.Fatal(err)
		}
		var ln net.Listener
		deadline := time.Now().Add(30 * time.Second)
		for ln, err = net.Listen("tcp", leader.addr); err != nil; ln, err = net.Listen("tcp", leader.addr) {
			if time.Now().After(deadline) {
				t.Fatalf("listening again at %s: %v", leader.addr, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(context.Background(), ln) }()
		t.Cleanup(func() {
			srv.Close()
			<-done
		})
		time.Sleep(50 * time.Millisecond) // the old connections' FINs reach the follower

		c.send("set far2 0 0 1\r\ny\r\n")
		if got := c.line(); got != "STORED\r\n" {
			t.Fatalf("a set forwarded to a restarted leader: %q, want STORED", got)
		}
		c.do("get far1 far2\r\n", "VALUE far1 0 1\r\nx\r\nVALUE far2 0 1\r\ny\r\nEND\r\n")
	})
}

// TestForwardedNoreplySetAfterIdleCloseIsApplied: a noreply set forwarded
// after the leader closed the pooled connection as idle is applied at the
// leader, so a get that follows on the same connection sees it. A review
// found it was silently dropped (the stale connection's EOF, its error
// unsent under noreply), and the get missed.
func TestForwardedNoreplySetAfterIdleCloseIsApplied(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		t.Cleanup(func() { checkNoLeaks(t) })
		leader := bareFixture(t, &Options{IO: io, IdleTimeout: 300 * time.Millisecond})
		route := func(_ context.Context, key string) (Route, error) {
			if strings.HasPrefix(key, "far") {
				return Route{Node: "lead", Addr: leader.addr}, nil
			}
			return Route{}, nil
		}
		follower := bareFixture(t, &Options{IO: io, Route: route})
		c := follower.dial(t)
		c.do("set far1 0 0 1\r\nx\r\n", "STORED\r\n")
		deadline := time.Now().Add(30 * time.Second)
		for leader.srv.Stats().IdleKicks == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the leader never closed the idle forwarding connection")
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // its FIN reaches the follower
		c.do("set far1 0 0 1 noreply\r\ny\r\nget far1\r\n", "VALUE far1 0 1\r\ny\r\nEND\r\n")
	})
}
