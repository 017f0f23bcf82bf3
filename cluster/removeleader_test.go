package cluster

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A lowering that keeps more than one copy keeps first the copy of the
// node whose Raft group leads the partition, as reported, and makes it the
// preferred leader: a preferred leader cut off from another copy, kept
// beside it, would leave two voters that could elect no leader, whereas
// the group's leader reaches every copy not lagging. A report naming a
// node down, or one that is not a voter, counts for nothing (the preferred
// leader's copy is kept, as without a report), and the copies kept beside
// the leader are still the balanced choice. A lowering to one copy keeps
// the preferred leader's, reports or not: no pair is left to be cut off,
// and the copies stay spread as placed.
func TestRemoveCopiesKeepsTheRaftLeader(t *testing.T) {
	nodes := names(4)
	for _, copies := range []int{1, 2} {
		parts := Place(nodes, 64, 3)
		before := clonePartitions(parts)
		// By case: another voter (up) leads; n4 (down) claims it; a node
		// that is no voter claims it; no report. (Place's voters repeat
		// every 4 partitions: the case changes every 4.)
		what := func(i int) int { return i / 4 % 4 }
		leaders := make([]string, len(parts))
		for i, p := range parts {
			switch what(i) {
			case 0:
				for _, v := range p.Voters {
					if v != p.Leader && v != "n4" {
						leaders[i] = v
						break
					}
				}
			case 1:
				leaders[i] = "n4"
			case 2:
				leaders[i] = slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return slices.Contains(p.Voters, n) })[0]
			}
		}
		up := nodes[:3] // n4 down, and failed over: its voters go first
		changed := RemoveCopies(parts, copies, up, []string{"n4"}, nil, leaders, 0)
		for i, p := range parts {
			was := before[i]
			want := was.Leader
			if what(i) == 0 && copies > 1 {
				want = leaders[i]
			}
			if want == "n4" { // the copy to keep is down: nothing moves
				if slices.Contains(changed, i) || !slices.Equal(p.Voters, was.Voters) {
					t.Fatalf("%d copies: partition %d, its copy to keep down, changed: %+v -> %+v", copies, i, was, p)
				}
				continue
			}
			if !slices.Contains(changed, i) || p.Leader != want || !slices.Contains(p.Voters, want) || len(p.Voters) != copies {
				t.Fatalf("%d copies: partition %d (Raft leader %q): %+v -> %+v, want %s kept and preferred", copies, i, leaders[i], was, p, want)
			}
			if p.Epoch != was.Epoch+1 {
				t.Fatalf("partition %d: epoch %d -> %d", i, was.Epoch, p.Epoch)
			}
			for _, v := range was.Voters {
				if gone := !slices.Contains(p.Voters, v); gone != (slices.Contains(p.Shed, v) || v == "n4") {
					t.Fatalf("partition %d: %+v -> %+v: voter %s", i, was, p, v)
				}
			}
		}
	}
}

// The orchestrator lowering a bucket to two copies reads the nodes'
// LeadRecords: a partition whose group a node up reports leading keeps
// that node's copy, preferred leader or not; one no record names keeps its
// preferred leader's; a record of a node down counts for nothing.
func TestOrchestratorLowersToTheRaftLeader(t *testing.T) {
	ctx, cli := oneNode(t)
	for _, n := range []string{"n2", "n3"} { // up, as far as the orchestrator reads
		data, err := json.Marshal(NodeInfo{Name: n, Cluster: "127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, nodesPrefix+n, string(data)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := PublishLeads(ctx, cli, "b", "u-b", "n3", []int{0, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := PublishLeads(ctx, cli, "b", "u-b", "n4", []int{4}); err != nil { // n4 is not up
		t.Fatal(err)
	}
	// Three copies of each partition, preferred leader n2, being lowered to
	// two: the map and the definition are written in one transaction, so
	// that the orchestrator neither places the bucket itself (a definition
	// without a map) nor removes the map as a deleted bucket's (a map
	// without a definition).
	m := &PartitionMap{Bucket: "b", UUID: "u-b", Copies: 3}
	for range 8 {
		m.Partitions = append(m.Partitions, Partition{Voters: []string{"n1", "n2", "n3"}, Leader: "n2", Epoch: 5})
	}
	mapData, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	defData, err := json.Marshal(BucketDef{BucketSettings: engine.BucketSettings{Name: "b", UUID: "u-b", NumVBuckets: 8, ReplicaNumber: engine.Replicas(1)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut(mapsPrefix+"b", string(mapData)), clientv3.OpPut(bucketsPrefix+"b", string(defData))).Commit(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bucket lowered to its Raft leaders' copies", func() (bool, string) {
		m, _, err := ReadMap(ctx, cli, "b")
		if err != nil || m == nil {
			return false, fmt.Sprint(err)
		}
		for i, p := range m.Partitions {
			want := "n2"
			if i < 4 {
				want = "n3"
			}
			if len(p.Voters) != 2 || !slices.Contains(p.Voters, want) || p.Leader != want || len(p.Shed) != 1 || slices.Contains(p.Shed, want) {
				return false, fmt.Sprintf("partition %d: %+v, want %s kept, preferred, and one other", i, p, want)
			}
		}
		return true, ""
	})
}
