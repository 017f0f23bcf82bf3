package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/cluster"
)

// TestTopologyNamesNoDownLeaderForACopyNotHeld: the KV configuration
// (GET_CLUSTER_CONFIG, NOT_MY_VBUCKET's body, /pools/default/b/NAME) that a
// node holding no copy of a partition serves names, as the partition's
// active, the map's preferred leader even once that node's lease expired
// (dead or cut off, before the failover timeout moves its partitions):
// serverList lists it with an empty address. The partition's surviving
// voters elected a leader within seconds and every layout revision they
// record names it in their own configuration; this node serves another
// layout under the same rev, and an SDK that took it (gocbcore ignores a
// configuration whose rev it already holds, and sends NOT_MY_VBUCKET's
// retries to the same server) sends the partition's keys to the dead node
// until the failover changes the map, 30 s by default. The HTTP and
// memcached routes of the same node already avoid it (router.pick:
// TestRouterAvoidsAPreferredLeaderThatIsDown).
func TestTopologyNamesNoDownLeaderForACopyNotHeld(t *testing.T) {
	t.Skip("bug: a node holding no copy of a partition names its down preferred leader as the active in the KV configuration, under the rev at which the copies' holders name the elected leader (see the test's comment)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, mirror := oneNodeClusterWith(t, ctx, func(c *cluster.Config) {
		c.FailoverTimeout, c.LeaderSettle = time.Hour, time.Hour // the map stays as placed
	})
	cli := node.Client()
	for _, n := range []string{"v2", "v3", "v4"} {
		info := fmt.Sprintf(`{"name":%q,"http":"127.0.0.1:1%s","kv":"127.0.0.1:3%s"}`, n, n[1:], n[1:])
		if _, err := cli.Put(ctx, "/mayfly/nodes/"+n, info); err != nil {
			t.Fatal(err)
		}
	}
	h, eng, b := routerHostAndBucket(t, ctx, 64)
	if err := cluster.DefineBucket(ctx, cli, cluster.BucketDef{BucketSettings: b.Settings(), ReplicaNumber: 2}); err != nil {
		t.Fatal(err)
	}
	var m *cluster.PartitionMap
	for m == nil {
		ch := mirror.Changed()
		if m, _, _, _ = mirror.Map("b"); m != nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the bucket's map was not placed")
		case <-ch:
		}
	}
	part := slices.IndexFunc(m.Partitions, func(p cluster.Partition) bool { return !slices.Contains(p.Voters, "n1") })
	if part < 0 {
		t.Fatalf("no partition without n1 in %+v", m.Partitions)
	}
	pref := m.Partitions[part].Leader
	r := &router{eng: eng, h: h, self: "n1", mirror: mirror}

	// The preferred leader's lease expires.
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
	top, err := r.topology(ctx, "b")
	if err != nil || top == nil {
		t.Fatalf("topology: %+v, %v", top, err)
	}
	row := top.Map[part]
	if row[0] < 0 {
		t.Fatalf("partition %d: no active in %v", part, row)
	}
	if s := top.Servers[row[0]]; s.Name == pref || s.KV == "" {
		t.Fatalf("partition %d (voters %v): the configuration names %s as its active, address %q, whose lease expired; want a live voter",
			part, m.Partitions[part].Voters, s.Name, s.KV)
	}
}
