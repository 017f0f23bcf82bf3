package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/replica"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestTopologyNamesTheRecordedLeaderForACopyNotHeld: the KV configuration
// (GET_CLUSTER_CONFIG, NOT_MY_VBUCKET's body, /pools/default/b/NAME) that a
// node holding no copy of a partition serves names, as the partition's
// active, the leader the partition's Raft group elected, as the nodes
// holding its copies do under the same layout revision: the leader's own
// record of the partitions it leads (followLayouts, cluster.PublishLeads).
// Before, it named the map's preferred leader even once that node's lease
// expired (dead or cut off, before the failover timeout moves its
// partitions), listed with an empty address; an SDK that took that
// configuration (gocbcore ignores one whose rev it already holds, and
// sends NOT_MY_VBUCKET's retries to the same server) sent the partition's
// keys to the dead node until the failover changed the map, 30 s by
// default. And a group this node leads is recorded as its by
// followLayouts.
func TestTopologyNamesTheRecordedLeaderForACopyNotHeld(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, mirror := oneNodeClusterWith(t, ctx, func(c *cluster.Config) {
		c.FailoverTimeout, c.LeaderSettle = time.Hour, time.Hour // the map stays as placed
	})
	cli := node.Client()
	// Three more nodes registered (no process behind them), so that n1
	// holds no copy of a quarter of the partitions.
	h, eng, b, m := stubNodesAndBucket(t, ctx, cli, mirror, "v2", "v3", "v4")
	uuid := b.Settings().UUID
	part := slices.IndexFunc(m.Partitions, func(p cluster.Partition) bool { return !slices.Contains(p.Voters, "n1") })
	if part < 0 {
		t.Fatalf("no partition without n1 in %+v", m.Partitions)
	}
	p := m.Partitions[part]
	pref := p.Leader
	var others []string
	for _, v := range p.Voters {
		if v != pref {
			others = append(others, v)
		}
	}
	r := &router{eng: eng, h: h, cli: cli, self: "n1", mirror: mirror}
	// active is the node the configuration names partition part's
	// active, with its KV address, and the configuration's layout
	// revision.
	active := func() (clusterconfig.Server, int64) {
		t.Helper()
		top, err := r.topology(ctx, "b")
		if err != nil || top == nil {
			t.Fatalf("topology: %+v, %v", top, err)
		}
		row := top.Map[part]
		if len(row) != top.Replicas+1 || row[0] < 0 {
			t.Fatalf("partition %d's row %v (%d replicas)", part, row, top.Replicas)
		}
		return top.Servers[row[0]], top.Rev
	}
	if s, _ := active(); s.Name != pref {
		t.Fatalf("with nothing recorded the configuration names %s; want the preferred leader %s", s.Name, pref)
	}

	// The preferred leader's lease expires, and another voter, elected,
	// records the partition as its (as followLayouts does on it).
	if _, err := cli.Delete(ctx, "/mayfly/nodes/"+pref); err != nil {
		t.Fatal(err)
	}
	rev, err := cluster.PublishLeads(ctx, cli, "b", uuid, others[1], []int{part})
	if err != nil {
		t.Fatal(err)
	}
	for mirror.LayoutRevision("b") < rev {
		select {
		case <-ctx.Done():
			t.Fatal("the mirror did not reach the record's revision")
		case <-mirror.Changed():
		}
	}
	if s, at := active(); s.Name != others[1] || s.KV != "127.0.0.1:3"+others[1][1:] || at != rev {
		t.Fatalf("partition %d (voters %v, %s down): the configuration names %s at %q under layout revision %d; want %s, the leader recorded at %d",
			part, p.Voters, pref, s.Name, s.KV, at, others[1], rev)
	}

	// A partition whose group this node leads is recorded as its, with
	// a move of the layout revision.
	mine := slices.IndexFunc(m.Partitions, func(p cluster.Partition) bool { return slices.Contains(p.Voters, "n1") })
	g := replica.BucketGroup("b", uuid, mine)
	if err := h.AddGroup(g, []string{"n1"}, replica.NewBucketMachine(b, mine, nil)); err != nil {
		t.Fatal(err)
	}
	before := mirror.LayoutRevision("b")
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.followLayouts(fctx) }()
	defer func() { stop(); <-done }()
	for {
		ch := mirror.Changed()
		if mirror.ClaimedLeaders("b", uuid, len(m.Partitions))[mine] == "n1" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("partition %d, led here, was not recorded as n1's", mine)
		case <-ch:
		}
	}
	if after := mirror.LayoutRevision("b"); after <= before {
		t.Fatalf("the record of n1's partitions left the layout revision at %d (%d before)", after, before)
	}
	if got := mirror.ClaimedLeaders("b", uuid, len(m.Partitions))[part]; got != others[1] {
		t.Fatalf("partition %d: recorded leader %q after n1's record; want %s still", part, got, others[1])
	}
}

// stubNodesAndBucket registers nodes (names, no process behind them) beside
// n1, opens n1's replica host and bucket "b" (64 partitions) and defines the
// bucket on the cluster with three copies, and returns them with the
// bucket's map once it is placed over every node.
func stubNodesAndBucket(t *testing.T, ctx context.Context, cli *clientv3.Client, mirror *cluster.TopologyMirror, nodes ...string) (*replica.Host, *engine.Engine, *engine.Bucket, *cluster.PartitionMap) {
	t.Helper()
	for _, n := range nodes {
		info := fmt.Sprintf(`{"name":%q,"http":"127.0.0.1:1%s","kv":"127.0.0.1:3%s"}`, n, n[1:], n[1:])
		if _, err := cli.Put(ctx, "/mayfly/nodes/"+n, info); err != nil {
			t.Fatal(err)
		}
	}
	h, eng, b := routerHostAndBucket(t, ctx, 64)
	def := cluster.BucketDef{BucketSettings: b.Settings()}
	def.ReplicaNumber = engine.Replicas(2)
	if err := cluster.DefineBucket(ctx, cli, def); err != nil {
		t.Fatal(err)
	}
	for {
		ch := mirror.Changed()
		if m, _, _, _ := mirror.Map("b"); m != nil && len(mirror.NodeList()) == len(nodes)+1 {
			return h, eng, b, m
		}
		select {
		case <-ctx.Done():
			t.Fatal("the bucket's map was not placed")
		case <-ch:
		}
	}
}
