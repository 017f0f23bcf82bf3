package replica

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// startJoiner opens a fourth host, n, whose groups are joined empty
// (JoinGroup), and registers it with the cluster so propose and sm reach
// it. Its voters name every node for Leader.
func (c *testCluster) startJoiner(t *testing.T, n string, voters []string) {
	t.Helper()
	c.openHost(t, n, nil, func(h *Host, g GroupID, sm *kvMachine) error { return h.JoinGroup(g, voters, sm) })
	t.Cleanup(func() { c.stop(n) })
}

// openHost opens node n's host in its directory (its store's state, if
// any), with Options.Peers peers, starts each of the cluster's groups on
// it with start, and registers it with the cluster so propose and sm
// reach it.
func (c *testCluster) openHost(t *testing.T, n string, peers []string, start func(h *Host, g GroupID, sm *kvMachine) error) {
	t.Helper()
	h, err := Open(Options{Dir: filepath.Join(c.dir, n), Node: n, Listen: "127.0.0.1:0", Resolver: c.res, Peers: peers})
	if err != nil {
		t.Fatal(err)
	}
	c.res.set(n, h.Addr())
	sms := map[GroupID]*kvMachine{}
	for g := range GroupID(c.groups) {
		sm, err := loadKV(h, g)
		if err != nil {
			t.Fatal(err)
		}
		if err := start(h, g, sm); err != nil {
			t.Fatal(err)
		}
		sms[g] = sm
	}
	c.mu.Lock()
	c.hosts[n], c.sms[n] = h, sms
	c.mu.Unlock()
}

// target tells every running host what the map wants of every group.
func (c *testCluster) target(t *testing.T, voters []string, leader func(GroupID) string) {
	t.Helper()
	c.mu.Lock()
	hosts := make(map[string]*Host, len(c.hosts))
	for n, h := range c.hosts {
		hosts[n] = h
	}
	c.mu.Unlock()
	for n, h := range hosts {
		for g := range GroupID(c.groups) {
			if !h.Holds(g) {
				continue
			}
			if err := h.SetTarget(g, voters, leader(g)); err != nil {
				t.Fatalf("%s group %d: %v", n, g, err)
			}
		}
	}
}

// writeAll writes key=value to every group through node n.
func (c *testCluster) writeAll(ctx context.Context, t *testing.T, n, key, value string, acked map[GroupID]map[string]string) {
	t.Helper()
	for g := range GroupID(c.groups) {
		if _, err := c.propose(ctx, n, g, key+"="+value); err != nil {
			t.Fatalf("group %d %s=%s: %v", g, key, value, err)
		}
		if acked[g] == nil {
			acked[g] = map[string]string{}
		}
		acked[g][key] = value
	}
}

// votersAre checks that node n's applied configuration of every group is
// want.
func (c *testCluster) votersAre(n string, want []string) error {
	for g := range GroupID(c.groups) {
		got, err := c.host(n).Voters(g)
		if err != nil {
			return fmt.Errorf("%s group %d: %w", n, g, err)
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s group %d: voters %q, want %q", n, g, got, want)
		}
	}
	return nil
}

// hasVoter checks that node n's applied configuration of every group
// holds voter (HasVoter), or does not when want is false.
func (c *testCluster) hasVoter(n, voter string, want bool) error {
	for g := range GroupID(c.groups) {
		got, err := c.host(n).HasVoter(g, voter)
		if err != nil {
			return fmt.Errorf("%s group %d: %w", n, g, err)
		}
		if got != want {
			return fmt.Errorf("%s group %d: HasVoter(%s) = %v, want %v", n, g, voter, got, want)
		}
	}
	return nil
}

// TestConfChangeAddsAndRemovesVoters moves every group from n1,n2,n3 to
// n2,n3,n4 as a failover with a spare does: n4 joins empty, catches up by
// snapshot and applies later writes, keeps its membership across a
// restart; n1, removed, stops receiving and drops its groups.
func TestConfChangeAddsAndRemovesVoters(t *testing.T) {
	const groups = 8
	// No snapshot interval is reached: the joiner's first state can only
	// be the snapshot its leader takes for it.
	c := newTestCluster(t, groups, nil, false)
	c.groups = groups
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	acked := map[GroupID]map[string]string{}
	c.writeAll(ctx, t, "n2", "before", "1", acked)

	four := []string{"n1", "n2", "n3", "n4"}
	c.startJoiner(t, "n4", four)
	c.target(t, four, func(GroupID) string { return "" })
	eventually(t, "n4 is a voter of every group, everywhere", func() error {
		for _, n := range four {
			if err := c.votersAre(n, four); err != nil {
				return err
			}
		}
		return nil
	})
	for _, n := range four {
		if err := c.hasVoter(n, "n1", true); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "n4 holds the writes made before it joined", func() error { return c.hasAll("n4", acked) })
	if st := c.host("n4").Stats(); st.SnapshotsRestored < groups {
		t.Errorf("n4 restored %d snapshots, want one a group (%d)", st.SnapshotsRestored, groups)
	}
	c.writeAll(ctx, t, "n3", "joined", "2", acked)
	eventually(t, "n4 applies the writes made after it joined", func() error { return c.hasAll("n4", acked) })

	// A restart keeps the configuration the conf changes made (stored,
	// not the one the group was bootstrapped with).
	c.stop("n2")
	c.start("n2")
	c.stop("n4")
	c.startJoiner(t, "n4", four)
	c.target(t, four, func(GroupID) string { return "" }) // names n4 on the restarted n2, as serve's map does
	for _, n := range []string{"n2", "n4"} {
		eventually(t, n+" keeps its configuration across a restart", func() error { return c.votersAre(n, four) })
	}

	// n1 out: whoever leads hands over to n2 first if it is n1.
	three := []string{"n2", "n3", "n4"}
	c.target(t, three, func(GroupID) string { return "n2" })
	eventually(t, "n1 left every group", func() error {
		for g := range GroupID(groups) {
			if c.host("n1").Holds(g) {
				return fmt.Errorf("n1 still runs group %d", g)
			}
		}
		return nil
	})
	for _, n := range three {
		eventually(t, n+" applied n1's removal", func() error { return c.votersAre(n, three) })
		if err := c.hasVoter(n, "n1", false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.host("n1").HasVoter(0, "n1"); !errors.Is(err, ErrNoGroup) {
		t.Errorf("HasVoter of a group n1 left: %v, want ErrNoGroup", err)
	}
	// A group is out of the Host before its state's deletion is synced.
	eventually(t, "n1 deleted the state of every group it left", func() error {
		if st := c.host("n1").Stats(); st.GroupsLeft != groups {
			return fmt.Errorf("n1 left %d groups, want %d", st.GroupsLeft, groups)
		}
		for g := range GroupID(groups) {
			if _, found, err := c.host("n1").st.load(g); err != nil || found {
				return fmt.Errorf("n1's store still holds group %d (found %v, err %v)", g, found, err)
			}
		}
		return nil
	})
	// A removal takes no snapshot: the restarted n3 finds its
	// configuration in the stored ConfStates past its snapshot.
	c.stop("n3")
	c.start("n3")
	c.target(t, three, func(GroupID) string { return "n2" })
	eventually(t, "n3 keeps n1's removal across a restart", func() error { return c.votersAre("n3", three) })
	if err := c.hasVoter("n3", "n1", false); err != nil {
		t.Fatal(err)
	}
	old := c.sm("n1", 0).snapshotData()
	c.writeAll(ctx, t, "n4", "removed", "3", acked)
	for _, n := range three {
		eventually(t, n+" holds every write", func() error { return c.hasAll(n, acked) })
	}
	if got := c.sm("n1", 0).snapshotData(); !mapsEqual(got, old) {
		t.Errorf("n1 applied writes after it was removed: %v", got)
	}
}

// TestLeadershipFollowsTarget hands every group's leadership to a named
// voter (not the one Raft elected) and checks that every node sees it.
func TestLeadershipFollowsTarget(t *testing.T) {
	const groups = 16
	c := newTestCluster(t, groups, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	acked := map[GroupID]map[string]string{}
	c.writeAll(ctx, t, "n1", "k", "1", acked)
	// The wanted leader: the voter after the one leading now.
	want := map[GroupID]string{}
	for g := range GroupID(groups) {
		var l string
		eventually(t, "a leader", func() error {
			var ok bool
			if l, ok = c.host("n1").Leader(g); !ok {
				return fmt.Errorf("group %d has no leader", g)
			}
			return nil
		})
		want[g] = testNodes[(slices.Index(testNodes, l)+1)%len(testNodes)]
	}
	c.target(t, nil, func(g GroupID) string { return want[g] })
	eventually(t, "every group led by its preferred leader", func() error {
		for _, n := range testNodes {
			for g := range GroupID(groups) {
				if l, _ := c.host(n).Leader(g); l != want[g] {
					return fmt.Errorf("%s sees group %d led by %q, want %q", n, g, l, want[g])
				}
			}
		}
		return nil
	})
	var transfers uint64
	for _, n := range testNodes {
		transfers += c.host(n).Stats().Transfers
	}
	if transfers < groups {
		t.Errorf("%d transfers for %d groups", transfers, groups)
	}
	// The new leaders take writes, and nothing acknowledged is lost.
	c.writeAll(ctx, t, "n2", "k2", "2", acked)
	for _, n := range testNodes {
		eventually(t, n+" holds every write", func() error { return c.hasAll(n, acked) })
	}
}

// TestStuckJointConfigurationIsLeft: a group left in a joint configuration
// (what raft leaves behind when its automatic leave was dropped during a
// leadership transfer and the group then had nothing to apply) is led
// out of it by its leader's steering: the outgoing voter stops being a
// voter and leaves the group. Here the joint configuration is an explicit
// one, which raft never leaves by itself.
func TestStuckJointConfigurationIsLeft(t *testing.T) {
	c := newTestCluster(t, 1, nil, false)
	c.groups = 1
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	acked := map[GroupID]map[string]string{}
	c.writeAll(ctx, t, "n1", "before", "1", acked)
	lead := c.leaderOf(t, 0, testNodes)
	out := "n3"
	if lead == out {
		out = "n2"
	}
	var keep []string
	for _, n := range testNodes {
		if n != out {
			keep = append(keep, n)
		}
	}
	h := c.host(lead)
	g, err := h.group(0)
	if err != nil {
		t.Fatal(err)
	}
	var perr error
	g.withRaft(func(rn *raft.RawNode) {
		perr = rn.ProposeConfChange(&pb.ConfChangeV2{
			Transition: pb.ConfChangeTransitionJointExplicit.Enum(),
			Changes:    []*pb.ConfChangeSingle{{Type: pb.ConfChangeType_ConfChangeRemoveNode.Enum(), NodeId: new(NodeID(out))}},
		})
		g.wakeLocked()
	})
	if perr != nil {
		t.Fatal(perr)
	}
	h.enqueue(g)
	eventually(t, "the leader applied the joint configuration", func() error {
		var joint bool
		g.withRaft(func(*raft.RawNode) {
			joint = len(g.cs.GetVotersOutgoing()) > 0 || !slices.Contains(g.voters, NodeID(out))
		})
		if !joint {
			return fmt.Errorf("not joint yet")
		}
		return nil
	})
	// The map wants what the joint configuration goes to.
	c.target(t, keep, func(GroupID) string { return "" })
	eventually(t, out+" left the group", func() error {
		if c.host(out).Holds(0) {
			return fmt.Errorf("%s still runs group 0", out)
		}
		return nil
	})
	for _, n := range keep {
		eventually(t, n+" applied the leave", func() error { return c.votersAre(n, keep) })
	}
	c.writeAll(ctx, t, keep[0], "after", "2", acked)
	for _, n := range keep {
		eventually(t, n+" holds every write", func() error { return c.hasAll(n, acked) })
	}
}

// TestLeaderChangesTellsATransfer: after a group's leadership is handed to
// another voter, every node's LeaderChanges delivers a signal, and by the
// last one the node's Leader names the new leader: the cluster's record of
// who leads which partition is kept from these signals at once, not at a
// poll's next look.
func TestLeaderChangesTellsATransfer(t *testing.T) {
	c := newTestCluster(t, 1, nil, false)
	lead := c.leaderOf(t, 0, testNodes)
	next := testNodes[(slices.Index(testNodes, lead)+1)%len(testNodes)]
	eventually(t, "every node knowing the leader", func() error {
		for _, n := range testNodes {
			if l, _ := c.host(n).Leader(0); l != lead {
				return fmt.Errorf("%s sees %q", n, l)
			}
		}
		return nil
	})
	for _, n := range testNodes {
		select { // what the election signalled
		case <-c.host(n).LeaderChanges():
		default:
		}
	}
	c.target(t, nil, func(GroupID) string { return next })
	for _, n := range testNodes {
		h := c.host(n)
		deadline := time.After(time.Minute)
		for {
			select {
			case <-h.LeaderChanges():
			case <-deadline:
				l, _ := h.Leader(0)
				t.Fatalf("%s: no signal naming the new leader %s (it sees %q)", n, next, l)
			}
			if l, _ := h.Leader(0); l == next {
				break
			}
		}
	}
}
