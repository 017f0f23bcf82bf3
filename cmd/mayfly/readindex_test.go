package main

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/replica"
)

// noPeers resolves no node: the test's group has this node alone.
type noPeers struct{}

func (noPeers) Addr(context.Context, string) (string, error) { return "", errors.New("no peers") }

// routerLedHere is routerHostAndBucket with two partitions, bucket b's
// replication on the host, and partition 0's group running here with this
// node its only voter and leader (1's runs nowhere): the host, the
// engine, a key of partition 0 (led) and one of partition 1 (other).
func routerLedHere(t *testing.T, ctx context.Context) (h *replica.Host, eng *engine.Engine, led, other string) {
	t.Helper()
	h, eng, b := routerHostAndBucket(t, ctx, 2)
	uuid := b.Settings().UUID
	b.SetReplicator(&replica.BucketReplicator{Host: h, Bucket: "b", UUID: uuid})
	for i := 0; led == "" || other == ""; i++ {
		k := string(rune('a' + i))
		if b.PartitionOf(k) == 0 {
			led = k
		} else {
			other = k
		}
	}
	g := replica.BucketGroup("b", uuid, 0)
	if err := h.AddGroup(g, []string{"n1"}, replica.NewBucketMachine(b, 0, nil)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second) // wall clock: a hang guard
	for l, ok := h.Leader(g); !ok || l != "n1"; l, ok = h.Leader(g) {
		if time.Now().After(deadline) { // wall clock: a hang guard
			t.Fatal("the one-voter group elected no leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return h, eng, led, other
}

// routerHostAndBucket opens, for a router's test, node n1's replica host
// (no peers, no group yet) and an engine with a bucket "b" of parts
// partitions; both close when the test ends.
func routerHostAndBucket(t *testing.T, ctx context.Context, parts int) (*replica.Host, *engine.Engine, *engine.Bucket) {
	t.Helper()
	dir := t.TempDir()
	h, err := replica.Open(replica.Options{Dir: filepath.Join(dir, "raft"), Node: "n1", Listen: "127.0.0.1:0", Resolver: noPeers{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	eng, err := engine.Open(filepath.Join(dir, "data"), &engine.Options{NumPartitions: parts, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	return h, eng, b
}

// TestRouterHandsReadsTheReadIndex: for a key whose partition this node
// leads, the router's HTTP and memcached routes answer here and carry the
// partition's read index as their Barrier (the real one: a round on the
// partition's Raft group); a partition this node runs no group of (a
// bucket without a map) carries none.
func TestRouterHandsReadsTheReadIndex(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, eng, led, other := routerLedHere(t, ctx)
	_, mirror := oneNodeCluster(t, ctx)
	r := &router{eng: eng, h: h, self: "n1", mirror: mirror}

	rounds := h.Stats().ReadIndexRounds
	hr, err := r.httpRoute(ctx, "b", led)
	if err != nil || hr.Addr != "" || hr.Barrier == nil {
		t.Fatalf("HTTP route of a key this node leads: %+v, %v; want here, with a barrier", hr, err)
	}
	if err := hr.Barrier(ctx); err != nil {
		t.Fatalf("the HTTP route's barrier: %v", err)
	}
	mr, err := r.memcachedRoute("b")(ctx, led)
	if err != nil || mr.Addr != "" || mr.Barrier == nil || mr.Partition != 0 {
		t.Fatalf("memcached route of a key this node leads: %+v, %v; want here, with partition 0's barrier", mr, err)
	}
	if err := mr.Barrier(ctx); err != nil {
		t.Fatalf("the memcached route's barrier: %v", err)
	}
	if n := h.Stats().ReadIndexRounds - rounds; n != 2 {
		t.Fatalf("the barriers took %d read-index rounds, want 2", n)
	}
	// The bucket has no partition map (the cluster does not define it).
	if err := mirror.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	if hr, err := r.httpRoute(ctx, "b", other); err != nil || hr.Barrier != nil {
		t.Fatalf("HTTP route of a partition without a group here: %+v, %v; want no barrier", hr, err)
	}
}

// TestRouterLocalRouteFollowsItsOwnRefusal: a route that answers here (this
// node leads the key's partition's group) carries a Reroute, for when this
// node's replication refuses the request naming another leader
// (leadership moved since the route was made): asked with a live node, it
// gives that node's route (HTTP and memcached addresses); asked with no
// name, this node, or a node that is not up, nowhere. A partition this
// node runs no group of gets none (nothing here can refuse that way).
func TestRouterLocalRouteFollowsItsOwnRefusal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, eng, led, other := routerLedHere(t, ctx)
	node, mirror := oneNodeCluster(t, ctx)
	if _, err := node.Client().Put(ctx, "/mayfly/nodes/n2", `{"name":"n2","http":"127.0.0.1:12","memcached":"127.0.0.1:22"}`); err != nil {
		t.Fatal(err)
	}
	for {
		ch := mirror.Changed()
		if _, err := mirror.Node("n2"); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the mirror never saw n2")
		case <-ch:
		}
	}
	r := &router{eng: eng, h: h, self: "n1", mirror: mirror}

	hr, err := r.httpRoute(ctx, "b", led)
	if err != nil || hr.Addr != "" || hr.Reroute == nil {
		t.Fatalf("HTTP route of a key this node leads: %+v, %v; want here, with a Reroute", hr, err)
	}
	mr, err := r.memcachedRoute("b")(ctx, led)
	if err != nil || mr.Addr != "" || mr.Reroute == nil {
		t.Fatalf("memcached route of a key this node leads: %+v, %v; want here, with a Reroute", mr, err)
	}
	for _, name := range []string{"", "n1", "ghost"} {
		if rt, ok := hr.Reroute(ctx, name); ok {
			t.Fatalf("HTTP Reroute naming %q: %+v; want nowhere", name, rt)
		}
		if rt, ok := mr.Reroute(ctx, name); ok {
			t.Fatalf("memcached Reroute naming %q: %+v; want nowhere", name, rt)
		}
	}
	if rt, ok := hr.Reroute(ctx, "n2"); !ok || rt.Node != "n2" || rt.Addr != "127.0.0.1:12" || rt.From != "n1" {
		t.Fatalf("HTTP Reroute naming n2: %+v, %v", rt, ok)
	}
	if rt, ok := mr.Reroute(ctx, "n2"); !ok || rt.Node != "n2" || rt.Addr != "127.0.0.1:22" {
		t.Fatalf("memcached Reroute naming n2: %+v, %v", rt, ok)
	}
	if err := mirror.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	if hr, err := r.httpRoute(ctx, "b", other); err != nil || hr.Reroute != nil {
		t.Fatalf("HTTP route of a partition without a group here: %+v, %v; want no Reroute", hr, err)
	}
}
