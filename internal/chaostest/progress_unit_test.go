package chaostest

import (
	"strings"
	"testing"
	"time"
)

// The catch-up from the groups' progress: a partition counts once the
// healed node applied what the majority had committed at the heal (the
// highest commit any of them knew), not before; one applied already at
// the heal counts at 0; all is the last, and only once every one did.
func TestCatchUpFromGroupProgress(t *testing.T) {
	others := []map[int]groupProgress{
		{0: {Commit: 10}, 1: {Commit: 7}, 2: {Commit: 5}},
		{0: {Commit: 12}, 1: {Commit: 7}, 2: {Commit: 4}},
	}
	targets := commitTargets([]int{0, 1, 2}, others)
	if targets[0] != 12 || targets[1] != 7 || targets[2] != 5 {
		t.Fatalf("targets %v, want the highest commit known: 0:12 1:7 2:5", targets)
	}
	c := newCatchUp(targets, map[int]groupProgress{0: {Applied: 3}, 1: {Applied: 6}, 2: {Applied: 5}})
	if c.behind != 2 || c.most != 9 {
		t.Fatalf("behind %d (most %d), want 2 partitions behind, at most 9 entries", c.behind, c.most)
	}
	if c.observe(map[int]groupProgress{0: {Applied: 11}, 1: {Applied: 7}, 2: {Applied: 5}}, time.Second) {
		t.Fatal("done with partition 0 at 11 of 12")
	}
	if c.all() >= 0 {
		t.Fatalf("all %v while partition 0 lags", c.all())
	}
	if !c.observe(map[int]groupProgress{0: {Applied: 12}, 1: {Applied: 9}, 2: {Applied: 5}}, 3*time.Second) {
		t.Fatal("not done with every partition applied")
	}
	if c.at[1] != time.Second || c.at[2] != 0 || c.all() != 3*time.Second {
		t.Fatalf("caught up at %v (all %v), want 1: 1s, 2: 0, all 3s", c.at, c.all())
	}
	if s := c.String(); !strings.Contains(s, "2 of 3 partitions behind") || !strings.Contains(s, "max 3s") || !strings.Contains(s, "all 3 in 3s") {
		t.Fatalf("summary %q", s)
	}
	// A group that no longer runs on the node (it left it) ends the
	// wait, but is not caught up.
	c = newCatchUp(map[int]uint64{0: 5}, nil)
	if !c.observe(map[int]groupProgress{}, time.Second) || c.all() >= 0 || c.gone != 1 {
		t.Fatalf("a group gone: done/all/gone %v %v %d", c.done(), c.all(), c.gone)
	}
}
