package cluster

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// A shed node leaves an entry's Shed list only when a leader reports it
// gone from its applied configuration while the entry has that epoch:
// not before (no report), not on a report of an older epoch (it may have
// been made a voter and shed again since), and a report naming a voter
// changes nothing. Each entry changed gets one epoch more, and the same
// reports change nothing again.
func TestClearShed(t *testing.T) {
	nodes := names(3)
	parts := Place(nodes, 32, 3)
	RemoveCopies(parts, 1, nodes, nil, nil, nil, 0) // every partition sheds two nodes
	before := clonePartitions(parts)
	for i, p := range before {
		if len(p.Shed) != 2 {
			t.Fatalf("partition %d after RemoveCopies: %+v", i, p)
		}
	}
	// By partition number mod 4: its first shed node gone at its epoch;
	// both gone; the first gone at an older epoch; its leader "gone".
	left := func(p int, epoch uint64, node string) bool {
		was := before[p]
		switch p % 4 {
		case 0:
			return epoch == was.Epoch && node == was.Shed[0]
		case 1:
			return epoch == was.Epoch
		case 2:
			return epoch == was.Epoch-1 && node == was.Shed[0]
		default:
			return node == was.Leader
		}
	}
	changed := ClearShed(parts, left)
	for i, p := range parts {
		was := before[i]
		var want []string
		switch i % 4 {
		case 0:
			want = was.Shed[1:]
		case 1:
		default:
			want = was.Shed
		}
		if !slices.Equal(p.Shed, want) || !slices.Equal(p.Voters, was.Voters) || p.Leader != was.Leader {
			t.Fatalf("partition %d: %+v -> %+v, want shed %v", i, was, p, want)
		}
		c := i%4 < 2
		if slices.Contains(changed, i) != c || p.Epoch != was.Epoch+map[bool]uint64{true: 1}[c] {
			t.Fatalf("partition %d: %+v -> %+v, reported changed %v", i, was, p, slices.Contains(changed, i))
		}
	}
	if !slices.IsSorted(changed) || len(changed) != len(parts)/2 {
		t.Fatalf("changed %v", changed)
	}
	if again := ClearShed(parts, left); len(again) != 0 {
		t.Fatalf("the same reports changed %v again", again)
	}
}

// The orchestrator takes a shed node out of its partition's entry once a
// node's ShedLeft report names it with the entry's epoch and the bucket's
// incarnation, bumping the epoch: a report of an older epoch or another
// incarnation changes nothing (those entries are written unchanged in the
// same pass), and a report counts whoever published it (a configuration
// applied is committed: the fact stays true after its reporter left).
func TestOrchestratorClearsShedOnReport(t *testing.T) {
	ctx, cli := oneNode(t)
	if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.BucketSettings{Name: "b", UUID: "u-b", NumVBuckets: 8, ReplicaNumber: engine.Replicas(0)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bucket placed", func() (bool, string) {
		m, _, err := ReadMap(ctx, cli, "b")
		return err == nil && m != nil, fmt.Sprint(err)
	})
	// As a lowering from three copies left it on a cluster whose other
	// nodes are not registered here: every partition sheds n2 and n3.
	m := &PartitionMap{Bucket: "b", UUID: "u-b", Copies: 1}
	for range 8 {
		m.Partitions = append(m.Partitions, Partition{Voters: []string{"n1"}, Leader: "n1", Epoch: 5, Shed: []string{"n2", "n3"}})
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, mapsPrefix+"b", string(data)); err != nil {
		t.Fatal(err)
	}
	err = NewShedLeftPublisher(cli, "n1").Publish(ctx, []ShedLeft{
		{Bucket: "b", UUID: "u-b", Partition: 0, Epoch: 5, Nodes: []string{"n2"}},
		{Bucket: "b", UUID: "u-b", Partition: 1, Epoch: 4, Nodes: []string{"n2"}},       // older
		{Bucket: "b", UUID: "u-old", Partition: 2, Epoch: 5, Nodes: []string{"n2"}},     // another incarnation
		{Bucket: "b", UUID: "u-b", Partition: 3, Epoch: 5, Nodes: []string{"n3", "n2"}}, // both
	})
	if err != nil {
		t.Fatal(err)
	}
	want := func(p int, epoch uint64, shed ...string) func(*PartitionMap) error {
		return func(m *PartitionMap) error {
			if got := m.Partitions[p]; got.Epoch != epoch || !slices.Equal(got.Shed, shed) {
				return fmt.Errorf("partition %d: %+v, want epoch %d, shed %v", p, got, epoch, shed)
			}
			return nil
		}
	}
	mapIs := func(what string, checks ...func(*PartitionMap) error) {
		t.Helper()
		eventually(t, what, func() (bool, string) {
			m, _, err := ReadMap(ctx, cli, "b")
			if err != nil || m == nil {
				return false, fmt.Sprint(err)
			}
			for _, c := range checks {
				if err := c(m); err != nil {
					return false, err.Error()
				}
			}
			return true, ""
		})
	}
	mapIs("partitions 0 and 3 cleared of the nodes reported gone",
		want(0, 6, "n3"), want(1, 5, "n2", "n3"), want(2, 5, "n2", "n3"), want(3, 6), want(4, 5, "n2", "n3"))
	// `mayfly cluster status` shows what each node is still shed from.
	st, err := ReadStatus(ctx, cli, nil)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := st.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"shed: n2 leaving 6 partitions (replicaNumber lowered): 1-2,4-7",
		"shed: n3 leaving 7 partitions (replicaNumber lowered): 0-2,4-7",
	} {
		if !strings.Contains(text.String(), w) {
			t.Errorf("status text lacks %q:\n%s", w, text.String())
		}
	}

	// From a node that is not up: it counts. Partition 0's report (epoch
	// 5, now old) changes it no more.
	if err := NewShedLeftPublisher(cli, "n9").Publish(ctx, []ShedLeft{{Bucket: "b", UUID: "u-b", Partition: 1, Epoch: 5, Nodes: []string{"n3"}}}); err != nil {
		t.Fatal(err)
	}
	mapIs("partition 1 cleared of n3", want(0, 6, "n3"), want(1, 6, "n2"), want(2, 5, "n2", "n3"), want(3, 6))
}
