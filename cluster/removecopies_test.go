package cluster

import (
	"slices"
	"testing"
)

// removeInPasses calls RemoveCopies with step until it changes nothing,
// checking each pass: its bound, that the preferred leader stays, that
// the voters left are old ones and those taken out are added to Shed, and
// the epochs. It returns the passes that changed something.
func removeInPasses(t *testing.T, parts []Partition, copies int, up []string, step int) int {
	t.Helper()
	for passes := 0; passes <= len(parts); passes++ {
		before := clonePartitions(parts)
		changed := RemoveCopies(parts, copies, up, nil, nil, nil, step)
		if len(changed) == 0 {
			return passes
		}
		if step > 0 && len(changed) > step {
			t.Fatalf("a pass of step %d changed %d partitions", step, len(changed))
		}
		if !slices.IsSorted(changed) {
			t.Fatalf("changed partitions not sorted: %v", changed)
		}
		for i := range parts {
			was, now := before[i], parts[i]
			c := slices.Contains(changed, i)
			if !c {
				if now.Epoch != was.Epoch || !slices.Equal(now.Voters, was.Voters) || !slices.Equal(now.Shed, was.Shed) {
					t.Fatalf("partition %d: %+v -> %+v, not reported changed", i, was, now)
				}
				continue
			}
			if now.Epoch != was.Epoch+1 || now.Leader != was.Leader || len(now.Voters) != copies {
				t.Fatalf("partition %d: %+v -> %+v", i, was, now)
			}
			var out []string
			for _, v := range was.Voters {
				if !slices.Contains(now.Voters, v) {
					out = append(out, v)
				}
			}
			if len(out) != len(was.Voters)-len(now.Voters) || !slices.Equal(now.Shed, slices.Concat(was.Shed, out)) {
				t.Fatalf("partition %d: %+v -> %+v: the voters taken out are not exactly the ones added to Shed", i, was, now)
			}
		}
	}
	t.Fatal("RemoveCopies never settled")
	return 0
}

// A replicaNumber lowered from 2 to 1 to 0 on four nodes: every partition
// loses a voter each time (never its preferred leader), in steps of at
// most the limit, and the copies stay balanced over the nodes; at one copy
// each node holds the partitions it leads, and every voter taken out is
// shed.
func TestRemoveCopiesBalanced(t *testing.T) {
	nodes := names(4)
	parts := Place(nodes, NumPartitions, 3)
	leads := leadCounts(parts)
	for _, copies := range []int{2, 1} {
		if n := removeInPasses(t, parts, copies, nodes, 64); n != NumPartitions/64 {
			t.Errorf("lowering to %d copies took %d passes of 64, want %d", copies, n, NumPartitions/64)
		}
		checkMap(t, parts, nodes, copies)
		if lo, hi := spread(nodes, copyCounts(parts)); hi-lo > 1 {
			t.Errorf("at %d copies, copies per node range %d..%d", copies, lo, hi)
		}
	}
	for i, p := range parts {
		if len(p.Shed) != 2 || slices.Contains(p.Shed, p.Leader) {
			t.Fatalf("partition %d at one copy: %+v, want its two other voters shed", i, p)
		}
	}
	if got := leadCounts(parts); !sameCounts(got, copyCounts(parts)) || !sameCounts(got, leads) {
		t.Errorf("at one copy, leads %v, copies %v, leads placed %v", got, copyCounts(parts), leads)
	}
	// Raised again: a shed node made a voter again is no longer shed.
	addInPasses(t, parts, 3, nodes, 0)
	for i, p := range parts {
		for _, s := range p.Shed {
			if slices.Contains(p.Voters, s) {
				t.Fatalf("partition %d: %s is a voter and shed: %+v", i, s, p)
			}
		}
	}
}

func sameCounts(a, b map[string]int) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// The three-node cluster of the process tests: from three copies to one,
// each node keeps the partitions it leads.
func TestRemoveCopiesThreeNodes(t *testing.T) {
	nodes := names(3)
	parts := Place(nodes, 64, 3)
	removeInPasses(t, parts, 1, nodes, 0)
	checkMap(t, parts, nodes, 1)
	if lo, hi := spread(nodes, copyCounts(parts)); hi-lo > 1 {
		t.Errorf("copies per node range %d..%d", lo, hi)
	}
}

// A partition held back by skip, or with a voter on a node that is down,
// keeps its voters; the others lose theirs. Once that node is failed over
// (down for the failover timeout), its voters go first, not shed (it
// drops its copy when it returns, as a failed-over node does), except
// where the voters up are no majority.
func TestRemoveCopiesSkipAndDown(t *testing.T) {
	nodes := names(4)
	parts := Place(nodes, 32, 3)
	skip := func(p int) bool { return p%4 == 1 }
	up := []string{"n1", "n2", "n3"} // n4 is down
	changed := RemoveCopies(parts, 2, up, nil, skip, nil, 0)
	for i, p := range parts {
		held := skip(i) || slices.Contains(p.Voters, "n4")
		if held == slices.Contains(changed, i) {
			t.Fatalf("partition %d (held back %v): changed %v: %+v", i, held, !held, p)
		}
		if held && (len(p.Voters) != 3 || p.Epoch != 1 || p.Shed != nil) {
			t.Fatalf("held-back partition %d changed: %+v", i, p)
		}
		if !held && len(p.Voters) != 2 {
			t.Fatalf("partition %d: %+v", i, p)
		}
	}
	if len(changed) == 0 {
		t.Fatal("nothing changed")
	}

	// n4 failed over (but the map still lists it: Failover found no
	// spare), and n3 down: where n3 and n4 are both voters, only the
	// leader is up, and nothing moves.
	parts = Place(nodes, 32, 3)
	before := clonePartitions(parts)
	changed = RemoveCopies(parts, 1, []string{"n1", "n2"}, []string{"n3", "n4"}, nil, nil, 0)
	for i, p := range parts {
		was := before[i]
		if !slices.Contains(was.Voters, "n4") || slices.Contains(was.Voters, "n3") || !slices.Contains([]string{"n1", "n2"}, was.Leader) {
			continue
		}
		if !slices.Contains(changed, i) || len(p.Voters) != 1 || p.Voters[0] != was.Leader {
			t.Fatalf("partition %d: %+v -> %+v, changed %v", i, was, p, slices.Contains(changed, i))
		}
		if slices.Contains(p.Shed, "n4") || len(p.Shed) != 1 {
			t.Fatalf("partition %d: %+v -> %+v: want the up voter shed, the failed one not", i, was, p)
		}
	}
	for i, p := range parts {
		if slices.Contains(before[i].Voters, "n3") && slices.Contains(before[i].Voters, "n4") && slices.Contains(changed, i) {
			t.Fatalf("partition %d with one voter up of three changed: %+v", i, p)
		}
	}
	// To two copies: a failed voter goes before any up one.
	parts = Place(nodes, 32, 3)
	before = clonePartitions(parts)
	changed = RemoveCopies(parts, 2, nodes[:3], []string{"n4"}, nil, nil, 0)
	for i, p := range parts {
		if before[i].Leader == "n4" { // Failover moves a leadership off a node down first
			if slices.Contains(changed, i) {
				t.Fatalf("partition %d led by a node down changed: %+v", i, p)
			}
			continue
		}
		if slices.Contains(before[i].Voters, "n4") && (!slices.Contains(changed, i) || slices.Contains(p.Voters, "n4") || p.Shed != nil) {
			t.Fatalf("partition %d: %+v -> %+v", i, before[i], p)
		}
	}
}

// A shed node failed over leaves the Shed lists of the partitions whose
// other members up are a majority of their members (the group can commit
// the change removing it without it); elsewhere it stays shed.
func TestFailoverUnshedsADownNode(t *testing.T) {
	nodes := names(3)
	parts := Place(nodes, 64, 3)
	RemoveCopies(parts, 1, nodes, nil, nil, nil, 0)
	before := clonePartitions(parts)
	// n3 down alone: every partition shedding it has two of three members up.
	changed := Failover(parts, "n3", []string{"n1", "n2"})
	for i, p := range parts {
		was := before[i]
		if slices.Contains(was.Voters, "n3") {
			continue // failed over as a voter (TestFailover*)
		}
		had := slices.Contains(was.Shed, "n3")
		if had != slices.Contains(changed, i) || slices.Contains(p.Shed, "n3") {
			t.Fatalf("partition %d: %+v -> %+v", i, was, p)
		}
		if had && (p.Epoch != was.Epoch+1 || len(p.Shed) != 1) || !had && p.Epoch != was.Epoch {
			t.Fatalf("partition %d: %+v -> %+v", i, was, p)
		}
	}
	// n2 and n3 down: n1 alone is up of each partition's three members,
	// so n2 stays shed wherever it is.
	parts = Place(nodes, 64, 3)
	RemoveCopies(parts, 1, nodes, nil, nil, nil, 0)
	before = clonePartitions(parts)
	Failover(parts, "n2", []string{"n1"})
	for i, p := range parts {
		if slices.Contains(before[i].Shed, "n2") && (!slices.Contains(p.Shed, "n2") || p.Epoch != before[i].Epoch) {
			t.Fatalf("partition %d: %+v -> %+v: unshed without a majority up", i, before[i], p)
		}
	}
}
