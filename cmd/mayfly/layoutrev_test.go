package main

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/replica"
)

// TestTopologyOneLayoutPerRev: the KV configuration a node serves at one
// rev names the leaders recorded in etcd under that rev, whatever its own
// Raft groups learnt since: a group of this node elected it (a leadership
// change) and the configuration stays what it was until the change is
// recorded, which moves the rev. And the change is recorded at the word of
// the node's replica host (replica.Host.LeaderChanges), without waiting
// for followLayouts' poll (an hour here). Before, a node named its own
// group's new leader at once under the old rev, while the other nodes
// named the old one under that same rev for up to the 250 ms poll: an
// SDK holding the old layout ignored the new one (gocbcore takes only a
// higher rev) and kept sending the partition's keys to the old leader,
// answered NOT_MY_VBUCKET.
func TestTopologyOneLayoutPerRev(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, mirror := oneNodeClusterWith(t, ctx, func(c *cluster.Config) {
		c.FailoverTimeout, c.LeaderSettle = time.Hour, time.Hour // the map stays as placed
	})
	cli := node.Client()
	// Two more nodes registered (no process behind them): n1 is one of
	// every partition's three voters, the preferred leader of a third.
	h, eng, b, m := stubNodesAndBucket(t, ctx, cli, mirror, "v2", "v3")
	uuid := b.Settings().UUID
	var others []int // partitions n1 is a voter of and not the preferred leader
	for p, part := range m.Partitions {
		if part.Leader != "n1" && slices.Contains(part.Voters, "n1") {
			others = append(others, p)
		}
	}
	if len(others) < 2 {
		t.Fatalf("fewer than two partitions n1 holds without being their preferred leader: %+v", m.Partitions)
	}
	r := &router{eng: eng, h: h, cli: cli, self: "n1", mirror: mirror, layoutPoll: time.Hour}
	topology := func() *clusterconfig.Topology {
		t.Helper()
		top, err := r.topology(ctx, "b")
		if err != nil || top == nil {
			t.Fatalf("topology: %+v, %v", top, err)
		}
		return top
	}
	leaderOf := func(top *clusterconfig.Topology, part int) string {
		if i := top.Map[part][0]; i >= 0 {
			return top.Servers[i].Name
		}
		return ""
	}
	// elect has n1's group of partition part (n1 alone its voter) elect
	// n1, as a transfer to it would.
	elect := func(part int) {
		t.Helper()
		g := replica.BucketGroup("b", uuid, part)
		if err := h.AddGroup(g, []string{"n1"}, replica.NewBucketMachine(b, part, nil)); err != nil {
			t.Fatal(err)
		}
		for l, ok := h.Leader(g); !ok || l != "n1"; l, ok = h.Leader(g) {
			if ctx.Err() != nil {
				t.Fatalf("n1's group of partition %d elected no leader", part)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// recorded waits until the mirror reads n1's record of part.
	recorded := func(part int) {
		t.Helper()
		for {
			ch := mirror.Changed()
			if l := mirror.Layout("b", uuid); l.Leaders[part] == "n1" {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("partition %d, led here, was not recorded as n1's", part)
			case <-ch:
			}
		}
	}

	before := topology()
	elect(others[0])
	// Nothing recorded: one rev, one layout.
	if now := topology(); now.Rev == before.Rev && !reflect.DeepEqual(now.Map, before.Map) {
		t.Fatalf("at rev %d the configuration named %s, then %s as partition %d's leader (n1's group elected n1, unrecorded)",
			now.Rev, leaderOf(before, others[0]), leaderOf(now, others[0]), others[0])
	}

	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.followLayouts(fctx) }()
	defer func() { stop(); <-done }()
	recorded(others[0])
	if top := topology(); top.Rev <= before.Rev || leaderOf(top, others[0]) != "n1" {
		t.Fatalf("after n1's record: partition %d led by %s at rev %d (rev %d before); want n1 at a higher rev",
			others[0], leaderOf(top, others[0]), top.Rev, before.Rev)
	}
	// A second election, recorded at the host's word (the poll is an
	// hour away).
	elect(others[1])
	recorded(others[1])
	if top := topology(); leaderOf(top, others[1]) != "n1" || leaderOf(top, others[0]) != "n1" {
		t.Fatalf("after n1's second record: partitions %d and %d led by %s and %s; want n1 for both",
			others[0], others[1], leaderOf(top, others[0]), leaderOf(top, others[1]))
	}
}
