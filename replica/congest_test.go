package replica

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// starved slows a test cluster's peer senders, or the steppers of its
// inbound connections, down to a fixed cost a frame once turned on, as on
// a node too starved of CPU to handle the traffic of all its groups:
// what one side cannot handle piles up in front of it.
type starved struct {
	on      atomic.Bool
	cost    time.Duration
	handled atomic.Int64 // frames written (or stepped) while starved
}

func (s *starved) senders(o *Options) {
	o.test.beforeWrite = func(n int) {
		if s.on.Load() {
			s.handled.Add(int64(n))
			time.Sleep(time.Duration(n) * s.cost) // the frames' share of a starved CPU
		}
	}
}

func (s *starved) receivers(o *Options) {
	o.test.beforeStep = func(n int) {
		if s.on.Load() {
			s.handled.Add(int64(n))
			time.Sleep(time.Duration(n) * s.cost) // the frames' share of a starved CPU
		}
	}
}

// TestGroupsElectOnStarvedNodes is the leaderless group of a loaded
// cluster: every group busy (heartbeating each tick), and every node
// able to write (or to step) fewer frames than its groups produce. In
// arrival order, everything waited behind seconds of stale heartbeats,
// in a sender's queue or in the sockets' buffers. A group with a leader
// could keep it (a steady stream, however late, restarts the followers'
// timers and answers the leader's CheckQuorum), but a group that lost
// its leader had to get a vote round trip, then an acknowledgement of
// the new leader's first entry, back within an election timeout; neither
// came (each new leader stepped down at its first CheckQuorum, commit
// where it was), so the group stayed leaderless for as long as the load
// lasted. Here node n1 is cut off, and every group it led must elect n2
// or n3 and commit through their congested link, as must every other
// group. On the old code 24 to 75 of the 128 groups (starved senders)
// and 63 to 128 (starved receivers) committed nothing in 60 s: some that
// had a leader lost it too.
func TestGroupsElectOnStarvedNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("a congested cluster of 128 groups")
	}
	// A starved sender's backlog is in its queue; a starved receiver's
	// was in the sockets' buffers (the peer's writes went through, its
	// queue stayed short) until the receiver read them into its inbox.
	t.Run("senders", func(t *testing.T) { congested(t, (*starved).senders) })
	t.Run("receivers", func(t *testing.T) { congested(t, (*starved).receivers) })
}

func congested(t *testing.T, starve func(*starved, *Options)) {
	const (
		groups = 128
		queue  = 2048
	)
	// At the default tick (100 ms; election timeout 1-2 s), before the
	// cut each node leads about 43 groups: a heartbeat and a response to
	// each peer for each group a tick, ~850 frames a second each way
	// against a side that handles 667; once n1 is cut, n2 and n3 lead 64
	// each, ~1,280 frames a second each way.
	slow := &starved{cost: 1500 * time.Microsecond}
	nc := newNetCut()
	c := newTestCluster(t, groups, func(o *Options) {
		o.SendQueue = queue
		o.test.noSync = true
		o.test.noQuiesce = true // every group busy, as under writes: its leader heartbeats each tick
		nc.install(o)
		starve(slow, o)
	}, false)
	// Every group gets a leader and commits (concurrently: 128 groups
	// one after the other take long on a busy machine).
	wctx, wcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer wcancel()
	commitAll(wctx, t, c, groups, testNodes, "warm")

	slow.on.Store(true)
	// The backlogs build: four queues' worth handled slowly on each of the
	// six connections (a sender's queue on the old code grows by a
	// quarter each batch it writes, and reaches its bound, 3 s of
	// writing, by then).
	eventually(t, "the backlog", func() error {
		if n := slow.handled.Load(); n < 6*4*queue {
			return fmt.Errorf("%d frames handled starved", n)
		}
		return nil
	})
	nc.isolate("n1")
	cutAt := time.Now() // wall clock: for the log only

	// Every group commits through n2 or n3: those n1 led elect a leader
	// there first. A generous bound, a hang guard: n1's groups on the old
	// code never got there while the load lasted.
	pctx, pcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer pcancel()
	stuck := commitAll(pctx, nil, c, groups, []string{"n2", "n3"}, "after")
	took := time.Since(cutAt).Round(time.Millisecond) // wall clock: for the log only
	var sent, superseded, dropped uint64
	for _, n := range []string{"n2", "n3"} {
		st := c.host(n).Stats()
		sent, superseded, dropped = sent+st.MessagesSent, superseded+st.MessagesSuperseded, dropped+st.MessagesDropped
	}
	t.Logf("after n1's cut: %d groups answered in %v; frames handled starved: %d; n2 and n3 queued %d messages, %d superseded, %d dropped",
		groups-len(stuck), took, slow.handled.Load(), sent, superseded, dropped)
	if len(stuck) > 0 {
		leaderless := 0
		for _, g := range stuck {
			if _, ok := c.host("n2").Leader(g); !ok {
				leaderless++
			}
		}
		t.Fatalf("%d of %d groups committed nothing within 60 s of n1's cut (%d of them leaderless on n2), e.g. group %d",
			len(stuck), groups, leaderless, stuck[0])
	}
}

// commitAll proposes an entry to each group through nodes (in turn) at
// once, each retried until acknowledged or ctx ends, and returns the
// groups that got none acknowledged; with t, any such group fails it.
func commitAll(ctx context.Context, t *testing.T, c *testCluster, groups int, nodes []string, what string) []GroupID {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stuck []GroupID
	for g := range GroupID(groups) {
		wg.Go(func() {
			n := nodes[int(g)%len(nodes)]
			if _, err := c.propose(ctx, n, g, fmt.Sprintf("%s%d=1", what, g)); err != nil {
				mu.Lock()
				stuck = append(stuck, g)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t != nil && len(stuck) > 0 {
		t.Fatalf("%s: %d groups committed nothing, e.g. group %d", what, len(stuck), stuck[0])
	}
	return stuck
}
