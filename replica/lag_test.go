package replica

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// lagOf collects the lagging followers reported by every running host.
func (c *testCluster) lagOf(nodes []string) []Lag {
	var all []Lag
	for _, n := range nodes {
		if h := c.host(n); h != nil {
			all = append(all, h.Lagging()...)
		}
	}
	return all
}

// A follower that is down is reported lagging by the leaders of its
// groups (each group it is a voter of, written to while it was away, once
// and by its leader only); back, it catches up and nothing lags.
func TestLaggingFollowers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const groups = 8
	c := newTestCluster(t, groups, nil, false)
	c.warm(ctx, t)
	eventually(t, "nothing lags once every group is warm", func() error {
		if l := c.lagOf(testNodes); len(l) > 0 {
			return fmt.Errorf("lagging: %+v", l)
		}
		return nil
	})

	c.stop("n3")
	live := []string{"n1", "n2"}
	for g := range GroupID(groups) {
		if _, err := c.propose(ctx, live[int(g)%2], g, fmt.Sprintf("k%d=while-n3-is-down", g)); err != nil {
			t.Fatalf("group %d: %v", g, err)
		}
	}
	eventually(t, "every group's leader reports n3 down and behind", func() error {
		seen := map[GroupID]int{}
		for _, l := range c.lagOf(live) {
			if l.Follower != "n3" || l.Why != "down" || l.Behind == 0 {
				return fmt.Errorf("unexpected lag %+v", l)
			}
			seen[l.Group]++
		}
		for g := range GroupID(groups) {
			if seen[g] != 1 {
				return fmt.Errorf("group %d reported %d times (want once, by its leader)", g, seen[g])
			}
		}
		return nil
	})

	c.start("n3")
	eventually(t, "n3 caught up: nothing lags", func() error {
		if l := c.lagOf(testNodes); len(l) > 0 {
			return fmt.Errorf("lagging: %+v", l)
		}
		return nil
	})
}
