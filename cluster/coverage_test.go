package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestMoveCoverageSwitchesOnlyAfterCatchUp: a partition whose coverer is
// down gets a next coverer (its leader when up, else the least loaded up
// voter) while the dead coverer stays named; the switch comes only with a
// report of the next coverer made at a revision after it was named that
// lists the partition; a stale report (an earlier revision) or one
// without the partition switches nothing.
func TestMoveCoverageSwitchesOnlyAfterCatchUp(t *testing.T) {
	m := &PartitionMap{Bucket: "b", Copies: 3, Partitions: Place([]string{"n1", "n2", "n3"}, 12, 3)}
	c := initialCoverage(m)
	for p, e := range c.Partitions {
		if e.Coverer != m.Partitions[p].Leader || e.Next != "" {
			t.Fatalf("initial coverage of %d: %+v, leader %s", p, e, m.Partitions[p].Leader)
		}
	}
	all := func(string) bool { return true }
	if n := moveCoverage(c, 10, m, all, all, nil); n != 0 {
		t.Fatalf("everyone up and covering its leaderships: %d entries changed", n)
	}

	upNot1 := func(n string) bool { return n != "n1" }
	n := moveCoverage(c, 10, m, upNot1, upNot1, nil)
	var moved []int
	for p, e := range c.Partitions {
		if m.Partitions[p].Leader != "n1" {
			if e.Next != "" || e.Coverer != m.Partitions[p].Leader {
				t.Fatalf("partition %d not n1's moved: %+v", p, e)
			}
			continue
		}
		moved = append(moved, p)
		if e.Coverer != "n1" || e.Next == "" || e.Next == "n1" || e.NextAfter != 10 {
			t.Fatalf("partition %d of a dead coverer: %+v; want n1 still coverer, a next named after 10", p, e)
		}
	}
	if n != len(moved) || n == 0 {
		t.Fatalf("%d entries changed, %d partitions were n1's", n, len(moved))
	}
	loads := map[string]int{}
	for _, e := range c.Partitions {
		loads[e.Coverer]++
		loads[e.Next]++
	}
	if d := loads["n2"] - loads["n3"]; d > 1 || d < -1 {
		t.Fatalf("next coverers unbalanced: %v", loads)
	}

	// Not caught up: a report from before the naming, and one at a later
	// revision that lists other partitions only, switch nothing.
	p0 := moved[0]
	next := c.Partitions[p0].Next
	stale := map[string]CoverageReady{next: {Rev: 10, Partitions: moved}}
	if n := moveCoverage(c, 11, m, upNot1, upNot1, stale); n != 0 {
		t.Fatalf("a report at the revision before the naming switched %d entries", n)
	}
	other := map[string]CoverageReady{next: {Rev: 11, Partitions: []int{len(m.Partitions) + 5}}}
	if n := moveCoverage(c, 11, m, upNot1, upNot1, other); n != 0 || c.Partitions[p0].Coverer != "n1" {
		t.Fatalf("a report without the partition switched %d entries: %+v", n, c.Partitions[p0])
	}

	// Caught up: the next coverer's partitions switch, the other's stay.
	var its []int
	for _, p := range moved {
		if c.Partitions[p].Next == next {
			its = append(its, p)
		}
	}
	ready := map[string]CoverageReady{next: {Rev: 11, Partitions: its}}
	if n := moveCoverage(c, 11, m, upNot1, upNot1, ready); n != len(its) {
		t.Fatalf("caught up on %d partitions: %d switched", len(its), n)
	}
	for _, p := range moved {
		e := c.Partitions[p]
		if slices.Contains(its, p) != (e.Coverer == next && e.Next == "") {
			t.Fatalf("partition %d after %s's report: %+v", p, next, e)
		}
	}

	// n1 back and settled: coverage goes back to the preferred leaders,
	// through the same catch-up.
	if n := moveCoverage(c, 12, m, all, all, nil); n == 0 {
		t.Fatal("n1 back and settled: nothing moved back to it")
	}
	for _, p := range its {
		if e := c.Partitions[p]; e.Coverer != next || e.Next != "n1" || e.NextAfter != 12 {
			t.Fatalf("partition %d moving back: %+v", p, e)
		}
	}
}

// TestMoveCoverageWithoutUpVoter: with every voter of a partition down its
// coverer stays named (its share fails as node_down) and no next coverer
// is named; a partition without a copy (no leader) gets none either.
func TestMoveCoverageWithoutUpVoter(t *testing.T) {
	m := &PartitionMap{Bucket: "b", Copies: 1, Partitions: Place([]string{"n1", "n2"}, 4, 1)}
	m.Partitions[3] = Partition{}
	c := initialCoverage(m)
	upNot1 := func(n string) bool { return n != "n1" }
	moveCoverage(c, 5, m, upNot1, upNot1, nil)
	for p, e := range c.Partitions {
		switch {
		case p == 3:
			if e != (Coverage{}) {
				t.Fatalf("a partition without a copy: %+v", e)
			}
		case e.Next != "" || e.Coverer != m.Partitions[p].Leader:
			t.Fatalf("partition %d whose only copy is on %s: %+v", p, m.Partitions[p].Leader, e)
		}
	}
}

// TestCoverageSwitchInEtcd: on four nodes, the orchestrator writes the
// bucket's coverage map with the preferred leaders; once n4 is down it
// names next coverers for n4's partitions and keeps n4 named as their
// coverer, through the failover of its copies, while no next coverer has
// reported; a report at the revision the naming was conditioned on (made
// before it) switches nothing, even once another node's report switched
// that node's partitions; a report at a later revision switches the
// reporter's partitions, in the map a TopologyMirror follows.
func TestCoverageSwitchInEtcd(t *testing.T) {
	ctx := context.Background()
	nodes, _, _ := startCluster(t, ctx, 4)
	defer closeAll(nodes)
	cli := nodes[0].Client()
	mirror := NewTopologyMirror(cli)
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	go mirror.Run(mctx)
	if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.DefaultBucketSettings("b")}); err != nil {
		t.Fatal(err)
	}
	var c *CoverageMap
	eventually(t, "the coverage map written", func() (bool, string) {
		var err error
		c, _, err = ReadCoverage(ctx, cli, "b")
		return err == nil && c != nil, fmt.Sprint(err)
	})
	m, _, err := ReadMap(ctx, cli, "b")
	if err != nil {
		t.Fatal(err)
	}
	var n4s []int
	for p, e := range c.Partitions {
		if e.Coverer != m.Partitions[p].Leader || e.Next != "" {
			t.Fatalf("partition %d: %+v, leader %s", p, e, m.Partitions[p].Leader)
		}
		if e.Coverer == "n4" {
			n4s = append(n4s, p)
		}
	}
	if len(n4s) == 0 {
		t.Fatal("n4 covers nothing")
	}

	if err := nodes[3].stop(false); err != nil {
		t.Logf("stopping n4: %v", err)
	}
	nodes[3] = nil
	var rev int64
	eventually(t, "next coverers named for n4's partitions, and its copies failed over", func() (bool, string) {
		var err error
		if c, rev, err = ReadCoverage(ctx, cli, "b"); err != nil {
			return false, err.Error()
		}
		m, _, err := ReadMap(ctx, cli, "b")
		if err != nil {
			return false, err.Error()
		}
		for _, p := range n4s {
			if c.Partitions[p].Next == "" || slices.Contains(m.Partitions[p].Voters, "n4") {
				return false, fmt.Sprintf("partition %d: %+v, voters %v", p, c.Partitions[p], m.Partitions[p].Voters)
			}
		}
		return true, ""
	})
	byNext := map[string][]int{}
	for _, p := range n4s {
		e := c.Partitions[p]
		if e.Coverer != "n4" {
			t.Fatalf("partition %d switched to %s with no report: %+v", p, e.Coverer, e)
		}
		byNext[e.Next] = append(byNext[e.Next], p)
	}
	if len(byNext) < 2 {
		t.Fatalf("n4's partitions all go to one node: %v", byNext)
	}
	names := slices.Sorted(maps.Keys(byNext))
	early, ready := names[0], names[1]
	// early reports at the revision the naming was conditioned on: too
	// early to count; ready reports at the current revision.
	after := c.Partitions[byNext[early][0]].NextAfter
	if err := PublishCoverageReady(ctx, cli, "b", early, CoverageReady{Rev: after, Partitions: byNext[early]}); err != nil {
		t.Fatal(err)
	}
	if err := PublishCoverageReady(ctx, cli, "b", ready, CoverageReady{Rev: rev, Partitions: byNext[ready]}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ready+"'s partitions switched, in the mirror", func() (bool, string) {
		mc, _, _, err := mirror.Coverage("b")
		if err != nil || mc == nil {
			return false, fmt.Sprint(err)
		}
		for _, p := range byNext[ready] {
			if e := mc.Partitions[p]; e.Coverer != ready { // (coverage may then move on to a leader that settled)
				return false, fmt.Sprintf("partition %d: %+v", p, e)
			}
		}
		c = mc
		return true, ""
	})
	for _, p := range byNext[early] {
		if e := c.Partitions[p]; e.Coverer != "n4" || e.Next != early {
			t.Fatalf("partition %d switched on a report made before %s was named: %+v", p, early, e)
		}
	}
	_, rev, err = ReadCoverage(ctx, cli, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := PublishCoverageReady(ctx, cli, "b", early, CoverageReady{Rev: rev, Partitions: byNext[early]}); err != nil {
		t.Fatal(err)
	}
	eventually(t, early+"'s partitions switched once it reported in time", func() (bool, string) {
		c, _, err := ReadCoverage(ctx, cli, "b")
		if err != nil {
			return false, err.Error()
		}
		for _, p := range byNext[early] {
			if e := c.Partitions[p]; e.Coverer != early {
				return false, fmt.Sprintf("partition %d: %+v", p, e)
			}
		}
		return true, ""
	})
}
