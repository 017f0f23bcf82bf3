package cluster

import (
	"fmt"
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
