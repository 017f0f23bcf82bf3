package memcache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// forwardPair is a follower server whose Route sends keys starting with
// "far" to a leader server (over another bucket), and carries the others
// out itself; a key "electing" has no leader. Both close, and no goroutine
// is left, at the test's end.
func forwardPair(t *testing.T, io IOModel) (follower, leader *fixture) {
	t.Helper()
	t.Cleanup(func() { checkNoLeaks(t) }) // runs last: after both closed
	leader = bareFixture(t, &Options{IO: io})
	route := func(_ context.Context, key string) (Route, error) {
		switch {
		case key == "electing":
			return Route{}, fmt.Errorf("%w: partition 7 has no leader at the moment; retry shortly", engine.ErrNotMyVBucket)
		case strings.HasPrefix(key, "far"):
			return Route{Node: "lead", Addr: leader.addr}, nil
		}
		return Route{}, nil
	}
	follower = bareFixture(t, &Options{IO: io, Route: route})
	return follower, leader
}

// bareFixture is newFixture without its checks of the engine and of
// goroutines left (a test of several servers checks once all are closed).
func bareFixture(t testing.TB, opts *Options) *fixture {
	t.Helper()
	clock := engine.NewFakeClock(t0)
	return startFixture(t, opts, clock, clock, false)
}

func forEachIO(t *testing.T, fn func(t *testing.T, io IOModel)) {
	for _, io := range []IOModel{IOGoroutines, IOEventLoop} {
		t.Run(string(io), func(t *testing.T) { fn(t, io) })
	}
}

// TestForwardedCommands: every keyed command for a key another node leads
// is carried out there and answered as that node answered; a multi-get
// takes each key from its own node, in the keys' order; the follower's
// bucket is never written.
func TestForwardedCommands(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		f, l := forwardPair(t, io)
		c := f.dial(t)
		ctx := context.Background()

		c.do("set far1 5 0 2\r\nv1\r\n", "STORED\r\n")
		d, err := l.bucket.DefaultCollection().Get(ctx, "far1")
		if err != nil || string(d.Value) != "v1" || d.Flags != 5 {
			t.Fatalf("the leader holds %+v, %v", d, err)
		}
		if _, err := f.bucket.DefaultCollection().Get(ctx, "far1"); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("the follower wrote far1 itself: %v", err)
		}
		c.do("add far1 0 0 1\r\nx\r\n", "NOT_STORED\r\n")
		c.do("set near 0 0 4\r\nnear\r\n", "STORED\r\n")
		if _, err := l.bucket.DefaultCollection().Get(ctx, "near"); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("a key the follower leads was forwarded: %v", err)
		}

		// gets through the follower shows the leader's CAS; a multi-get
		// mixes the two nodes' keys in the order asked.
		cas := d.CAS
		c.do("gets far1\r\n", fmt.Sprintf("VALUE far1 5 2 %d\r\nv1\r\nEND\r\n", cas))
		c.do("get near missing far1 far2\r\n", "VALUE near 0 4\r\nnear\r\nVALUE far1 5 2\r\nv1\r\nEND\r\n")
		c.do(fmt.Sprintf("cas far1 0 0 2 %d\r\nv2\r\n", cas+1), "EXISTS\r\n")
		c.do(fmt.Sprintf("cas far1 6 0 2 %d\r\nv2\r\n", cas), "STORED\r\n")
		c.do("append far1 0 0 1\r\n!\r\n", "STORED\r\n")
		c.do("get far1\r\n", "VALUE far1 6 3\r\nv2!\r\nEND\r\n")
		c.do("set farn 0 0 1\r\n9\r\n", "STORED\r\n")
		c.do("incr farn 5\r\n", "14\r\n")
		c.do("decr farn 20\r\n", "0\r\n")
		c.do("touch far1 100\r\n", "TOUCHED\r\n")
		if d, _ := l.bucket.DefaultCollection().Get(ctx, "far1"); d == nil || d.Expiration != t0+100 {
			t.Fatalf("the leader's far1 after a touch through the follower: %+v", d)
		}
		d, _ = l.bucket.DefaultCollection().Get(ctx, "far1")
		c.send("gat 200 far1\r\n")
		if got := c.read(len("VALUE far1 6 3\r\nv2!\r\nEND\r\n")); got != "VALUE far1 6 3\r\nv2!\r\nEND\r\n" {
			t.Fatalf("gat: %q", got)
		}
		if d2, _ := l.bucket.DefaultCollection().Get(ctx, "far1"); d2 == nil || d2.Expiration != t0+200 || d2.CAS == d.CAS {
			t.Fatalf("the leader's far1 after a gat through the follower: %+v", d2)
		}
		c.do("delete far1\r\n", "DELETED\r\n")
		c.do("delete far1\r\n", "NOT_FOUND\r\n")
		c.do("get far1\r\n", "END\r\n")

		// Pipelined noreply writes keep their order.
		c.do("set farp 0 0 1 noreply\r\na\r\nappend farp 0 0 1 noreply\r\nb\r\nappend farp 0 0 1 noreply\r\nc\r\nget farp\r\n", "VALUE farp 0 3\r\nabc\r\nEND\r\n")

		if n := f.bucket.Stats().CurrItems; n != 1 {
			t.Fatalf("the follower holds %d items, want 1 (near)", n)
		}

		// A partition without a leader: the write is refused, saying so.
		c.send("set electing 0 0 1\r\nx\r\n")
		if got := c.line(); !strings.HasPrefix(got, "SERVER_ERROR not my vbucket") || !strings.Contains(got, "no leader") {
			t.Fatalf("a write to a partition without a leader: %q", got)
		}
	})
}

// TestForwardedConnectionIsNotForwardedAgain: a connection that says
// mayfly_forwarded (another node's) has its commands carried out here
// when this node leads their keys, never forwarded again: one for a key
// another node leads is refused naming it, before this node's copy is
// looked at (an append is not answered NOT_STORED from it), and nothing
// is written anywhere; a leader that cannot be reached answers a
// SERVER_ERROR and nothing is written.
func TestForwardedConnectionIsNotForwardedAgain(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		f, l := forwardPair(t, io)
		c := f.dial(t)
		c.do("mayfly_forwarded\r\n", "OK\r\n")
		c.do("set near9 0 0 1\r\nx\r\n", "STORED\r\n")
		if _, err := f.bucket.DefaultCollection().Get(context.Background(), "near9"); err != nil {
			t.Fatalf("a forwarded connection's set of a key this node leads was not carried out here: %v", err)
		}
		for _, cmd := range []string{"set far9 0 0 1\r\nx\r\n", "append far9 0 0 1\r\nx\r\n", "incr far9 1\r\n", "delete far9\r\n"} {
			c.send(cmd)
			if got := c.line(); !strings.HasPrefix(got, "SERVER_ERROR not my vbucket") || !strings.Contains(got, "led by node lead") {
				t.Fatalf("%q on a forwarded connection, for a key another node leads: %q", cmd, got)
			}
		}
		for _, o := range []*fixture{f, l} {
			if _, err := o.bucket.DefaultCollection().Get(context.Background(), "far9"); !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("a forwarded connection's set was carried out or forwarded again: %v", err)
			}
		}

		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gone := ln.Addr().String()
		ln.Close()
		g := bareFixture(t, &Options{IO: io, Route: func(context.Context, string) (Route, error) { return Route{Node: "dead", Addr: gone}, nil }})
		gc := g.dial(t)
		gc.send("set k 0 0 1\r\nx\r\n")
		// Nothing was sent: the reply says the set was not applied, so a
		// client may send it again.
		if got := gc.line(); !strings.HasPrefix(got, "SERVER_ERROR temporary failure") || !strings.Contains(got, "node dead") ||
			!strings.HasSuffix(got, "(nothing was applied)\r\n") {
			t.Fatalf("an unreachable leader: %q", got)
		}
		if n := g.bucket.Stats().CurrItems; n != 0 {
			t.Fatalf("%d items written on the node that could not forward", n)
		}
	})
}

// TestForwardRerouted: a command whose route's target cannot be reached
// goes where the route's Reroute says instead, once; a target that
// refuses a forwarded command naming the leader (a voter that follows:
// its route names the leader) has the
// command sent to that leader, once; writes are carried out by the leader
// alone, reads answered from it, a multi-get in the keys' order; two
// nodes naming each other make no loop.
func TestForwardRerouted(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		t.Cleanup(func() { checkNoLeaks(t) })
		l := bareFixture(t, &Options{IO: io})
		v := bareFixture(t, &Options{IO: io, Route: func(context.Context, string) (Route, error) {
			return Route{Node: "lead", Addr: l.addr}, nil
		}})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gone := ln.Addr().String()
		ln.Close()

		var mu sync.Mutex
		var asked []string
		reroutes := func() []string {
			mu.Lock()
			defer mu.Unlock()
			out := asked
			asked = nil
			return out
		}
		byName := map[string]string{"lead": l.addr, "voter": v.addr}
		var routeTo func(node, addr string, loop bool) Route
		routeTo = func(node, addr string, loop bool) Route {
			return Route{Node: node, Addr: addr, Reroute: func(_ context.Context, leader string) (Route, bool) {
				mu.Lock()
				asked = append(asked, node+">"+leader)
				mu.Unlock()
				switch {
				case loop:
					return routeTo("voter", v.addr, true), true // names lead, sends to the voter again
				case leader == "":
					return routeTo("voter", v.addr, false), true
				}
				a, ok := byName[leader]
				return routeTo(leader, a, false), ok
			}}
		}
		f := bareFixture(t, &Options{IO: io, Route: func(_ context.Context, key string) (Route, error) {
			switch {
			case strings.HasPrefix(key, "dead"):
				return routeTo("dead", gone, false), nil
			case strings.HasPrefix(key, "loop"):
				return routeTo("voter", v.addr, true), nil
			case strings.HasPrefix(key, "far"):
				return routeTo("voter", v.addr, false), nil
			}
			return Route{}, nil
		}})
		c := f.dial(t)
		ctx := context.Background()
		for _, key := range []string{"far1", "dead1"} {
			c.do("set "+key+" 3 0 2\r\nv1\r\n", "STORED\r\n")
			want := []string{"voter>lead"}
			if key == "dead1" {
				want = []string{"dead>", "voter>lead"}
			}
			if got := reroutes(); !slices.Equal(got, want) {
				t.Fatalf("set %s: Reroute asked %v; want %v", key, got, want)
			}
			if d, err := l.bucket.DefaultCollection().Get(ctx, key); err != nil || string(d.Value) != "v1" {
				t.Fatalf("the leader holds %s as %+v, %v", key, d, err)
			}
			for _, o := range []*fixture{f, v} {
				if _, err := o.bucket.DefaultCollection().Get(ctx, key); !errors.Is(err, engine.ErrNotFound) {
					t.Fatalf("%s on a node that does not lead it: %v", key, err)
				}
			}
			c.do("append "+key+" 0 0 1\r\nx\r\n", "STORED\r\n")
			reroutes()
		}
		c.send("get far1 near dead1\r\n")
		for _, want := range []string{"VALUE far1 3 3\r\n", "v1x\r\n", "VALUE dead1 3 3\r\n", "v1x\r\n", "END\r\n"} {
			if got := c.line(); got != want {
				t.Fatalf("multi-get through rerouted routes: %q, want %q", got, want)
			}
		}
		if got := reroutes(); !slices.Equal(got, []string{"voter>lead", "dead>", "voter>lead"}) {
			t.Fatalf("multi-get: Reroute asked %v", got)
		}

		// The voter names lead, the route sends to the voter again: its
		// second refusal is the answer, nothing written.
		c.send("set loop1 0 0 1\r\nx\r\n")
		if got := c.line(); !strings.HasPrefix(got, "SERVER_ERROR not my vbucket") || !strings.Contains(got, "led by node lead") {
			t.Fatalf("set through nodes naming each other: %q", got)
		}
		if got := reroutes(); len(got) != 1 {
			t.Fatalf("Reroute asked %v; want once", got)
		}
		for _, o := range []*fixture{f, v, l} {
			if _, err := o.bucket.DefaultCollection().Get(ctx, "loop1"); !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("loop1 written: %v", err)
			}
		}
	})
}

// TestForwardAbandonedWhenTheNodeGoes: a command forwarded to a node that
// holds it without answering (cut off) is answered SERVER_ERROR as soon as
// the route's Gone closes (the node's lease expired), its outcome
// unknown, rather than when the node answers.
func TestForwardAbandonedWhenTheNodeGoes(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		t.Cleanup(func() { checkNoLeaks(t) }) // runs last: after the server closed
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		entered := make(chan struct{})
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, 4096)
			n, _ := c.Read(buf) // the hello
			if !strings.HasPrefix(string(buf[:n]), forwardHello) {
				return
			}
			c.Write([]byte("OK\r\n"))
			c.Read(buf) // the command, never answered
			close(entered)
			c.Read(buf) // until the forwarding node closes it
		}()
		gone := make(chan struct{})
		f := bareFixture(t, &Options{IO: io, Route: func(context.Context, string) (Route, error) {
			return Route{Node: "cut", Addr: ln.Addr().String(), Gone: gone}, nil
		}})
		c := f.dial(t)
		c.send("set k 0 0 1\r\nx\r\n")
		<-entered
		close(gone)
		// Sent, then abandoned: the set may have been applied.
		if got := c.line(); !strings.HasPrefix(got, "SERVER_ERROR temporary failure") || !strings.Contains(got, "went down") ||
			!strings.Contains(got, "outcome is unknown") {
			t.Fatalf("a command abandoned as its node went down: %q", got)
		}
	})
}
