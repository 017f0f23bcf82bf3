package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/replica"
)

// TestRouterAvoidsAPreferredLeaderThatIsDown: on a node holding no copy of
// a partition, whose map's preferred leader has no live lease (its
// registration gone, as when it is cut off or dead, before any failover),
// the router sends the partition's requests to another live voter of it
// (before, to the node that is down: refused, its address unknown); it
// follows a leader a refusal names (Reroute), remembers it for the
// partition until the bucket's layout revision moves, never takes a name
// it cannot use (a node down, itself), and a voter a forward could not
// reach is avoided for the next.
func TestRouterAvoidsAPreferredLeaderThatIsDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, mirror := oneNodeClusterWith(t, ctx, func(c *cluster.Config) {
		c.FailoverTimeout, c.LeaderSettle = time.Hour, time.Hour // the map stays as placed
	})
	cli := node.Client()
	// Three more nodes registered (no process behind them: the router only
	// names them), so that n1 holds no copy of a quarter of the partitions.
	for _, n := range []string{"v2", "v3", "v4"} {
		info := fmt.Sprintf(`{"name":%q,"http":"127.0.0.1:1%s","memcached":"127.0.0.1:2%s"}`, n, n[1:], n[1:])
		if _, err := cli.Put(ctx, "/mayfly/nodes/"+n, info); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	h, err := replica.Open(replica.Options{Dir: filepath.Join(dir, "raft"), Node: "n1", Listen: "127.0.0.1:0", Resolver: noPeers{}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	eng, err := engine.Open(filepath.Join(dir, "data"), &engine.Options{NumPartitions: 64, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	def := cluster.BucketDef{BucketSettings: b.Settings(), ReplicaNumber: 2}
	if err := cluster.DefineBucket(ctx, cli, def); err != nil {
		t.Fatal(err)
	}
	var m *cluster.PartitionMap
	for m == nil {
		if m, _, _, _ = mirror.Map("b"); m != nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the bucket's map was not placed")
		case <-mirror.Changed():
		}
	}
	// A key of a partition n1 holds no copy of.
	key, part := "", -1
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		p := b.PartitionOf(k)
		if !slices.Contains(m.Partitions[p].Voters, "n1") {
			key, part = k, p
		}
		if i > 10000 {
			t.Fatalf("no key of a partition without n1 in %+v", m.Partitions[:64])
		}
	}
	p := m.Partitions[part]
	pref := p.Leader
	var others []string // its other voters, in the map's order
	for _, v := range p.Voters {
		if v != pref {
			others = append(others, v)
		}
	}
	if len(others) != 2 {
		t.Fatalf("partition %d: %+v; want three voters", part, p)
	}
	r := &router{eng: eng, h: h, self: "n1", mirror: mirror}
	routeNode := func() string {
		t.Helper()
		rt, err := r.httpRoute(ctx, "b", key)
		if err != nil {
			t.Fatalf("HTTP route of %q: %v", key, err)
		}
		return rt.Node
	}
	if got := routeNode(); got != pref {
		t.Fatalf("with every voter up the request goes to %q; want the preferred leader %q", got, pref)
	}

	// The preferred leader's registration goes (its lease expired).
	if _, err := cli.Delete(ctx, "/mayfly/nodes/"+pref); err != nil {
		t.Fatal(err)
	}
	for {
		ch := mirror.Changed()
		if _, err := mirror.Node(pref); err != nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the mirror kept the node whose registration was deleted")
		case <-ch:
		}
	}
	hr, err := r.httpRoute(ctx, "b", key)
	if err != nil || hr.Node != others[0] || hr.Addr != "127.0.0.1:1"+others[0][1:] || hr.Reroute == nil {
		t.Fatalf("HTTP route with the preferred leader %s down: %+v, %v; want voter %s, with a Reroute", pref, hr, err, others[0])
	}
	mr, err := r.memcachedRoute("b")(ctx, key)
	if err != nil || mr.Node != others[0] || mr.Addr != "127.0.0.1:2"+others[0][1:] || mr.Reroute == nil {
		t.Fatalf("memcached route with the preferred leader %s down: %+v, %v; want voter %s, with a Reroute", pref, mr, err, others[0])
	}

	// Names a refusal may give that cannot be used: the node down, this
	// node, the refusing node itself.
	for _, name := range []string{pref, "n1", others[0]} {
		if rt, ok := hr.Reroute(ctx, name); ok {
			t.Fatalf("Reroute naming %s: %+v; want nowhere", name, rt)
		}
	}
	// The voter reached names the other as the leader: followed, and
	// remembered for the partition (the memcached port's too).
	next, ok := hr.Reroute(ctx, others[1])
	if !ok || next.Node != others[1] || next.Addr != "127.0.0.1:1"+others[1][1:] {
		t.Fatalf("Reroute naming %s: %+v, %v", others[1], next, ok)
	}
	if got := routeNode(); got != others[1] {
		t.Fatalf("after %s was named the leader the request goes to %q", others[1], got)
	}
	if mr, err := r.memcachedRoute("b")(ctx, key); err != nil || mr.Node != others[1] {
		t.Fatalf("memcached route after %s was named the leader: %+v, %v", others[1], mr, err)
	}

	// A change of leadership anywhere (the layout revision moves) drops
	// what was learned.
	before := mirror.LayoutRevision("b")
	if _, err := cluster.BumpLayout(ctx, cli, "b", "n1"); err != nil {
		t.Fatal(err)
	}
	for mirror.LayoutRevision("b") == before {
		select {
		case <-ctx.Done():
			t.Fatal("the layout revision did not move")
		case <-mirror.Changed():
		}
	}
	if got := routeNode(); got != others[0] {
		t.Fatalf("after a layout change the request goes to %q; want the first live voter %s again", got, others[0])
	}

	// A voter a forward could not reach is avoided: the key goes to the
	// last live voter; when that one cannot be reached either there is
	// nowhere else.
	hr, _ = r.httpRoute(ctx, "b", key)
	next, ok = hr.Reroute(ctx, "")
	if !ok || next.Node != others[1] {
		t.Fatalf("Reroute after %s could not be reached: %+v, %v; want %s", others[0], next, ok, others[1])
	}
	if got := routeNode(); got != others[1] {
		t.Fatalf("after %s could not be reached the request goes to %q", others[0], got)
	}
	if rt, ok := next.Reroute(ctx, ""); ok {
		t.Fatalf("Reroute with every voter unreachable or down: %+v; want nowhere", rt)
	}
}
