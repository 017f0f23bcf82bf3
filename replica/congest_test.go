package replica

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// starvedSenders slows every peer sender of a test cluster down to a
// fixed cost a frame once turned on, as on a node too starved of CPU to
// drain the traffic of all its groups: what a sender cannot write piles
// up in its queue.
type starvedSenders struct {
	on      atomic.Bool
	cost    time.Duration
	written atomic.Int64 // frames written while starved
}

func (s *starvedSenders) install(o *Options) {
	o.test.beforeWrite = func(n int) {
		if s.on.Load() {
			s.written.Add(int64(n))
			time.Sleep(time.Duration(n) * s.cost) // the frames' share of a starved CPU
		}
	}
}

// TestGroupsElectThroughCongestedSenders is the leaderless group of a
// loaded cluster: every group busy (heartbeating each tick), every
// sender able to write fewer frames than its groups produce, so that its
// queue stays full. With one FIFO queue everything waited behind
// seconds of stale heartbeats. A group with a leader could keep it (a
// steady stream, however late, restarts the followers' timers and
// answers the leader's CheckQuorum), but a group that lost its leader
// had to get a vote round trip, then an acknowledgement of the new
// leader's first entry, back within an election timeout; neither came
// (each new leader stepped down at its first CheckQuorum, commit where
// it was), so the group stayed leaderless for as long as the load
// lasted. Here node n1 is cut off, and every group it led must elect n2
// or n3 and commit through their congested link, as must every other
// group. On the old code 101 to 186 of the 256 groups committed nothing
// in 60 s (some that had a leader lost it too).
func TestGroupsElectThroughCongestedSenders(t *testing.T) {
	if testing.Short() {
		t.Skip("a congested cluster of 256 groups")
	}
	const (
		groups = 256
		tick   = 50 * time.Millisecond
	)
	// Before the cut each node leads about 85 groups: a heartbeat and a
	// response to each peer for each group a tick, ~3,400 frames a second
	// against a sender that writes 2,000; once n1 is cut, n2 and n3 lead
	// about 128 each, ~5,000 frames a second each way.
	slow := &starvedSenders{cost: 500 * time.Microsecond}
	nc := newNetCut()
	c := newTestCluster(t, groups, func(o *Options) {
		o.TickInterval = tick
		o.test.noSync = true
		o.test.noQuiesce = true // every group busy, as under writes: its leader heartbeats each tick
		nc.install(o)
		slow.install(o)
	}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.warm(ctx, t) // every group has a leader and has committed

	slow.on.Store(true)
	// The senders' queues fill (on the old code, to the default bound:
	// 4 s of writing): two queues' worth written slowly by each of the
	// six senders.
	eventually(t, "the senders' backlog", func() error {
		if n := slow.written.Load(); n < 6*2*DefaultSendQueue {
			return fmt.Errorf("%d frames written starved", n)
		}
		return nil
	})
	nc.isolate("n1")
	cutAt := time.Now() // wall clock: for the log only

	// Every group commits through n2 or n3: those n1 led elect a leader
	// there first. A generous bound, a hang guard: n1's groups on the old
	// code never got there while the load lasted.
	pctx, pcancel := context.WithTimeout(ctx, 60*time.Second)
	defer pcancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stuck []GroupID
	for g := range GroupID(groups) {
		wg.Go(func() {
			n := []string{"n2", "n3"}[g%2]
			if _, err := c.propose(pctx, n, g, fmt.Sprintf("after%d=1", g)); err != nil {
				mu.Lock()
				stuck = append(stuck, g)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(cutAt).Round(time.Millisecond) // wall clock: for the log only
	var sent, superseded, dropped uint64
	for _, n := range []string{"n2", "n3"} {
		st := c.host(n).Stats()
		sent, superseded, dropped = sent+st.MessagesSent, superseded+st.MessagesSuperseded, dropped+st.MessagesDropped
	}
	t.Logf("after n1's cut: %d groups answered in %v; frames written starved: %d; n2 and n3 queued %d messages, %d superseded, %d dropped",
		groups-len(stuck), took, slow.written.Load(), sent, superseded, dropped)
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
