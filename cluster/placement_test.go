package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%d", i+1)
	}
	return out
}

// spread is the least and most of counts over nodes.
func spread(nodes []string, counts map[string]int) (lo, hi int) {
	lo, hi = counts[nodes[0]], counts[nodes[0]]
	for _, n := range nodes {
		lo, hi = min(lo, counts[n]), max(hi, counts[n])
	}
	return lo, hi
}

// checkMap asserts the properties every placed map has: distinct voters
// on known nodes, a leader among them, as many voters as wanted or nodes.
func checkMap(t *testing.T, parts []Partition, nodes []string, copies int) {
	t.Helper()
	for i, p := range parts {
		want := min(copies, len(nodes))
		if len(p.Voters) != want {
			t.Fatalf("partition %d has %d voters, want %d", i, len(p.Voters), want)
		}
		if len(slices.Compact(slices.Sorted(slices.Values(p.Voters)))) != len(p.Voters) {
			t.Fatalf("partition %d voters %v not distinct", i, p.Voters)
		}
		for _, v := range p.Voters {
			if !slices.Contains(nodes, v) {
				t.Fatalf("partition %d voter %q is not a node", i, v)
			}
		}
		if !slices.Contains(p.Voters, p.Leader) {
			t.Fatalf("partition %d leader %q not among voters %v", i, p.Leader, p.Voters)
		}
		if p.Degraded != (copies > len(nodes)) {
			t.Fatalf("partition %d degraded=%v with %d nodes, %d copies", i, p.Degraded, len(nodes), copies)
		}
	}
}

func TestPlaceBalancedAndDistinct(t *testing.T) {
	for n := 1; n <= 12; n++ {
		for copies := 1; copies <= 4; copies++ {
			nodes := names(n)
			parts := Place(nodes, NumPartitions, copies)
			checkMap(t, parts, nodes, copies)
			leads, held := map[string]int{}, map[string]int{}
			for _, p := range parts {
				leads[p.Leader]++
				for _, v := range p.Voters {
					held[v]++
				}
			}
			if lo, hi := spread(nodes, leads); hi-lo > 1 {
				t.Errorf("%d nodes, %d copies: leaders per node from %d to %d", n, copies, lo, hi)
			}
			if lo, hi := spread(nodes, held); hi-lo > 1 {
				t.Errorf("%d nodes, %d copies: copies per node from %d to %d", n, copies, lo, hi)
			}
		}
	}
}

func TestPlaceDeterministic(t *testing.T) {
	a := Place([]string{"c", "a", "b", "d"}, NumPartitions, 3)
	b := Place([]string{"d", "b", "a", "c"}, NumPartitions, 3)
	if !slices.EqualFunc(a, b, func(x, y Partition) bool {
		return slices.Equal(x.Voters, y.Voters) && x.Leader == y.Leader && x.Epoch == y.Epoch
	}) {
		t.Fatal("the same node set in another order placed differently")
	}
}

func TestFailoverMovesOnlyTheDownNode(t *testing.T) {
	nodes := names(5)
	parts := Place(nodes, NumPartitions, 3)
	before := slices.Clone(parts)
	up := []string{"n1", "n2", "n4", "n5"}
	changed := Failover(parts, "n3", up)
	if len(changed) == 0 {
		t.Fatal("nothing changed")
	}
	held := map[string]int{}
	leads := map[string]int{}
	for i, p := range parts {
		had := slices.Contains(before[i].Voters, "n3")
		if !had {
			if p.Epoch != before[i].Epoch || !slices.Equal(p.Voters, before[i].Voters) || p.Leader != before[i].Leader {
				t.Fatalf("partition %d without n3 changed: %+v -> %+v", i, before[i], p)
			}
		} else {
			if p.Epoch != before[i].Epoch+1 {
				t.Fatalf("partition %d epoch %d, want %d", i, p.Epoch, before[i].Epoch+1)
			}
			// Minimal movement: exactly one voter differs, in n3's place.
			diff := 0
			for j := range p.Voters {
				if p.Voters[j] != before[i].Voters[j] {
					diff++
					if before[i].Voters[j] != "n3" {
						t.Fatalf("partition %d lost %q, not n3", i, before[i].Voters[j])
					}
				}
			}
			if diff != 1 || p.Degraded {
				t.Fatalf("partition %d: %d voters changed, degraded %v", i, diff, p.Degraded)
			}
			if before[i].Leader != "n3" && p.Leader != before[i].Leader {
				t.Fatalf("partition %d leader moved from %q, which is up", i, before[i].Leader)
			}
		}
		if slices.Contains(p.Voters, "n3") || p.Leader == "n3" {
			t.Fatalf("partition %d still on n3: %+v", i, p)
		}
		for _, v := range p.Voters {
			held[v]++
		}
		leads[p.Leader]++
	}
	checkMap(t, parts, up, 3)
	// n3's ~614 copies spread over the four others: still within a few.
	if lo, hi := spread(up, held); hi-lo > 2 {
		t.Errorf("after failover copies per node from %d to %d", lo, hi)
	}
	// n3's leaderships can go only to the voters it shared partitions
	// with; none takes more than half of them beyond its share.
	if _, hi := spread(up, leads); hi > NumPartitions/4+NumPartitions/5/2 {
		t.Errorf("after failover a node leads %d partitions", hi)
	}
	if again := Failover(parts, "n3", up); len(again) != 0 {
		t.Fatalf("a second failover of n3 changed %d partitions", len(again))
	}
}

func TestFailoverWithoutSpareDegrades(t *testing.T) {
	nodes := names(3)
	parts := Place(nodes, NumPartitions, 3)
	up := []string{"n1", "n3"}
	changed := Failover(parts, "n2", up)
	if len(changed) != NumPartitions {
		t.Fatalf("changed %d partitions, want all %d (each holds n2)", len(changed), NumPartitions)
	}
	leads := map[string]int{}
	for i, p := range parts {
		if !p.Degraded || !slices.Contains(p.Voters, "n2") || len(p.Voters) != 3 {
			t.Fatalf("partition %d: %+v, want degraded with n2 still a voter", i, p)
		}
		if p.Leader == "n2" {
			t.Fatalf("partition %d still prefers n2 as leader", i)
		}
		leads[p.Leader]++
	}
	if lo, hi := spread(up, leads); hi-lo > 1 {
		t.Errorf("n2's leaderships split %d/%d", lo, hi)
	}
	if again := Failover(parts, "n2", up); len(again) != 0 {
		t.Fatalf("a second failover changed %d partitions", len(again))
	}
	// n2 returns: every partition has its three voters up again.
	rec := Recover(parts, 3, nodes)
	if len(rec) != NumPartitions {
		t.Fatalf("recover changed %d partitions, want %d", len(rec), NumPartitions)
	}
	for i, p := range parts {
		if p.Degraded || p.Epoch != 3 {
			t.Fatalf("partition %d after recovery: %+v", i, p)
		}
	}
	if again := Recover(parts, 3, nodes); len(again) != 0 {
		t.Fatalf("a second recovery changed %d partitions", len(again))
	}
}

func TestPlaceFewerNodesThanCopies(t *testing.T) {
	parts := Place([]string{"n1", "n2"}, NumPartitions, 3)
	checkMap(t, parts, []string{"n1", "n2"}, 3)
	if rec := Recover(parts, 3, []string{"n1", "n2"}); len(rec) != 0 {
		t.Fatal("recover cleared degraded partitions that lack a copy")
	}
}

// leadCounts is how many partitions each node leads.
func leadCounts(parts []Partition) map[string]int {
	leads := map[string]int{}
	for _, p := range parts {
		leads[p.Leader]++
	}
	return leads
}

// checkEven asserts that every node leads within one of its fair share of
// parts (one over the number of voters of each partition it is a voter
// of).
func checkEven(t *testing.T, parts []Partition) {
	t.Helper()
	share := map[string]float64{}
	for _, p := range parts {
		for _, v := range p.Voters {
			share[v] += 1 / float64(len(p.Voters))
		}
	}
	leads := leadCounts(parts)
	for n, s := range share {
		if d := float64(leads[n]) - s; d > 1+1e-9 || d < -1-1e-9 {
			t.Fatalf("%s leads %d partitions, its fair share is %.2f", n, leads[n], s)
		}
	}
}

// evenInPasses calls EvenLeaders with step until it changes nothing,
// checking each pass's epochs and bound, and returns the passes that
// changed something and the partitions changed in all.
func evenInPasses(t *testing.T, parts []Partition, settled []string, step int) (passes, moved int) {
	t.Helper()
	for range NumPartitions {
		before := slices.Clone(parts)
		changed := EvenLeaders(parts, settled, nil, step)
		if len(changed) == 0 {
			return passes, moved
		}
		passes++
		moved += len(changed)
		if len(changed) > step+len(settled) {
			t.Fatalf("a pass of step %d changed %d partitions", step, len(changed))
		}
		for i := range parts {
			was, now := before[i], parts[i]
			if !slices.Equal(was.Voters, now.Voters) || was.Degraded != now.Degraded {
				t.Fatalf("partition %d's voters changed: %+v -> %+v", i, was, now)
			}
			wantEpoch := was.Epoch
			if slices.Contains(changed, i) {
				wantEpoch++
				if was.Leader == now.Leader {
					t.Fatalf("partition %d reported changed, leader still %s", i, now.Leader)
				}
			}
			if now.Epoch != wantEpoch || (now.Leader != was.Leader) != slices.Contains(changed, i) {
				t.Fatalf("partition %d: %+v -> %+v, changed %v", i, was, now, slices.Contains(changed, i))
			}
		}
	}
	t.Fatal("EvenLeaders never settled")
	return
}

func TestEvenLeadersLeavesPlacementAlone(t *testing.T) {
	for n := 1; n <= 12; n++ {
		for copies := 1; copies <= 4; copies++ {
			nodes := names(n)
			parts := Place(nodes, NumPartitions, copies)
			if c := EvenLeaders(parts, nodes, nil, 0); len(c) != 0 {
				t.Fatalf("%d nodes, %d copies: moved %d leaderships of a fresh placement", n, copies, len(c))
			}
		}
	}
}

// TestEvenLeadersReturnsLeadershipsToReturnedNode: three nodes, one failed
// over (it leads nothing) and back: its leaderships come back from both
// others, in bounded passes, and only to it.
func TestEvenLeadersReturnsLeadershipsToReturnedNode(t *testing.T) {
	nodes := names(3)
	parts := Place(nodes, NumPartitions, 3)
	Failover(parts, "n2", []string{"n1", "n3"})
	// While n2 is down (degraded partitions), or up but not settled,
	// nothing moves.
	if c := EvenLeaders(parts, nodes, nil, 64); len(c) != 0 {
		t.Fatalf("moved %d leaderships of degraded partitions", len(c))
	}
	Recover(parts, 3, nodes)
	if c := EvenLeaders(parts, []string{"n1", "n3"}, nil, 64); len(c) != 0 {
		t.Fatalf("moved %d leaderships with n2 not settled", len(c))
	}
	if l := leadCounts(parts)["n2"]; l != 0 {
		t.Fatalf("n2 leads %d before evening out", l)
	}

	// Unbounded, on a copy: how many moves it takes, each to n2.
	all := slices.Clone(parts)
	want := EvenLeaders(all, nodes, nil, 0)
	for _, i := range want {
		if all[i].Leader != "n2" {
			t.Fatalf("partition %d's leadership moved from %s to %s, not to the returned node", i, parts[i].Leader, all[i].Leader)
		}
	}
	checkEven(t, all)
	if l := leadCounts(all)["n2"]; len(want) != l || l < NumPartitions/3 {
		t.Fatalf("%d moves, n2 leads %d: moved more than it must", len(want), l)
	}

	const step = 64
	passes, moved := evenInPasses(t, parts, nodes, step)
	if maxPasses := (len(want) + step - 1) / step; passes > maxPasses || moved != len(want) {
		t.Fatalf("%d passes moved %d, want within %d passes %d moves", passes, moved, maxPasses, len(want))
	}
	checkEven(t, parts)
	if c := EvenLeaders(parts, nodes, nil, step); len(c) != 0 {
		t.Fatalf("once even, a pass moved %d", len(c))
	}
}

// TestEvenLeadersAfterSpareFailover: five nodes, one failed over onto
// spares: nothing moves while a voter is not settled (nor while a node is
// down and not failed over yet), then the survivors even out.
func TestEvenLeadersAfterSpareFailover(t *testing.T) {
	nodes := names(5)
	parts := Place(nodes, NumPartitions, 3)
	up := []string{"n1", "n2", "n4", "n5"}
	// n3 down, not failed over: the partitions it is a voter of are not
	// degraded, so nothing moves (a fresh layout would otherwise be
	// evened over the others' partitions, and back on its return).
	if c := EvenLeaders(parts, up, nil, 0); len(c) != 0 {
		t.Fatalf("moved %d leaderships while n3 was down", len(c))
	}
	Failover(parts, "n3", up)
	// n5 is up but not settled.
	if c := EvenLeaders(parts, []string{"n1", "n2", "n4"}, nil, 0); len(c) != 0 {
		t.Fatalf("moved %d leaderships with n5 not settled", len(c))
	}
	if _, moved := evenInPasses(t, parts, up, 64); moved == 0 {
		t.Fatal("nothing moved after a failover onto spares")
	}
	checkMap(t, parts, up, 3)
	checkEven(t, parts)
}

// TestEvenLeadersHoldsSkipped: a partition held back keeps its leader and
// counts: the returned node still gets its share from the others.
func TestEvenLeadersHoldsSkipped(t *testing.T) {
	nodes := names(3)
	parts := Place(nodes, NumPartitions, 3)
	Failover(parts, "n2", []string{"n1", "n3"})
	Recover(parts, 3, nodes)
	before := slices.Clone(parts)
	held := func(p int) bool { return p < 300 }
	EvenLeaders(parts, nodes, held, 0)
	for p := range 300 {
		if parts[p].Leader != before[p].Leader || parts[p].Epoch != before[p].Epoch {
			t.Fatalf("held partition %d moved: %+v -> %+v", p, before[p], parts[p])
		}
	}
	checkEven(t, parts)
	// Held for ever, the layout stays even; a fresh layout with some
	// partitions held is left alone.
	if c := EvenLeaders(parts, nodes, held, 0); len(c) != 0 {
		t.Fatalf("once even, moved %d", len(c))
	}
	fresh := Place(names(5), NumPartitions, 3)
	if c := EvenLeaders(fresh, names(5), func(p int) bool { return p%7 == 0 }, 0); len(c) != 0 {
		t.Fatalf("moved %d of a fresh layout with partitions held", len(c))
	}
}

// TestEvenLeadersRandom: any voter sets and leaders end within one of the
// fair share, with nothing but leaders changed, and stay there.
func TestEvenLeadersRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 22))
	for round := range 300 {
		n := 1 + rng.IntN(8)
		nodes := names(n)
		parts := make([]Partition, 1+rng.IntN(300))
		for i := range parts {
			k := 1 + rng.IntN(min(n, 4))
			perm := rng.Perm(n)[:k]
			// A skewed choice of voters and leaders, so that some nodes
			// lead far more than their share.
			slices.Sort(perm)
			if rng.IntN(2) == 0 {
				perm = rng.Perm(n)[:k]
			}
			for _, j := range perm {
				parts[i].Voters = append(parts[i].Voters, nodes[j])
			}
			parts[i].Leader = parts[i].Voters[0]
			parts[i].Epoch = 1
		}
		before := slices.Clone(parts)
		// A partition in ten held back in a third of the rounds.
		var skip func(int) bool
		if round%3 == 0 {
			skip = func(p int) bool { return p%10 == 3 }
		}
		EvenLeaders(parts, nodes, skip, 0)
		for i := range parts {
			if !slices.Equal(parts[i].Voters, before[i].Voters) || !slices.Contains(parts[i].Voters, parts[i].Leader) ||
				skip != nil && skip(i) && parts[i].Leader != before[i].Leader {
				t.Fatalf("round %d partition %d: %+v -> %+v", round, i, before[i], parts[i])
			}
		}
		if skip == nil {
			checkEven(t, parts)
		}
		if c := EvenLeaders(parts, nodes, skip, 0); len(c) != 0 {
			t.Fatalf("round %d: once even, moved %d", round, len(c))
		}
	}
}

// TestFailoverKeepsAVoterWithoutAMajorityUp: two of a partition's three
// voters down past the failover timeout (five nodes: spares to spare).
// Where the other is the only voter up, neither down node is taken out:
// the Raft group could not commit the change (a majority of its voters
// must), and the down nodes may hold acknowledged writes the survivor
// lacks, which their copies, out of the map, would drop on their return
// (serve's applyMap): the partition would have no majority ever again.
// Before, both were replaced by spares. Partitions holding one of them
// still move it to a spare; the degraded marks clear when they return.
// The same for a partition placed on two nodes, one down: its one other
// voter is no majority of two.
func TestFailoverKeepsAVoterWithoutAMajorityUp(t *testing.T) {
	nodes := names(5)
	parts := Place(nodes, NumPartitions, 3)
	before := slices.Clone(parts)
	up := []string{"n3", "n4", "n5"} // n1 and n2 down
	Failover(parts, "n1", up)
	Failover(parts, "n2", up)
	both, one := 0, 0
	for i, p := range parts {
		was := before[i].Voters
		switch {
		case slices.Contains(was, "n1") && slices.Contains(was, "n2"):
			both++
			if !slices.Equal(p.Voters, was) || !p.Degraded {
				t.Fatalf("partition %d, voters %v, two of them down: %+v; want its voters kept, degraded", i, was, p)
			}
			if p.Leader == "n1" || p.Leader == "n2" {
				t.Fatalf("partition %d still prefers %s, down", i, p.Leader)
			}
		case slices.Contains(was, "n1") || slices.Contains(was, "n2"):
			one++
			if slices.Contains(p.Voters, "n1") || slices.Contains(p.Voters, "n2") || p.Degraded {
				t.Fatalf("partition %d, voters %v, one of them down: %+v; want it replaced by a spare", i, was, p)
			}
		}
	}
	if both == 0 || one == 0 {
		t.Fatalf("%d partitions held both down nodes and %d one: the placement gave the test nothing to check", both, one)
	}
	if again := append(Failover(parts, "n1", up), Failover(parts, "n2", up)...); len(again) != 0 {
		t.Fatalf("failing them over again changed %d partitions", len(again))
	}
	if rec := Recover(parts, 3, nodes); len(rec) != both {
		t.Fatalf("their return cleared %d degraded marks; want %d", len(rec), both)
	}

	two := Place([]string{"n1", "n2"}, NumPartitions, 3)
	Failover(two, "n1", []string{"n2", "n3"})
	for i, p := range two {
		if !slices.Contains(p.Voters, "n1") || len(p.Voters) != 2 || p.Leader != "n2" {
			t.Fatalf("partition %d of two voters, n1 down: %+v; want n1 kept, led by n2", i, p)
		}
	}
}
