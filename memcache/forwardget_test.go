package memcache

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// lineProxy is a TCP proxy in front of a server that records the
// retrieval lines (get, gets, gat, gats) it passes on: the commands a
// forwarding node sent.
type lineProxy struct {
	addr string
	ln   net.Listener
	wg   sync.WaitGroup

	mu    sync.Mutex
	lines []string
	conns []net.Conn
}

// newLineProxy starts a proxy to upstream; it closes at the test's end,
// once the servers registered after it are closed.
func newLineProxy(t *testing.T, upstream string) *lineProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lineProxy{addr: ln.Addr().String(), ln: ln}
	p.wg.Add(1)
	go p.accept(upstream)
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *lineProxy) accept(upstream string) {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			io.Copy(c, u)
			c.Close()
		}()
		go func() {
			defer p.wg.Done()
			defer u.Close()
			r := bufio.NewReader(c)
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				for _, pre := range []string{"get ", "gets ", "gat ", "gats "} {
					if strings.HasPrefix(l, pre) {
						p.mu.Lock()
						p.lines = append(p.lines, strings.TrimRight(l, "\r\n"))
						p.mu.Unlock()
					}
				}
				if _, err := io.WriteString(u, l); err != nil {
					return
				}
			}
		}()
	}
}

// take returns the retrieval lines passed on since the last take.
func (p *lineProxy) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.lines
	p.lines = nil
	return out
}

// forwardTrio is a follower that leads the keys starting with "n" and
// routes those starting with "a" and "b" to two leaders, each behind a
// lineProxy; opts, when set, adjusts the follower's options.
func forwardTrio(t *testing.T, io IOModel, opts func(*Options)) (f, a, b *fixture, pa, pb *lineProxy) {
	t.Helper()
	t.Cleanup(func() { checkNoLeaks(t) }) // runs last: after every server closed
	a = bareFixture(t, &Options{IO: io})
	b = bareFixture(t, &Options{IO: io})
	pa, pb = newLineProxy(t, a.addr), newLineProxy(t, b.addr)
	o := &Options{IO: io, Route: func(_ context.Context, key string) (Route, error) {
		switch key[0] {
		case 'a':
			return Route{Node: "a", Addr: pa.addr}, nil
		case 'b':
			return Route{Node: "b", Addr: pb.addr}, nil
		}
		return Route{}, nil
	}}
	if opts != nil {
		opts(o)
	}
	f = bareFixture(t, o)
	return f, a, b, pa, pb
}

// put stores key=value with flags in x's bucket directly.
func put(t testing.TB, x *fixture, key, value string, flags uint32) {
	t.Helper()
	if _, err := x.bucket.DefaultCollection().Upsert(context.Background(), key, []byte(value), &engine.WriteOptions{Flags: flags}); err != nil {
		t.Fatal(err)
	}
}

// readAnswer reads a retrieval's answer up to and including END.
func (c *client) readAnswer() string {
	c.t.Helper()
	var b strings.Builder
	for {
		l := c.line()
		b.WriteString(l)
		switch {
		case l == "END\r\n":
			return b.String()
		case strings.HasPrefix(l, "VALUE "):
			var k string
			var flags, n int
			if _, err := fmt.Sscanf(l, "VALUE %s %d %d", &k, &flags, &n); err != nil {
				c.t.Fatalf("bad VALUE line %q: %v", l, err)
			}
			b.WriteString(c.read(n + 2))
		default:
			c.t.Fatalf("unexpected line %q (so far %q)", l, b.String())
		}
	}
}

// mixedKeys is 60 keys over the three nodes of forwardTrio, interleaved,
// a few of each node's missing (those ending in 7), with values that end
// in a large one here and there (the event loop's answer fills its output
// bound midway, so the multi-get is resumed).
func mixedKeys(t *testing.T, f, a, b *fixture) []string {
	t.Helper()
	var keys []string
	for i := range 20 {
		for _, n := range []struct {
			p string
			x *fixture
		}{{"a", a}, {"n", f}, {"b", b}} {
			k := fmt.Sprintf("%s%02d", n.p, i)
			keys = append(keys, k)
			if i%10 == 7 {
				continue
			}
			v := strings.Repeat(k, 4)
			if i%3 == 0 {
				v = strings.Repeat(k[:1], 200<<10) // 200 KiB
			}
			put(t, n.x, k, v, uint32(i))
		}
	}
	return keys
}

// TestForwardedMultiGetOneRequestANode: a multi-get of 60 keys spread over
// this node and two leaders answers exactly what the keys' single gets
// answer, in the client's order, and each leader is sent one command for
// its keys (before batches: one a key, 20 each).
func TestForwardedMultiGetOneRequestANode(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		f, a, b, pa, pb := forwardTrio(t, io, nil)
		keys := mixedKeys(t, f, a, b)
		c := f.dial(t)
		for _, kind := range []string{"get", "gets"} {
			var want strings.Builder
			for _, k := range keys {
				c.send(kind + " " + k + "\r\n")
				want.WriteString(strings.TrimSuffix(c.readAnswer(), "END\r\n"))
			}
			want.WriteString("END\r\n")
			pa.take()
			pb.take()

			c.send(kind + " " + strings.Join(keys, " ") + "\r\n")
			if got := c.readAnswer(); got != want.String() {
				t.Fatalf("%s of 60 keys over three nodes:\n got %.300q\nwant %.300q", kind, got, want.String())
			}
			for _, n := range []struct {
				p     string
				proxy *lineProxy
			}{{"a", pa}, {"b", pb}} {
				var theirs []string
				for _, k := range keys {
					if strings.HasPrefix(k, n.p) {
						theirs = append(theirs, k)
					}
				}
				got := n.proxy.take()
				if want := kind + " " + strings.Join(theirs, " "); len(got) != 1 || got[0] != want {
					t.Fatalf("%s: node %s was sent %d commands %.200q; want one, %q", kind, n.p, len(got), got, want)
				}
			}
		}
		c.do("version\r\n", "VERSION "+DefaultVersion+"\r\n")
	})
}

// TestForwardedMultiGetRoundsAndEdges: a multi-get of more remote keys
// than a round gathers asks in rounds, each node once a round, answered
// whole and in order; a line with a bad key is answered with the error
// alone (the keys before it asked, as before); a forwarded connection's
// multi-get is never forwarded again.
func TestForwardedMultiGetRoundsAndEdges(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		f, a, b, pa, pb := forwardTrio(t, io, nil)
		var keys []string
		var want strings.Builder
		for i := range 150 {
			for _, n := range []struct {
				p string
				x *fixture
			}{{"a", a}, {"b", b}} {
				k := fmt.Sprintf("%s%03d", n.p, i)
				keys = append(keys, k)
				put(t, n.x, k, "v", 0)
				fmt.Fprintf(&want, "VALUE %s 0 1\r\nv\r\n", k)
			}
		}
		want.WriteString("END\r\n")
		c := f.dial(t)
		c.send("get " + strings.Join(keys, " ") + "\r\n")
		if got := c.readAnswer(); got != want.String() {
			t.Fatalf("a multi-get of 300 remote keys: %.300q", got)
		}
		// Rounds of 128 keys, half each node's: 64, 64, 22 keys a node.
		for _, p := range []*lineProxy{pa, pb} {
			got := p.take()
			var sizes []int
			for _, l := range got {
				sizes = append(sizes, len(strings.Fields(l))-1)
			}
			if fmt.Sprint(sizes) != "[64 64 22]" {
				t.Fatalf("a node was sent commands of %v keys; want [64 64 22]", sizes)
			}
		}

		bad := strings.Repeat("z", 251)
		c.do("get a000 n1 b000 "+bad+" b001\r\n", "CLIENT_ERROR bad command line format\r\n")
		if got := pb.take(); len(got) != 1 || got[0] != "get b000" {
			t.Fatalf("node b was sent %q for a line with a bad key", got)
		}
		pa.take()

		put(t, f, "n1", "here", 0)
		fc := f.dial(t)
		fc.do("mayfly_forwarded\r\n", "OK\r\n")
		fc.send("get n1 a000\r\n")
		if got := fc.line() + fc.line(); got != "VALUE n1 0 4\r\nhere\r\n" {
			t.Fatalf("a forwarded connection's multi-get: %q", got)
		}
		if got := fc.line(); !strings.HasPrefix(got, "SERVER_ERROR not my vbucket") || !strings.Contains(got, "led by node a") {
			t.Fatalf("a forwarded connection's multi-get of a key another node leads: %q", got)
		}
		if got := pa.take(); len(got) != 0 {
			t.Fatalf("a forwarded connection's multi-get was forwarded again: %q", got)
		}
	})
}

// TestForwardedMultiGetRefusedAndUnreachable: a leader that refuses the
// batch (it no longer leads some of its keys, and names the node that
// does) and a leader that cannot be reached, in one round: the multi-get
// is still answered whole, in the client's order, no key answered twice;
// the keys left are batched again together, each where its route's
// Reroute sends it (the refused ones where the refusal names, the
// unreachable node's elsewhere), one command a node.
func TestForwardedMultiGetRefusedAndUnreachable(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		t.Cleanup(func() { checkNoLeaks(t) })
		a := bareFixture(t, &Options{IO: io})
		// b leads the keys starting with "b"; those starting with "x"
		// moved to a, which the follower has not heard of yet.
		b := bareFixture(t, &Options{IO: io, Route: func(_ context.Context, key string) (Route, error) {
			if key[0] == 'x' {
				return Route{Node: "a", Addr: a.addr}, nil
			}
			return Route{}, nil
		}})
		pa, pb := newLineProxy(t, a.addr), newLineProxy(t, b.addr)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := ln.Addr().String()
		ln.Close()
		reroute := func(_ context.Context, leader string) (Route, bool) {
			if leader == "a" || leader == "" {
				return Route{Node: "a", Addr: pa.addr}, true
			}
			return Route{}, false
		}
		f := bareFixture(t, &Options{IO: io, Route: func(_ context.Context, key string) (Route, error) {
			switch key[0] {
			case 'b', 'x':
				return Route{Node: "b", Addr: pb.addr, Reroute: reroute}, nil
			case 'd': // led by a, but routed to a node gone
				return Route{Node: "gone", Addr: dead, Reroute: reroute}, nil
			}
			return Route{}, nil
		}})
		var keys []string
		var want strings.Builder
		for i := range 8 {
			for _, n := range []struct {
				p string
				x *fixture
			}{{"b", b}, {"x", a}, {"n", f}, {"d", a}} {
				k := fmt.Sprintf("%s%d", n.p, i)
				keys = append(keys, k)
				if i == 5 {
					continue // a miss
				}
				put(t, n.x, k, "v-"+k, 3)
				fmt.Fprintf(&want, "VALUE %s 3 %d\r\nv-%s\r\n", k, len(k)+2, k)
			}
		}
		want.WriteString("END\r\n")
		c := f.dial(t)
		for range 2 { // the connection serves on after the fallbacks
			c.send("get " + strings.Join(keys, " ") + "\r\n")
			if got := c.readAnswer(); got != want.String() {
				t.Fatalf("a multi-get through a refusing and an unreachable node:\n got %q\nwant %q", got, want.String())
			}
			// b was sent the batch (refused at x0, after b0), then its
			// keys past b0; a was asked for the x and d keys in one.
			gotB := pb.take()
			if len(gotB) != 2 || !strings.HasPrefix(gotB[0], "get b0 x0 b1 x1") || gotB[1] != "get b1 b2 b3 b4 b5 b6 b7" {
				t.Fatalf("node b was sent %q", gotB)
			}
			if gotA := pa.take(); len(gotA) != 1 || gotA[0] != "get x0 d0 x1 d1 x2 d2 x3 d3 x4 d4 x5 d5 x6 d6 x7 d7" {
				t.Fatalf("node a was sent %q; want one command for the 16 keys it leads", gotA)
			}
		}
	})
}

// TestForwardedMultiGetTouches: gat and gats through the batch move the
// leaders' documents' expiry (seen on their clocks) and answer the values
// (gats: with the CAS the touch gave), one command a leader.
func TestForwardedMultiGetTouches(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		f, a, b, pa, pb := forwardTrio(t, io, nil)
		ctx := context.Background()
		keys := []string{"a1", "n1", "b1", "a2", "b2", "n2"}
		for _, k := range keys {
			x := map[byte]*fixture{'a': a, 'b': b, 'n': f}[k[0]]
			if _, err := x.bucket.DefaultCollection().Upsert(ctx, k, []byte("v"+k), &engine.WriteOptions{Expiry: 100}); err != nil {
				t.Fatal(err)
			}
		}
		c := f.dial(t)
		c.send("gat 1000 " + strings.Join(keys, " ") + "\r\n")
		var want strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&want, "VALUE %s 0 3\r\nv%s\r\n", k, k)
		}
		want.WriteString("END\r\n")
		if got := c.readAnswer(); got != want.String() {
			t.Fatalf("gat: %q, want %q", got, want.String())
		}
		if got := pa.take(); len(got) != 1 || got[0] != "gat 1000 a1 a2" {
			t.Fatalf("node a was sent %q", got)
		}
		if got := pb.take(); len(got) != 1 || got[0] != "gat 1000 b1 b2" {
			t.Fatalf("node b was sent %q", got)
		}
		// Past the old expiry, before the new one: every document is there.
		for _, x := range []*fixture{f, a, b} {
			x.clock.Advance(500)
		}
		for _, x := range []*fixture{f, a, b} {
			for _, k := range keys {
				if k[0] != map[*fixture]byte{f: 'n', a: 'a', b: 'b'}[x] {
					continue
				}
				d, err := x.bucket.DefaultCollection().Get(ctx, k)
				if err != nil || d.Expiration != t0+1000 {
					t.Fatalf("%s after gat 1000 and 500 s: %+v, %v", k, d, err)
				}
			}
		}

		c.send("gats 2000 " + strings.Join(keys, " ") + "\r\n")
		got := c.readAnswer()
		want.Reset()
		for _, k := range keys {
			x := map[byte]*fixture{'a': a, 'b': b, 'n': f}[k[0]]
			d, err := x.bucket.DefaultCollection().Get(ctx, k)
			if err != nil || d.Expiration != t0+500+2000 {
				t.Fatalf("%s after gats 2000: %+v, %v", k, d, err)
			}
			fmt.Fprintf(&want, "VALUE %s 0 3 %d\r\nv%s\r\n", k, d.CAS, k)
		}
		want.WriteString("END\r\n")
		if got != want.String() {
			t.Fatalf("gats: %q, want %q", got, want.String())
		}
		if got := pa.take(); len(got) != 1 || got[0] != "gats 2000 a1 a2" {
			t.Fatalf("node a was sent %q", got)
		}
		for _, x := range []*fixture{f, a, b} {
			x.clock.Advance(1000) // past 1000, before 2000
		}
		c.send("get " + strings.Join(keys, " ") + "\r\n")
		if got := c.readAnswer(); strings.Count(got, "VALUE ") != len(keys) {
			t.Fatalf("get after the gats' expiry moved past the gat's: %q", got)
		}
	})
}

// TestForwardedMultiGetAbandoned: a batch whose node holds it unanswered
// (cut off) is abandoned once the route's Gone closes: the keys before
// the node's are answered, the first of its keys SERVER_ERROR saying the
// node went down, and the connection closes.
func TestForwardedMultiGetAbandoned(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		t.Cleanup(func() { checkNoLeaks(t) })
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		entered := make(chan string, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			r := bufio.NewReader(c)
			if l, _ := r.ReadString('\n'); !strings.HasPrefix(l, forwardHello) {
				return
			}
			c.Write([]byte("OK\r\n"))
			l, _ := r.ReadString('\n') // never answered
			entered <- strings.TrimRight(l, "\r\n")
			r.WriteTo(discardAll{}) // until the forwarding node closes it
		}()
		gone := make(chan struct{})
		f := bareFixture(t, &Options{IO: io, Route: func(_ context.Context, key string) (Route, error) {
			if key[0] == 'c' {
				return Route{Node: "cut", Addr: ln.Addr().String(), Gone: gone}, nil
			}
			return Route{}, nil
		}})
		put(t, f, "n1", "here", 0)
		c := f.dial(t)
		c.send("get n1 c1 c2 c3\r\n")
		if got := <-entered; got != "get c1 c2 c3" {
			t.Fatalf("the cut node was sent %q", got)
		}
		close(gone)
		for _, w := range []string{"VALUE n1 0 4\r\n", "here\r\n"} {
			if got := c.line(); got != w {
				t.Fatalf("got %q, want %q", got, w)
			}
		}
		if got := c.line(); !strings.HasPrefix(got, "SERVER_ERROR temporary failure") || !strings.Contains(got, "went down") {
			t.Fatalf("a multi-get abandoned as its node went down: %q", got)
		}
		c.expectClosed("")
	})
}

// discardAll is an io.Writer that drops what it is given.
type discardAll struct{}

func (discardAll) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkForwardedMultiGet: a 100-key multi-get through a node that
// leads a third of the keys, the others led by two more nodes (three
// servers on loopback, 100-byte values), answered with one command a
// node (batched) and, alternately in the same loop so that both meet the
// same machine, by a node asking each remote key's leader alone as before
// batches (per-key). It reports each's time a multi-get and their ratio:
//
//	go test -run XXX -bench ForwardedMultiGet -benchtime 2000x ./memcache/
func BenchmarkForwardedMultiGet(b *testing.B) {
	a, c := bareFixture(b, nil), bareFixture(b, nil)
	routes := map[string]Route{}
	var keys []string
	for i := range 100 {
		k := fmt.Sprintf("k%03d", i)
		keys = append(keys, k)
		switch i % 3 {
		case 1:
			routes[k] = Route{Node: "a", Addr: a.addr}
		case 2:
			routes[k] = Route{Node: "c", Addr: c.addr}
		}
	}
	route := func(_ context.Context, key string) (Route, error) { return routes[key], nil }
	batched := bareFixture(b, &Options{Route: route})
	po := &Options{Route: route}
	po.private.perKeyGets = true
	perKey := bareFixture(b, po)
	var want strings.Builder
	for i, k := range keys {
		v := strings.Repeat(k, 25)
		switch i % 3 {
		case 0:
			put(b, batched, k, v, 0)
			put(b, perKey, k, v, 0)
		case 1:
			put(b, a, k, v, 0)
		case 2:
			put(b, c, k, v, 0)
		}
		fmt.Fprintf(&want, "VALUE %s 0 %d\r\n%s\r\n", k, len(v), v)
	}
	want.WriteString("END\r\n")
	line := "get " + strings.Join(keys, " ") + "\r\n"
	tb, tp := alternateMultiGets(b, batched, perKey, line, want.String(), nil)
	b.ReportMetric(float64(tb.Nanoseconds())/float64(b.N), "batched-ns/mget")
	b.ReportMetric(float64(tp.Nanoseconds())/float64(b.N), "perkey-ns/mget")
	b.ReportMetric(float64(tp)/float64(tb), "perkey/batched")
}

// BenchmarkForwardedMultiGetRefused: a 100-key multi-get through a node
// whose map is stale: it sends the 67 remote keys to node a, which leads
// half of them (k001, k004, ...) and refuses the batch at the first of the
// others (k002), which moved to node c (three servers on loopback, 100-byte
// values). The refusal is met by every multi-get (these routes learn
// nothing from it). Batched again, the keys past the refusal take one
// command to a and one to c; per key (private.noRebatch, as before
// rebatch), each takes its own, a moved key two (a, then c). Both run
// alternately in the same loop; it reports each's time and forwarded
// commands a multi-get:
//
//	go test -run XXX -bench ForwardedMultiGetRefused -benchtime 2000x ./memcache/
func BenchmarkForwardedMultiGetRefused(b *testing.B) {
	leads := map[string]string{}
	var keys []string
	for i := range 100 {
		k := fmt.Sprintf("k%03d", i)
		keys = append(keys, k)
		leads[k] = [...]string{"", "a", "c"}[i%3]
	}
	var mu sync.Mutex
	addrs := map[string]string{}
	addrOf := func(n string) string {
		mu.Lock()
		defer mu.Unlock()
		return addrs[n]
	}
	leader := func(self string) func(context.Context, string) (Route, error) {
		return func(_ context.Context, key string) (Route, error) {
			if l := leads[key]; l != "" && l != self {
				return Route{Node: l, Addr: addrOf(l)}, nil
			}
			return Route{}, nil
		}
	}
	a, c := bareFixture(b, &Options{Route: leader("a")}), bareFixture(b, &Options{Route: leader("c")})
	mu.Lock()
	addrs["a"], addrs["c"] = a.addr, c.addr
	mu.Unlock()
	var routeTo func(n string) Route
	routeTo = func(n string) Route {
		return Route{Node: n, Addr: addrOf(n), Reroute: func(_ context.Context, named string) (Route, bool) {
			return routeTo(named), addrOf(named) != ""
		}}
	}
	stale := func(_ context.Context, key string) (Route, error) {
		if leads[key] == "" {
			return Route{}, nil
		}
		return routeTo("a"), nil
	}
	again := bareFixture(b, &Options{Route: stale})
	po := &Options{Route: stale}
	po.private.noRebatch = true
	perKey := bareFixture(b, po)
	var want strings.Builder
	for _, k := range keys {
		v := strings.Repeat(k, 25)
		switch leads[k] {
		case "":
			put(b, again, k, v, 0)
			put(b, perKey, k, v, 0)
		case "a":
			put(b, a, k, v, 0)
		case "c":
			put(b, c, k, v, 0)
		}
		fmt.Fprintf(&want, "VALUE %s 0 %d\r\n%s\r\n", k, len(v), v)
	}
	want.WriteString("END\r\n")
	line := "get " + strings.Join(keys, " ") + "\r\n"
	var sa, sp int64
	ta, tp := alternateMultiGets(b, again, perKey, line, want.String(), func() {
		sa, sp = again.srv.fwd.sent.Load(), perKey.srv.fwd.sent.Load()
	})
	b.ReportMetric(float64(ta.Nanoseconds())/float64(b.N), "rebatched-ns/mget")
	b.ReportMetric(float64(tp.Nanoseconds())/float64(b.N), "perkey-ns/mget")
	b.ReportMetric(float64(again.srv.fwd.sent.Load()-sa)/float64(b.N), "rebatched-cmds/mget")
	b.ReportMetric(float64(perKey.srv.fwd.sent.Load()-sp)/float64(b.N), "perkey-cmds/mget")
}

// alternateMultiGets checks that both servers answer line with want (which
// fills their pools), calls before (if any), then sends line b.N times to
// each, alternately, and returns the time each took in all.
func alternateMultiGets(b *testing.B, x, y *fixture, line, want string, before func()) (tx, ty time.Duration) {
	b.Helper()
	cx, cy := x.dial(b), y.dial(b)
	for _, cl := range []*client{cx, cy} {
		cl.send(line)
		if got := cl.readAnswer(); got != want {
			b.Fatalf("the multi-get answered %.200q", got)
		}
	}
	if before != nil {
		before()
	}
	n := len(want)
	b.ResetTimer()
	for range b.N {
		start := time.Now() // wall clock: the benchmark's measure
		cx.send(line)
		gotX := cx.read(n)
		mid := time.Now() // wall clock: the benchmark's measure
		cy.send(line)
		gotY := cy.read(n)
		tx += mid.Sub(start)
		ty += time.Since(mid) // wall clock: the benchmark's measure
		if gotX != want || gotY != gotX {
			b.Fatalf("the multi-get answered %.200q and %.200q", gotX, gotY)
		}
	}
	b.StopTimer()
	return tx, ty
}
