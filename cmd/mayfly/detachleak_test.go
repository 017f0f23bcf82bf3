package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/replica"
)

// TestDeletedBucketLeavesNothingListed: deleting a bucket on a cluster
// node (DetachBucket, deleted) removes its groups and forgets what the map
// follower recorded of them (replication.listed, an entry per group this
// node ran: 1024 per bucket), so that creating and deleting buckets does
// not grow the node's memory; before, the entries stayed until the
// process ended.
func TestDeletedBucketLeavesNothingListed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, mirror := oneNodeCluster(t, ctx)
	_, b, h, repl := followerFixture(t, ctx, node, mirror)
	uuid := b.Settings().UUID
	if err := cluster.DefineBucket(ctx, node.Client(), cluster.BucketDef{BucketSettings: b.Settings()}); err != nil {
		t.Fatal(err)
	}
	// The orchestrator places 1024 partitions; the test's bucket has 4:
	// its map replaces the placement (this node the only voter of each).
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
	m := &cluster.PartitionMap{Bucket: "b", UUID: uuid, Copies: 1}
	for range 4 {
		m.Partitions = append(m.Partitions, cluster.Partition{Leader: "n1", Voters: []string{"n1"}, Epoch: 1})
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := node.Client().Put(ctx, "/mayfly/maps/b", string(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := mirror.WaitMaps(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if err := repl.AttachBucket(ctx, b); err != nil {
		t.Fatal(err)
	}
	listed := func() int {
		repl.mu.Lock()
		defer repl.mu.Unlock()
		return len(repl.listed)
	}
	for p := range 4 {
		for !h.Holds(replica.BucketGroup("b", uuid, p)) || listed() < p+1 {
			select {
			case <-ctx.Done():
				t.Fatalf("partition %d's group never started (%d listed)", p, listed())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	if err := repl.DetachBucket(ctx, b, true); err != nil {
		t.Fatal(err)
	}
	for p := range 4 {
		if h.Holds(replica.BucketGroup("b", uuid, p)) {
			t.Fatalf("partition %d's group still runs after the bucket was deleted", p)
		}
	}
	if n := listed(); n != 0 {
		t.Fatalf("%d groups of the deleted bucket still listed; want none", n)
	}
}
