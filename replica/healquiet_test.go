package replica

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestHealedFollowerCatchesUpInQuietGroups: a node cut off while the
// others write to every group (its own groups elect other leaders) holds
// none of those writes; once the cut heals it catches up in every group,
// those that went quiet meanwhile included (a quiet leader sends nothing
// by itself: what it sends the healed node must come from being woken).
func TestHealedFollowerCatchesUpInQuietGroups(t *testing.T) {
	const groups = 16
	nc := newNetCut()
	c := newTestCluster(t, groups, nc.install, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.warm(ctx, t)
	const victim = "n3"
	majority := others(victim)
	nc.isolate(victim)
	for g := range GroupID(groups) {
		if _, err := c.propose(ctx, majority[int(g)%2], g, fmt.Sprintf("cut%d=1", g)); err != nil {
			t.Fatalf("group %d through the majority: %v", g, err)
		}
	}
	for g := range GroupID(groups) {
		if v, _ := c.sm(victim, g).get(fmt.Sprintf("cut%d", g)); v != "" {
			t.Fatalf("group %d: the cut node holds the write made during the cut", g)
		}
	}
	// Its lease expires (what the cluster's watch tells every Host): the
	// majority's groups go quiet without it.
	for _, n := range majority {
		c.host(n).NodeDown(victim)
	}
	c.allQuiet(t, majority)
	nc.heal()
	for g := range GroupID(groups) {
		key := fmt.Sprintf("cut%d", g)
		eventually(t, fmt.Sprintf("%s catches up in group %d", victim, g), func() error {
			if v, _ := c.sm(victim, g).get(key); v != "1" {
				return fmt.Errorf("%s = %q", key, v)
			}
			return nil
		})
	}
}
