package replica

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// sentByAll sums the messages the cluster's hosts sent.
func (c *testCluster) sentByAll() uint64 {
	var n uint64
	for _, name := range testNodes {
		if h := c.host(name); h != nil {
			n += h.Stats().MessagesSent
		}
	}
	return n
}

// warm writes one entry to each group, so that each has a leader.
func (c *testCluster) warm(ctx context.Context, t *testing.T) {
	t.Helper()
	for g := range GroupID(c.groups) {
		if _, err := c.propose(ctx, testNodes[int(g)%3], g, fmt.Sprintf("warm%d=1", g)); err != nil {
			t.Fatalf("group %d: %v", g, err)
		}
	}
}

// allQuiet waits until every group is quiet on every running host.
func (c *testCluster) allQuiet(t *testing.T, nodes []string) {
	t.Helper()
	eventually(t, "every group quiet", func() error {
		for _, n := range nodes {
			if q := c.host(n).Quiesced(); q != c.groups {
				return fmt.Errorf("%s: %d of %d groups quiet", n, q, c.groups)
			}
		}
		return nil
	})
}

// idleWindow is how long the idle tests count messages: 20 ticks.
const idleWindow = 20 * DefaultTickInterval

func TestIdleGroupsGoQuiet(t *testing.T) {
	const groups = 64
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Before quiescing (the old code): every leader heartbeats each tick.
	if !testing.Short() {
		old := newTestCluster(t, groups, func(o *Options) { o.test.noQuiesce = true }, false)
		old.warm(ctx, t)
		before := old.sentByAll()
		time.Sleep(idleWindow)
		n := old.sentByAll() - before
		t.Logf("without quiescing: %d messages in %v of %d idle groups", n, idleWindow, groups)
		if n < groups {
			t.Errorf("without quiescing: %d messages in %v, want heartbeats (at least one a group)", n, idleWindow)
		}
		for _, n := range testNodes {
			old.stop(n)
		}
	}

	c := newTestCluster(t, groups, nil, false)
	c.warm(ctx, t)
	c.allQuiet(t, testNodes)
	before := c.sentByAll()
	time.Sleep(idleWindow)
	n := c.sentByAll() - before
	t.Logf("quiet: %d messages in %v of %d idle groups", n, idleWindow, groups)
	// A heartbeat a tick would be 2 per group per tick (2560 here);
	// quiet groups send nothing at all.
	if n != 0 {
		t.Errorf("quiet groups sent %d messages in %v, want 0", n, idleWindow)
	}

	// A write to a quiet group, through a follower (its forwarded
	// proposal wakes the leader), is committed and applied everywhere.
	for g := range GroupID(4) {
		lead, ok := c.host("n1").Leader(g)
		if !ok {
			t.Fatalf("group %d: no leader", g)
		}
		via := "n1"
		if lead == via {
			via = "n2"
		}
		key := fmt.Sprintf("quiet%d", g)
		if _, err := c.propose(ctx, via, g, key+"=1"); err != nil {
			t.Fatalf("group %d: a write to the quiet group through %s: %v", g, via, err)
		}
		for _, n := range testNodes {
			eventually(t, n+" applied the write", func() error {
				if v, ok := c.sm(n, g).get(key); !ok || v != "1" {
					return fmt.Errorf("group %d: %s = %q", g, key, v)
				}
				return nil
			})
		}
	}
	// Then they go quiet again.
	c.allQuiet(t, testNodes)
}

func TestQuietGroupsFailOver(t *testing.T) {
	const groups = 64
	c := newTestCluster(t, groups, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c.warm(ctx, t)
	c.allQuiet(t, testNodes)
	leads := map[string][]GroupID{}
	for g := range GroupID(groups) {
		if l, ok := c.host("n1").Leader(g); ok {
			leads[l] = append(leads[l], g)
		}
	}
	victim := "n1"
	for _, n := range testNodes {
		if len(leads[n]) > len(leads[victim]) {
			victim = n
		}
	}
	var survivors []string
	for _, n := range testNodes {
		if n != victim {
			survivors = append(survivors, n)
		}
	}
	// Killed: its connections end, which wakes its quiet groups on the
	// survivors; those it led elect a leader among them and take writes.
	c.stop(victim)
	for g := range GroupID(groups) {
		key := fmt.Sprintf("after%d", g)
		if _, err := c.propose(ctx, survivors[int(g)%2], g, key+"=1"); err != nil {
			t.Fatalf("group %d (led by %s before) after the kill: %v", g, victim, err)
		}
		if l, ok := c.host(survivors[0]).Leader(g); !ok || l == victim {
			t.Errorf("group %d: leader %q after the kill", g, l)
		}
	}
	// Idle again, they go quiet without it (it is marked down: its
	// connections broke), and stay so.
	c.allQuiet(t, survivors)
	sent := c.sentByAll()
	time.Sleep(idleWindow)
	if n := c.sentByAll() - sent; n != 0 {
		t.Errorf("quiet groups without the killed node sent %d messages in %v, want 0", n, idleWindow)
	}

	// Back, it joins groups that went quiet without it: a write through
	// it reaches every group, and it holds what was written meanwhile.
	c.start(victim)
	for g := range GroupID(groups) {
		if _, err := c.propose(ctx, victim, g, fmt.Sprintf("back%d=1", g)); err != nil {
			t.Fatalf("group %d through the restarted %s: %v", g, victim, err)
		}
		eventually(t, victim+" caught up", func() error {
			if v, ok := c.sm(victim, g).get(fmt.Sprintf("after%d", g)); !ok || v != "1" {
				return fmt.Errorf("group %d: the write made without it is missing", g)
			}
			return nil
		})
	}
	c.allQuiet(t, testNodes)
}
