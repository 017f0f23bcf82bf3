package main

import "testing"

// TestLayoutRevGrows checks what an SDK relies on to take a new layout:
// the configuration's rev grows when a partition's leader changes (its
// group's term grows) and when the map changes, even if the map change
// takes partitions' groups off this node (their terms no longer count).
func TestLayoutRevGrows(t *testing.T) {
	terms := []uint64{3, 2, 5, 1}
	held := []bool{true, true, true, true}
	rev := func(mapRev int64) int64 {
		return layoutRev(mapRev, len(terms), func(p int) (uint64, bool) { return terms[p], held[p] })
	}
	r0 := rev(100)
	terms[2]++ // a new leader for partition 2
	r1 := rev(100)
	if r1 <= r0 {
		t.Fatalf("rev %d after a leadership change, %d before", r1, r0)
	}
	if again := rev(100); again != r1 {
		t.Fatalf("rev %d then %d with nothing changed", r1, again)
	}
	held[0], held[2] = false, false // a failover's map moved two copies away
	r2 := rev(101)
	if r2 <= r1 {
		t.Fatalf("rev %d after a new map, %d before", r2, r1)
	}
}
