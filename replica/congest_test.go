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

// TestGroupsElectThroughCongestedSenders is the leaderless-group bug of
// a loaded cluster: every group busy (heartbeating each tick), every
// sender able to write fewer frames than its groups produce, so its
// queue is always full of heartbeats and their responses. Groups with a
// leader keep it (a steady stream, however late, restarts the
// followers' timers and answers the leader's CheckQuorum), but a group
// that loses its leader must get a vote round trip, and then an
// acknowledgement of the new leader's first entry, back within an
// election timeout; behind a full FIFO queue neither does (the new
// leader steps down at its first CheckQuorum, with commit where it was),
// so such a group stayed leaderless for as long as the load lasted.
// Here node n1 is cut off, and every group it led must elect n2 or n3 and
// commit through that congested link.
func TestGroupsElectThroughCongestedSenders(t *testing.T) {
	if testing.Short() {
		t.Skip("a congested cluster of 256 groups")
	}
	const (
		groups = 256
		tick   = 50 * time.Millisecond
		queue  = 2048
	)
	// Once n1 is cut, each of n2 and n3 leads about 128 groups: a
	// heartbeat and a response each way for each group a tick, ~5,000
	// frames a second against a sender that writes 2,000.
	slow := &starvedSenders{cost: 500 * time.Microsecond}
	nc := newNetCut()
	c := newTestCluster(t, groups, func(o *Options) {
		o.TickInterval = tick
		o.SendQueue = queue
		o.test.noSync = true
		o.test.noQuiesce = true // every group busy, as under writes: its leader heartbeats each tick
		nc.install(o)
		slow.install(o)
	}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.warm(ctx, t) // every group has a leader and has committed

	slow.on.Store(true)
	// The senders' queues fill: a few queues' worth written slowly by each
	// of the six senders.
	eventually(t, "the senders' backlog", func() error {
		if n := slow.written.Load(); n < 6*2*queue {
			return fmt.Errorf("%d frames written starved", n)
		}
		return nil
	})
	nc.isolate("n1")

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
	var sent, superseded uint64
	for _, n := range []string{"n2", "n3"} {
		st := c.host(n).Stats()
		sent += st.MessagesSent
	}
	t.Logf("frames written starved: %d; n2+n3 queued %d messages, superseded %d", slow.written.Load(), sent, superseded)
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
