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

// netCut is the tests' network partition: frames between two cut nodes
// are dropped both ways, their connections left open (Options.test.cut).
type netCut struct {
	mu  sync.Mutex
	cut map[[2]uint64]bool
}

func newNetCut() *netCut { return &netCut{cut: map[[2]uint64]bool{}} }

// install gives each host its view of the partition.
func (nc *netCut) install(o *Options) {
	self := NodeID(o.Node)
	o.test.cut = func(peer uint64) bool {
		nc.mu.Lock()
		defer nc.mu.Unlock()
		return nc.cut[[2]uint64{self, peer}]
	}
}

// isolate cuts n off from every other test node.
func (nc *netCut) isolate(n string) {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	for _, o := range testNodes {
		if o != n {
			nc.cut[[2]uint64{NodeID(n), NodeID(o)}] = true
			nc.cut[[2]uint64{NodeID(o), NodeID(n)}] = true
		}
	}
}

func (nc *netCut) heal() {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	clear(nc.cut)
}

// leaderOf waits until the given nodes agree on group g's leader, one of
// them, and returns it.
func (c *testCluster) leaderOf(t *testing.T, g GroupID, nodes []string) string {
	t.Helper()
	var lead string
	eventually(t, fmt.Sprintf("a leader of group %d among %v", g, nodes), func() error {
		lead = ""
		for _, n := range nodes {
			l, ok := c.host(n).Leader(g)
			if !ok || (lead != "" && l != lead) {
				return fmt.Errorf("%s says %q (%v), others %q", n, l, ok, lead)
			}
			lead = l
		}
		for _, n := range nodes {
			if n == lead {
				return nil
			}
		}
		return fmt.Errorf("the leader %s is not among %v", lead, nodes)
	})
	return lead
}

func others(n string) []string {
	var out []string
	for _, o := range testNodes {
		if o != n {
			out = append(out, o)
		}
	}
	return out
}

// TestReadIndexIsolatedLeader: a quiet leader cut off from its followers
// with no connection broken still names itself leader, and its memory
// holds the value the new leader on the other side has overwritten (the
// stale read the code before the read index answered: the router read
// the leader's memory whenever Leader named this node). Its ReadIndex never
// succeeds while cut off; once healed, a read index succeeds again and the
// node it succeeds on reads the new value.
func TestReadIndexIsolatedLeader(t *testing.T) {
	nc := newNetCut()
	c := newTestCluster(t, 1, nc.install, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const g = GroupID(0)
	if _, err := c.propose(ctx, "n1", g, "k=v1"); err != nil {
		t.Fatal(err)
	}
	old := c.leaderOf(t, g, testNodes)
	if err := c.host(old).ReadIndex(ctx, g); err != nil {
		t.Fatalf("the leader's read index: %v", err)
	}
	if v, _ := c.sm(old, g).get("k"); v != "v1" {
		t.Fatalf("after the read index the leader reads k=%q, want v1", v)
	}
	for _, n := range others(old) {
		if err := c.host(n).ReadIndex(ctx, g); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("a follower's read index: %v, want ErrNotLeader", err)
		}
	}
	c.allQuiet(t, testNodes)

	nc.isolate(old)
	for _, n := range others(old) {
		c.host(n).NodeDown(old) // its lease expired in etcd
	}
	lead := c.leaderOf(t, g, others(old))
	if _, err := c.propose(ctx, lead, g, "k=v2"); err != nil {
		t.Fatal(err)
	}
	// The old leader, quiet, still names itself leader and holds v1:
	// what a read there answered before the read index.
	if l, ok := c.host(old).Leader(g); !ok || l != old {
		t.Fatalf("the cut-off leader names %q (%v) leader; the stale case needs it to name itself", l, ok)
	}
	if v, _ := c.sm(old, g).get("k"); v != "v1" {
		t.Fatalf("the cut-off leader holds k=%q, want the stale v1", v)
	}
	// Its read index never succeeds: it waits, then fails once
	// CheckQuorum steps the node down (or the deadline passes).
	for i := range 3 {
		rctx, rcancel := context.WithTimeout(ctx, 4*time.Second)
		err := c.host(old).ReadIndex(rctx, g)
		rcancel()
		if err == nil {
			v, _ := c.sm(old, g).get("k")
			t.Fatalf("read %d: the cut-off old leader's read index succeeded (it would answer k=%q)", i, v)
		}
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrTimeout) {
			t.Fatalf("read %d: %v, want ErrNotLeader or ErrTimeout", i, err)
		}
		t.Logf("read %d on the cut-off leader: %v", i, err)
	}

	nc.heal()
	c.host(old).NodeDown(lead) // nothing woke it from its side: no frame came
	eventually(t, "a read index after healing", func() error {
		for _, n := range testNodes {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			err := c.host(n).ReadIndex(rctx, g)
			rcancel()
			if err != nil {
				continue
			}
			if v, _ := c.sm(n, g).get("k"); v != "v2" {
				t.Fatalf("after %s's read index it reads k=%q, want v2", n, v)
			}
			return nil
		}
		return errors.New("no node's read index succeeded")
	})
	eventually(t, "the old leader caught up", func() error {
		if v, _ := c.sm(old, g).get("k"); v != "v2" {
			return fmt.Errorf("k=%q", v)
		}
		return nil
	})
}

// TestReadIndexWakesQuietGroup: a quiet group's read index wakes its
// leader, confirms, and the group goes quiet again.
func TestReadIndexWakesQuietGroup(t *testing.T) {
	const groups = 4
	c := newTestCluster(t, groups, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.warm(ctx, t)
	c.allQuiet(t, testNodes)
	for g := range GroupID(groups) {
		lead := c.leaderOf(t, g, testNodes)
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.host(lead).ReadIndex(rctx, g)
		rcancel()
		if err != nil {
			t.Fatalf("group %d: the quiet leader's read index: %v", g, err)
		}
		if v, _ := c.sm(lead, g).get(fmt.Sprintf("warm%d", g)); v != "1" {
			t.Fatalf("group %d: read %q after the read index", g, v)
		}
	}
	c.allQuiet(t, testNodes)
}

// TestReadIndexConcurrent: many readers of one group, a writer writing
// increasing values; every read after a read index sees at least the
// value acknowledged before it began (linearizable), and the readers
// share rounds.
func TestReadIndexConcurrent(t *testing.T) {
	c := newTestCluster(t, 1, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const g = GroupID(0)
	if _, err := c.propose(ctx, "n1", g, "k=0"); err != nil {
		t.Fatal(err)
	}
	lead := c.leaderOf(t, g, testNodes)
	h := c.host(lead)
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
			if _, err := c.propose(ctx, lead, g, "k="+strconv.FormatInt(i, 10)); err != nil {
				t.Errorf("write %d: %v", i, err)
				return
			}
			acked.Store(i)
		}
	}()
	const readers, reads = 32, 50
	before := h.Stats().ReadIndexRounds
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range reads {
				floor := acked.Load()
				rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
				err := h.ReadIndex(rctx, g)
				rcancel()
				if err != nil {
					t.Errorf("read index: %v", err)
					return
				}
				v, _ := c.sm(lead, g).get("k")
				if n, _ := strconv.ParseInt(v, 10, 64); n < floor {
					t.Errorf("read k=%s after a read index begun once %d was acknowledged", v, floor)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-writer
	rounds := h.Stats().ReadIndexRounds - before
	t.Logf("%d read indexes in %d rounds", readers*reads, rounds)
	if rounds == 0 || rounds > readers*reads {
		t.Errorf("%d rounds for %d read indexes", rounds, readers*reads)
	}
}
