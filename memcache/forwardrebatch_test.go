package memcache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// movedCluster is a follower and leaders, each leader's server behind a
// lineProxy. A node routes a key by its first letter: each leader as its
// own view says (the letters it leads, or that no view names, are its
// own), the follower as its stale view says; a follower's route follows
// the leader a refusal names (Route.Reroute, recorded as "from>named").
type movedCluster struct {
	f       *fixture
	nodes   map[string]*fixture
	proxies map[string]*lineProxy

	mu       sync.Mutex
	addrs    map[string]string // node → its proxy's address
	rerouted []string
}

// newMovedCluster starts the leaders views names (node → letter → leader)
// and a follower routing by stale (letter → node; other letters are its
// own).
func newMovedCluster(t *testing.T, io IOModel, views map[string]map[byte]string, stale map[byte]string) *movedCluster {
	t.Helper()
	t.Cleanup(func() { checkNoLeaks(t) }) // runs last: after every server closed
	m := &movedCluster{nodes: map[string]*fixture{}, proxies: map[string]*lineProxy{}, addrs: map[string]string{}}
	for name, view := range views {
		m.nodes[name] = bareFixture(t, &Options{IO: io, Route: func(_ context.Context, key string) (Route, error) {
			if l := view[key[0]]; l != "" && l != name {
				return Route{Node: l, Addr: m.addr(l)}, nil
			}
			return Route{}, nil
		}})
		p := newLineProxy(t, m.nodes[name].addr)
		m.mu.Lock()
		m.proxies[name], m.addrs[name] = p, p.addr
		m.mu.Unlock()
	}
	m.f = bareFixture(t, &Options{IO: io, Route: func(_ context.Context, key string) (Route, error) {
		if l := stale[key[0]]; l != "" {
			return m.routeTo(l), nil
		}
		return Route{}, nil
	}})
	return m
}

func (m *movedCluster) addr(node string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addrs[node]
}

// routeTo is the follower's route to node, whose Reroute goes where a
// refusal names.
func (m *movedCluster) routeTo(node string) Route {
	return Route{Node: node, Addr: m.addr(node), Reroute: func(_ context.Context, named string) (Route, bool) {
		m.mu.Lock()
		m.rerouted = append(m.rerouted, node+">"+named)
		_, ok := m.addrs[named]
		m.mu.Unlock()
		if !ok {
			return Route{}, false
		}
		return m.routeTo(named), true
	}}
}

// take returns the Reroutes asked and each leader's retrieval lines since
// the last take.
func (m *movedCluster) take() (rerouted []string, lines map[string][]string) {
	lines = map[string][]string{}
	for name, p := range m.proxies {
		lines[name] = p.take()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rerouted, m.rerouted = m.rerouted, nil
	return rerouted, lines
}

// TestForwardedMultiGetRefusedBatchAgain: node b refuses a multi-get's
// batch at the first key of a partition it no longer leads (the
// follower's map is stale: the x keys moved to a, the y keys to c). The
// keys of the batch are asked again in one command per node that leads
// them (a, c, and b for its own keys past the refusal), not one a key
// (before: 1+23 commands to b, 8 each to a and c, 40 in all); b's miss
// before the refusal is not asked again; the answer is every value, as
// the leaders hold it, in the client's order, for get, gets and gat.
func TestForwardedMultiGetRefusedBatchAgain(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		now := map[byte]string{'b': "b", 'x': "a", 'y': "c"}
		m := newMovedCluster(t, io, map[string]map[byte]string{"a": now, "b": now, "c": now}, map[byte]string{'b': "b", 'x': "b", 'y': "b"})
		owner := func(k string) *fixture {
			if l := now[k[0]]; l != "" {
				return m.nodes[l]
			}
			return m.f
		}
		var keys []string
		for i := range 8 {
			for _, p := range []string{"b", "x", "n", "y"} {
				k := fmt.Sprintf("%s%d", p, i)
				keys = append(keys, k)
				if i == 5 || k == "b0" {
					continue // misses; b0's is before b's refusal
				}
				put(t, owner(k), k, strings.Repeat("v-"+k, i+1), uint32(i))
			}
		}
		ctx := context.Background()
		c := m.f.dial(t)
		for _, kind := range []string{"get", "gets", "gat 0"} {
			c.send(kind + " " + strings.Join(keys, " ") + "\r\n")
			got := c.readAnswer()
			var want strings.Builder
			for _, k := range keys {
				d, err := owner(k).bucket.DefaultCollection().Get(ctx, k)
				if errors.Is(err, engine.ErrNotFound) {
					continue
				} else if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&want, "VALUE %s %d %d", k, d.Flags, len(d.Value))
				if kind == "gets" {
					fmt.Fprintf(&want, " %d", d.CAS)
				}
				fmt.Fprintf(&want, "\r\n%s\r\n", d.Value)
			}
			want.WriteString("END\r\n")
			if got != want.String() {
				t.Fatalf("%s through a node refusing moved keys:\n got %.400q\nwant %.400q", kind, got, want.String())
			}

			var of = func(ps ...string) string {
				var ks []string
				for _, k := range keys {
					if slices.Contains(ps, k[:1]) && k != "b0" {
						ks = append(ks, k)
					}
				}
				return kind + " " + strings.Join(ks, " ")
			}
			wantLines := map[string][]string{
				"b": {kind + " b0 " + strings.TrimPrefix(of("b", "x", "y"), kind+" "), of("b")},
				"a": {of("x")},
				"c": {of("y")},
			}
			rerouted, lines := m.take()
			if n := len(lines["a"]) + len(lines["b"]) + len(lines["c"]); n != 4 {
				t.Errorf("%s: %d forwarded commands; want 4: the batch, then one a node", kind, n)
			}
			for node, w := range wantLines {
				if !slices.Equal(lines[node], w) {
					t.Fatalf("%s: node %s was sent %d commands %.300q; want %d, %.300q", kind, node, len(lines[node]), lines[node], len(w), w)
				}
			}
			// b's refusal named the leader of every moved key: each
			// one's Reroute was asked once, none was sent to b again.
			if len(rerouted) != 16 || !slices.Contains(rerouted, "b>a") || !slices.Contains(rerouted, "b>c") {
				t.Fatalf("%s: Reroute asked %q", kind, rerouted)
			}
		}
		c.do("version\r\n", "VERSION "+DefaultVersion+"\r\n") // the connection serves on
	})
}

// TestForwardedMultiGetRefusalsBounded: two nodes that each name the
// other as the leader of the z keys (a map in flux) do not make a
// multi-get loop: its keys are batched again fwdRetryRounds times, each
// batch to the node the last refusal named, then the first of them is
// asked alone as a single get is (the node its route names, then the one
// that refuses it names), whose refusal ends the multi-get after the
// values before it, and the connection closes.
func TestForwardedMultiGetRefusalsBounded(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		m := newMovedCluster(t, io, map[string]map[byte]string{
			"a": {'z': "b"},
			"b": {'z': "a"},
		}, map[byte]string{'b': "b", 'z': "b"})
		put(t, m.nodes["b"], "b1", "here", 0)
		for _, k := range []string{"z1", "z2", "z3"} {
			put(t, m.nodes["a"], k, "v", 0)
			put(t, m.nodes["b"], k, "v", 0)
		}
		c := m.f.dial(t)
		c.send("get n1 b1 z1 z2 z3\r\n")
		for _, w := range []string{"VALUE b1 0 4\r\n", "here\r\n"} {
			if got := c.line(); got != w {
				t.Fatalf("got %q, want %q", got, w)
			}
		}
		if got := c.line(); !strings.HasPrefix(got, "SERVER_ERROR not my vbucket") || !strings.Contains(got, `key "z1"`) {
			t.Fatalf("a multi-get through nodes naming each other: %q", got)
		}
		c.expectClosed("")

		want := map[string][]string{"b": {"get b1 z1 z2 z3"}, "a": nil}
		node := "a"
		for range fwdRetryRounds {
			want[node] = append(want[node], "get z1 z2 z3")
			node = map[string]string{"a": "b", "b": "a"}[node]
		}
		want["b"] = append(want["b"], "gets z1")
		want["a"] = append(want["a"], "gets z1")
		_, lines := m.take()
		for n, w := range want {
			if !slices.Equal(lines[n], w) {
				t.Fatalf("node %s was sent %q; want %q", n, lines[n], w)
			}
		}
	})
}

// TestForwardedMultiGetRefusalOddKeys: keys holding '"' and '@' (which
// memcached allows, and the refusal's quoting and KEY@NODE list must
// carry) are batched again at the right leaders all the same.
func TestForwardedMultiGetRefusalOddKeys(t *testing.T) {
	forEachIO(t, func(t *testing.T, io IOModel) {
		now := map[byte]string{'b': "b", 'x': "a", 'y': "c"}
		m := newMovedCluster(t, io, map[string]map[byte]string{"a": now, "b": now, "c": now}, map[byte]string{'b': "b", 'x': "b", 'y': "b"})
		keys := []string{`b"0`, `x@a`, `y"@c`, `b@1`, `x"@"c@`}
		for _, k := range keys {
			put(t, m.nodes[now[k[0]]], k, "v"+k, 1)
		}
		c := m.f.dial(t)
		c.send("get " + strings.Join(keys, " ") + "\r\n")
		var want strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&want, "VALUE %s 1 %d\r\nv%s\r\n", k, len(k)+1, k)
		}
		want.WriteString("END\r\n")
		if got := c.readAnswer(); got != want.String() {
			t.Fatalf("got %q, want %q", got, want.String())
		}
		_, lines := m.take()
		for n, w := range map[string][]string{
			"b": {"get " + strings.Join(keys, " "), "get b@1"},
			"a": {`get x@a x"@"c@`},
			"c": {`get y"@c`},
		} {
			if !slices.Equal(lines[n], w) {
				t.Fatalf("node %s was sent %q; want %q", n, lines[n], w)
			}
		}
	})
}
