package cluster

import (
	"slices"
	"testing"
)

// addInPasses calls AddCopies with step until it changes nothing,
// checking each pass's bound, that preferred leaders and existing voters
// stay, and the epochs; it returns the passes that changed something.
func addInPasses(t *testing.T, parts []Partition, copies int, up []string, step int) int {
	t.Helper()
	for passes := 0; passes <= len(parts); passes++ {
		before := clonePartitions(parts)
		changed := AddCopies(parts, copies, up, up, nil, step)
		if len(changed) == 0 {
			return passes
		}
		if step > 0 && len(changed) > step {
			t.Fatalf("a pass of step %d changed %d partitions", step, len(changed))
		}
		for i := range parts {
			was, now := before[i], parts[i]
			if now.Leader != was.Leader || !slices.Equal(now.Voters[:min(len(was.Voters), len(now.Voters))], was.Voters) {
				t.Fatalf("partition %d: %+v -> %+v: a voter or the preferred leader moved", i, was, now)
			}
			c := slices.Contains(changed, i)
			same := slices.Equal(was.Voters, now.Voters) && was.Degraded == now.Degraded
			if c == same || now.Epoch != was.Epoch+map[bool]uint64{true: 1}[c] {
				t.Fatalf("partition %d: %+v -> %+v, reported changed %v", i, was, now, c)
			}
		}
	}
	t.Fatal("AddCopies never settled")
	return 0
}

func clonePartitions(parts []Partition) []Partition {
	out := slices.Clone(parts)
	for i := range out {
		out[i].Voters = slices.Clone(out[i].Voters)
	}
	return out
}

// copyCounts is how many copies each node holds.
func copyCounts(parts []Partition) map[string]int {
	c := map[string]int{}
	for _, p := range parts {
		for _, v := range p.Voters {
			c[v]++
		}
	}
	return c
}

// A replicaNumber raised from 0 to 1 to 2 on four nodes: every partition
// gains a voter each time, in steps of at most the limit, keeps its
// voters and preferred leader, and the copies stay balanced over the
// nodes, as a placement of that many copies would be.
func TestAddCopiesBalanced(t *testing.T) {
	nodes := names(4)
	parts := Place(nodes, NumPartitions, 1)
	for _, copies := range []int{2, 3} {
		if n := addInPasses(t, parts, copies, nodes, 64); n != NumPartitions/64 {
			t.Errorf("raising to %d copies took %d passes of 64, want %d", copies, n, NumPartitions/64)
		}
		checkMap(t, parts, nodes, copies)
		if lo, hi := spread(nodes, copyCounts(parts)); hi-lo > 1 {
			t.Errorf("at %d copies, copies per node range %d..%d", copies, lo, hi)
		}
		checkEven(t, parts)
	}
}

// Wanting more copies than there are nodes: each partition gets a voter
// on every node and is marked degraded; a node that comes later takes the
// missing copies (Recover then clears the marks, every voter up).
func TestAddCopiesShortOfNodes(t *testing.T) {
	two := names(2)
	parts := Place(two, 64, 2)
	addInPasses(t, parts, 3, two, 0)
	checkMap(t, parts, two, 3)
	three := names(3)
	addInPasses(t, parts, 3, three, 0)
	if rec := Recover(parts, 3, three); len(rec) != len(parts) {
		t.Fatalf("Recover cleared %d of %d partitions", len(rec), len(parts))
	}
	checkMap(t, parts, three, 3)
}

// Only settled nodes that are up take copies, and partitions held back
// by skip are left alone.
func TestAddCopiesSettledAndSkip(t *testing.T) {
	nodes := names(4)
	parts := Place(nodes[:3], 32, 2)
	skip := func(p int) bool { return p%2 == 1 }
	// n4 is up but not settled; n3 settled but not up.
	changed := AddCopies(parts, 3, []string{"n1", "n2", "n4"}, []string{"n1", "n2", "n3"}, skip, 0)
	for _, i := range changed {
		if skip(i) {
			t.Fatalf("partition %d was held back but changed", i)
		}
		for _, v := range parts[i].Voters[2:] {
			if v != "n1" && v != "n2" {
				t.Fatalf("partition %d got a copy on %s", i, v)
			}
		}
	}
	for i, p := range parts {
		if skip(i) && (len(p.Voters) != 2 || p.Epoch != 1) {
			t.Fatalf("held-back partition %d changed: %+v", i, p)
		}
	}
}
