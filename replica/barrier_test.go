package replica

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cutOneWay drops the frames from node a to node b (b's to a still pass).
func (nc *netCut) cutOneWay(a, b string) {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	nc.cut[[2]uint64{NodeID(a), NodeID(b)}] = true
}

// follower returns a node of testNodes other than lead.
func follower(lead string) string { return others(lead)[0] }

// TestReadBarrierFollowerWaitsForCommitted: a follower that missed a
// write its leader acknowledged (the leader's frames to it dropped) does
// not hold it; its ReadBarrier, begun then, does not return while it
// cannot learn the leader's commit index and catch up (its request
// reaches the leader, the answer and the entries do not), and returns
// once they can, with the write applied on the follower. The follower's
// ReadIndex, the leader's read index, still refuses.
func TestReadBarrierFollowerWaitsForCommitted(t *testing.T) {
	nc, c, ctx, lead := newCutCluster(t)
	const g = GroupID(0)
	f := follower(lead)
	if err := c.host(f).ReadBarrier(ctx, []GroupID{g}); err != nil {
		t.Fatalf("the follower's barrier: %v", err)
	}
	if v, _ := c.sm(f, g).get("k"); v != "v1" {
		t.Fatalf("after its barrier the follower reads k=%q, want v1", v)
	}
	if err := c.host(f).ReadIndex(ctx, g); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("the follower's ReadIndex: %v, want ErrNotLeader (it stays leader-only)", err)
	}

	nc.cutOneWay(lead, f)
	if _, err := c.propose(ctx, lead, g, "k=v2"); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.sm(f, g).get("k"); v != "v1" {
		t.Fatalf("the cut-off follower holds k=%q already; the case needs it behind", v)
	}
	done := make(chan error, 1)
	go func() {
		bctx, bcancel := context.WithTimeout(ctx, 60*time.Second)
		defer bcancel()
		done <- c.host(f).ReadBarrier(bctx, []GroupID{g})
	}()
	select {
	case err := <-done:
		v, _ := c.sm(f, g).get("k")
		t.Fatalf("the barrier returned (%v) while the follower could not catch up (it reads k=%q)", err, v)
	case <-time.After(3 * time.Second): // 30 ticks: it would have answered by then
	}
	if v, _ := c.sm(f, g).get("k"); v != "v1" {
		t.Fatalf("the follower reads k=%q while cut", v)
	}
	nc.heal()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the barrier after healing: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the barrier did not return after healing")
	}
	if v, _ := c.sm(f, g).get("k"); v != "v2" {
		t.Fatalf("after its barrier the follower reads k=%q, want v2 (acknowledged before the barrier began)", v)
	}
}

// TestReadBarrierNoLeader: a follower cut off from every other node
// knows no leader; its barrier ends when ctx does, with ErrTimeout
// saying so, and succeeds once the cut heals.
func TestReadBarrierNoLeader(t *testing.T) {
	nc, c, ctx, lead := newCutCluster(t)
	const g = GroupID(0)
	f := follower(lead)
	nc.isolate(f)
	c.host(f).NodeDown(lead) // as its lease expiring would: it wakes and campaigns
	eventually(t, "the isolated follower without a leader", func() error {
		if l, ok := c.host(f).Leader(g); ok {
			return fmt.Errorf("it names %s leader", l)
		}
		return nil
	})
	bctx, bcancel := context.WithTimeout(ctx, time.Second)
	err := c.host(f).ReadBarrier(bctx, []GroupID{g})
	bcancel()
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("the barrier without a leader: %v, want ErrTimeout", err)
	}
	t.Logf("without a leader: %v", err)

	nc.heal()
	if _, err := c.propose(ctx, lead, g, "k=v2"); err != nil {
		t.Fatal(err)
	}
	bctx, bcancel = context.WithTimeout(ctx, 60*time.Second)
	defer bcancel()
	if err := c.host(f).ReadBarrier(bctx, []GroupID{g}); err != nil {
		t.Fatalf("the barrier after healing: %v", err)
	}
	if v, _ := c.sm(f, g).get("k"); v != "v2" {
		t.Fatalf("after its barrier the follower reads k=%q, want v2", v)
	}
}

// TestReadBarrierManyGroups: one barrier over many quiet groups, most led
// by other nodes: every write acknowledged before it is visible on the
// node after it, each group issued one round (not one a caller), and the
// groups go quiet again on every node. Concurrent barriers with a writer
// each see at least what was acknowledged before they began.
func TestReadBarrierManyGroups(t *testing.T) {
	const groups = 64
	c := newTestCluster(t, groups, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c.warm(ctx, t)
	c.allQuiet(t, testNodes)
	ids := make([]GroupID, groups)
	leads := map[string]int{}
	for g := range GroupID(groups) {
		ids[g] = g
		lead := c.leaderOf(t, g, testNodes)
		leads[lead]++
		if _, err := c.propose(ctx, lead, g, fmt.Sprintf("k%d=v", g)); err != nil {
			t.Fatal(err)
		}
	}
	// The node leading fewest groups (at most a third): it follows most.
	n := testNodes[0]
	for _, o := range testNodes {
		if leads[o] < leads[n] {
			n = o
		}
	}
	t.Logf("%s leads %d of %d groups", n, leads[n], groups)
	h := c.host(n)
	before := h.Stats().ReadIndexRounds
	if err := h.ReadBarrier(ctx, ids); err != nil {
		t.Fatal(err)
	}
	for g := range GroupID(groups) {
		if v, _ := c.sm(n, g).get(fmt.Sprintf("k%d", g)); v != "v" {
			t.Fatalf("group %d: after the barrier %s reads %q", g, n, v)
		}
	}
	if r := h.Stats().ReadIndexRounds - before; r < groups || r > 2*groups {
		t.Errorf("one barrier over %d groups issued %d rounds", groups, r)
	}
	c.allQuiet(t, testNodes)

	// Concurrent barriers, a writer on group 0 through its leader.
	lead := c.leaderOf(t, 0, testNodes)
	var acked atomic.Int64
	stop := make(chan struct{})
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		for i := int64(1); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.propose(ctx, lead, 0, "w="+strconv.FormatInt(i, 10)); err != nil {
				t.Errorf("write %d: %v", i, err)
				return
			}
			acked.Store(i)
		}
	}()
	reader := follower(lead)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				floor := acked.Load()
				bctx, bcancel := context.WithTimeout(ctx, 30*time.Second)
				err := c.host(reader).ReadBarrier(bctx, ids)
				bcancel()
				if err != nil {
					t.Errorf("barrier: %v", err)
					return
				}
				v, _ := c.sm(reader, 0).get("w")
				if got, _ := strconv.ParseInt(v, 10, 64); got < floor {
					t.Errorf("follower %s read w=%s after a barrier begun once %d was acknowledged", reader, v, floor)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-writer
	if t.Failed() {
		return
	}
	c.allQuiet(t, testNodes)
}
