package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// restartNaming starts node n's host again from its directory, with
// Options.Peers peers, and adds each of its groups with only the voters
// given (what the partition map names now), as serve does after a
// restart.
func (c *testCluster) restartNaming(t *testing.T, n string, voters, peers []string) {
	t.Helper()
	c.openHost(t, n, peers, func(h *Host, g GroupID, sm *kvMachine) error { return h.AddGroup(g, voters, sm) })
}

// TestRestartedNodeReachesVotersTheMapDropped lowers every group from
// n1,n2,n3 to n3 alone while n3 is down, as a lowered replicaNumber whose
// map was written just before n3 restarted: n3 comes back running the
// configuration it stored, n1,n2,n3, but is told of n3 alone (the map's
// voters; n1 and n2 are only shed). The leader n1 and n2 elected while
// it was down hands its leadership to n3, which removes them, so every
// step needs n3 to send to nodes no voter list names. Before Options.Peers
// the restarted Host knew no name but its own: it received every message
// and could answer none ("node not registered"), so the leader saw n3
// down for good, no transfer and no conf change happened, and the shed
// copies stayed (the restart phase of cmd/mayfly's
// TestChaosShedCopyLeavesACutOffNode). Now n3 knows the cluster's nodes
// from the start: it leads every group alone, n1 and n2 left them, and
// every acknowledged write, before and after, is on n3.
func TestRestartedNodeReachesVotersTheMapDropped(t *testing.T) {
	const groups = 4
	c := newTestCluster(t, groups, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	acked := map[GroupID]map[string]string{}
	c.writeAll(ctx, t, "n1", "before", "1", acked)

	c.stop("n3")
	one := []string{"n3"}
	c.target(t, one, func(GroupID) string { return "n3" }) // n1 and n2: the lowered map
	c.restartNaming(t, "n3", one, testNodes)
	c.target(t, one, func(GroupID) string { return "n3" })

	eventually(t, "n1 and n2 left every group", func() error {
		for _, n := range []string{"n1", "n2"} {
			for g := range GroupID(groups) {
				if c.host(n).Holds(g) {
					lag := slices.DeleteFunc(c.host(n).Lagging(), func(l Lag) bool { return l.Group != g })
					return fmt.Errorf("%s still runs group %d (lagging followers it leads: %+v)", n, g, lag)
				}
			}
		}
		return nil
	})
	eventually(t, "n3 alone in every group", func() error { return c.votersAre("n3", one) })
	for g := range GroupID(groups) {
		if l, ok := c.host("n3").Leader(g); !ok || l != "n3" {
			t.Errorf("group %d: leader %q (%v), want n3", g, l, ok)
		}
	}
	c.writeAll(ctx, t, "n3", "after", "2", acked)
	if err := c.hasAll("n3", acked); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRefusesBadPeers: an empty or overlong peer name is refused, the
// cluster's names are taken.
func TestOpenRefusesBadPeers(t *testing.T) {
	base := Options{Dir: t.TempDir(), Node: "n1", Listen: "127.0.0.1:0", Resolver: StaticResolver{}}
	for _, peers := range [][]string{{"n1", ""}, {"n2", string(make([]byte, 65))}} {
		o := base
		o.Peers = peers
		if h, err := Open(o); !errors.Is(err, ErrBadOptions) {
			if h != nil {
				h.Close()
			}
			t.Errorf("peers %q: %v, want ErrBadOptions", peers, err)
		}
	}
	o := base
	o.Peers = []string{"n1", "n2", "n3"}
	h, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
}
