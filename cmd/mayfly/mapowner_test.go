package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/replica"
)

// TestMapChangeReachesRouterAndFollower: a new partition map reaches the
// router and serve's map follower as soon as the node's mirror holds it,
// not a poll or cache period later. Right after the mirror reached the
// new map's revision, a key's route names the new leader and the KV
// configuration's revision is the map's; and the follower starts the group
// the new map gives this node though its safety-net re-apply never runs
// (an hour apart here).
func TestMapChangeReachesRouterAndFollower(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, mirror := oneNodeCluster(t, ctx)
	cli := node.Client()
	eng, b, h, repl := followerFixture(t, ctx, node, mirror)
	uuid := b.Settings().UUID
	rt := &router{eng: eng, h: h, self: "n1", mirror: mirror}

	// Two other nodes up (registered on a lease of the test's).
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Revoke(context.Background(), lease.ID)
	addr := map[string]string{"n2": "127.0.0.1:2", "n3": "127.0.0.1:3"}
	for name, a := range addr {
		info, _ := json.Marshal(cluster.NodeInfo{Name: name, HTTP: a})
		if _, err := cli.Put(ctx, "/mayfly/nodes/"+name, string(info), clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	// The cluster defines the bucket (its orchestrator removes the map of
	// a bucket it does not define) and places it; the test's maps replace
	// the placement (one copy each: nothing for the orchestrator to fail
	// over or recover while n2 and n3 stay up).
	if err := cluster.DefineBucket(ctx, cli, cluster.BucketDef{BucketSettings: b.Settings()}); err != nil {
		t.Fatal(err)
	}
	for {
		changed := mirror.Changed()
		if m, _, _, _ := mirror.Map("b"); m != nil {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("the bucket was never placed")
		}
	}
	putMap := func(leaders ...string) int64 {
		t.Helper()
		m := &cluster.PartitionMap{Bucket: "b", UUID: uuid, Copies: 1}
		for _, l := range leaders {
			m.Partitions = append(m.Partitions, cluster.Partition{Leader: l, Voters: []string{l}, Epoch: 1})
		}
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Put(ctx, "/mayfly/maps/b", string(data))
		if err != nil {
			t.Fatal(err)
		}
		if err := mirror.WaitMaps(ctx, resp.Header.Revision); err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	keyOf := func(part int) string {
		for i := 0; ; i++ {
			if k := string(rune('a'+i%26)) + string(rune('a'+i/26)); b.PartitionOf(k) == part {
				return k
			}
		}
	}
	groupStarted := func(part int) {
		t.Helper()
		for !h.Holds(replica.BucketGroup("b", uuid, part)) {
			select {
			case <-ctx.Done():
				t.Fatalf("the follower never started partition %d's group", part)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	// The first map: partition 2 this node's, the others n2's. The
	// follower's first application starts partition 2's group.
	putMap("n2", "n2", "n1", "n2")
	if err := repl.AttachBucket(ctx, b); err != nil {
		t.Fatal(err)
	}
	groupStarted(2)
	key := keyOf(1)
	if r, err := rt.httpRoute(ctx, "b", key); err != nil || r.Node != "n2" || r.Addr != addr["n2"] {
		t.Fatalf("the route of a partition n2 leads: %+v, %v", r, err)
	}

	// The second map: partition 1 moves to n3, partition 0 to this node.
	rev := putMap("n1", "n3", "n1", "n2")
	if r, err := rt.httpRoute(ctx, "b", key); err != nil || r.Node != "n3" || r.Addr != addr["n3"] {
		t.Fatalf("the route right after the mirror holds the new map: %+v, %v; want n3 at %s", r, err, addr["n3"])
	}
	if top, err := rt.topology(ctx, "b"); err != nil || top == nil || top.Rev != rev {
		t.Fatalf("the KV configuration right after the mirror holds the new map: %+v, %v; want revision %d", top, err, rev)
	}
	groupStarted(0)
}

// followerFixture is a one-node cluster member's replication (the map
// follower) over a Raft host and an engine holding bucket b (4 partitions),
// its safety-net re-apply an hour apart: what a test of the follower drives
// by hand. Everything closes when the test ends.
func followerFixture(t *testing.T, ctx context.Context, node *cluster.Node, mirror *cluster.TopologyMirror) (*engine.Engine, *engine.Bucket, *replica.Host, *replication) {
	t.Helper()
	dir := t.TempDir()
	h, err := replica.Open(replica.Options{Dir: filepath.Join(dir, "raft"), Node: "n1", Listen: "127.0.0.1:0", Resolver: noPeers{}})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(filepath.Join(dir, "data"), &engine.Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		h.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		h.Close()
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	repl := &replication{n: node, h: h, mirror: mirror, retry: time.Hour, logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ctx: rctx, cancel: rcancel, deleted: map[string]bool{}, following: map[*engine.Bucket]*following{}}
	t.Cleanup(func() { repl.Close() })
	return eng, b, h, repl
}
