package memcache

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
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

// TestForwardedWriteCutOffAfterSendingIsNotSentAgain: a forwarded write
// whose request reached the leader over a pooled connection that then
// closed without a reply is answered "SERVER_ERROR ... (a write's outcome
// is unknown)" and never sent again (the leader may have applied it),
// while a get cut off the same way, nothing of its reply come, is asked
// again on a fresh connection and answered.
func TestForwardedWriteCutOffAfterSendingIsNotSentAgain(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		t.Cleanup(func() { checkNoLeaks(t) })
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		var sets, gets atomic.Int64
		// A leader that takes every command and, for the second set and
		// the first get it is sent, closes the connection instead of
		// answering.
		serve := func(nc net.Conn) {
			defer nc.Close()
			r := bufio.NewReader(nc)
			if l, err := r.ReadString('\n'); err != nil || l != forwardHello+"\r\n" {
				return
			}
			nc.Write([]byte("OK\r\n"))
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				switch {
				case strings.HasPrefix(l, "set "):
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					if sets.Add(1) == 2 {
						return
					}
					nc.Write([]byte("STORED\r\n"))
				case strings.HasPrefix(l, "get ") || strings.HasPrefix(l, "gets "):
					if gets.Add(1) == 1 {
						return
					}
					nc.Write([]byte("VALUE far 0 1 7\r\nv\r\nEND\r\n"))
				default:
					nc.Write([]byte("ERROR\r\n"))
				}
			}
		}
		go func() {
			for {
				nc, err := ln.Accept()
				if err != nil {
					return
				}
				go serve(nc)
			}
		}()
		f := bareFixture(t, &Options{IO: io, Route: func(context.Context, string) (Route, error) {
			return Route{Node: "lead", Addr: ln.Addr().String()}, nil
		}})
		c := f.dial(t)
		c.do("set far 0 0 1\r\nv\r\n", "STORED\r\n")
		c.send("set far 0 0 1\r\nw\r\n")
		if got := c.line(); !strings.HasPrefix(got, "SERVER_ERROR temporary failure") || !strings.Contains(got, "outcome is unknown") {
			t.Fatalf("a forwarded set cut off after it was sent: %q, want its outcome unknown", got)
		}
		c.do("set far 0 0 1\r\nv\r\n", "STORED\r\n")
		if n := sets.Load(); n != 3 {
			t.Fatalf("the leader was sent %d sets for 3 the client sent", n)
		}
		c.do("get far\r\n", "VALUE far 0 1\r\nv\r\nEND\r\n")
		if n := gets.Load(); n != 2 {
			t.Fatalf("the leader was asked %d times for a get cut off once", n)
		}
	})
}
