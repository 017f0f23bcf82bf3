package replica

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/mayflydb/mayfly/engine"
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
	nc, c, ctx, old := newCutCluster(t)
	const g = GroupID(0)
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

// TestBucketReadIndexIsolatedLeader: the same partition as engine buckets
// on three nodes (what a cluster node's front doors read). The old leader,
// cut off and quiet, still holds the overwritten value in its bucket
// (what its front doors answered before the read index); its
// ConfirmKeyRead, which every front door now takes before such a read,
// refuses; once healed, the node catches up.
func TestBucketReadIndexIsolatedLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, gid, hosts, buckets := bucketGroupOfThree(t, ctx)
	leader := func(nodes []string) string {
		var lead string
		eventually(t, "a leader among "+fmt.Sprint(nodes), func() error {
			for _, n := range nodes {
				if l, ok := hosts[n].Leader(gid); ok && l == n {
					lead = n
					return nil
				}
			}
			return errors.New("none")
		})
		return lead
	}
	upsert := func(n, v string) {
		t.Helper()
		eventually(t, "writing k="+v+" through "+n, func() error {
			_, err := buckets[n].DefaultCollection().Upsert(ctx, "k", []byte(v), nil)
			return err
		})
	}
	get := func(n string) string {
		d, err := buckets[n].DefaultCollection().Get(ctx, "k")
		if err != nil {
			return err.Error()
		}
		return string(d.Value)
	}

	old := leader(testNodes)
	upsert(old, `1`)
	if err := buckets[old].ConfirmKeyRead(ctx, "k"); err != nil {
		t.Fatalf("the leader's read confirmation: %v", err)
	}
	eventually(t, "the group quiet", func() error {
		for _, n := range testNodes {
			if hosts[n].Quiesced() != 1 {
				return fmt.Errorf("%s not quiet", n)
			}
		}
		return nil
	})

	nc.isolate(old)
	for _, n := range others(old) {
		hosts[n].NodeDown(old)
	}
	lead := leader(others(old))
	upsert(lead, `2`)
	if v := get(old); v != `1` {
		t.Fatalf("the cut-off leader's bucket holds k=%s, want the stale 1", v)
	}
	if l, _ := hosts[old].Leader(gid); l != old {
		t.Fatalf("the cut-off leader names %q leader; the stale case needs it to name itself", l)
	}
	err := buckets[old].ConfirmKeyRead(ctx, "k")
	if err == nil {
		t.Fatalf("the cut-off old leader confirmed a read (it would answer k=%s)", get(old))
	}
	if !errors.Is(err, engine.ErrNotMyVBucket) && !errors.Is(err, engine.ErrTempFail) {
		t.Fatalf("the cut-off old leader's refusal: %v, want not my vbucket or a temporary failure", err)
	}
	t.Logf("the cut-off old leader: %v", err)
	if err := buckets[lead].ConfirmKeyRead(ctx, "k"); err != nil {
		t.Fatalf("the new leader's read confirmation: %v", err)
	}
	if v := get(lead); v != `2` {
		t.Fatalf("the new leader reads k=%s, want 2", v)
	}

	nc.heal()
	hosts[old].NodeDown(lead)
	eventually(t, "the old leader caught up", func() error {
		if v := get(old); v != `2` {
			return fmt.Errorf("k=%s", v)
		}
		return nil
	})
}

// TestReadIndexOfRemovedGroup: a read index waiting on a group (its
// leader cut off) is answered when the group is removed, not left to its
// deadline: the removed group no longer ticks, so nothing else would.
func TestReadIndexOfRemovedGroup(t *testing.T) {
	nc, c, ctx, old := newCutCluster(t)
	const g = GroupID(0)
	c.allQuiet(t, testNodes)
	nc.isolate(old)
	done := make(chan error, 1)
	go func() {
		rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
		defer rcancel()
		done <- c.host(old).ReadIndex(rctx, g)
	}()
	time.Sleep(50 * time.Millisecond) // the read index usually waiting by now; either order is answered
	if err := c.host(old).RemoveGroups(ctx, []GroupID{g}); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if !errors.Is(err, ErrNoGroup) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("the read index of a removed group: %v, want ErrNoGroup (or ErrNotLeader, had it stepped down first)", err)
	}
	t.Logf("the read index of the removed group: %v", err)
}

// TestReadIndexLostRequestIsIssuedAgain: raft may lose a read-index
// request without telling; a round raft never answers (here one it never
// heard of) is issued again after two election timeouts, and its callers,
// and those waiting behind it, are answered.
func TestReadIndexLostRequestIsIssuedAgain(t *testing.T) {
	c := newTestCluster(t, 1, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const g = GroupID(0)
	if _, err := c.propose(ctx, "n1", g, "k=v1"); err != nil {
		t.Fatal(err)
	}
	lead := c.leaderOf(t, g, testNodes)
	h := c.host(lead)
	grp, err := h.group(g)
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan error, 1)
	grp.withRaft(func(rn *raft.RawNode) {
		grp.wakeLocked()
		grp.reads.sent = &readRound{ids: []uint64{1 << 62}, term: rn.BasicStatus().GetTerm(), lead: h.self,
			waiters: []readWaiter{{ch: lost}}}
	})
	behind := make(chan error, 1)
	go func() { behind <- h.ReadIndex(ctx, g) }()
	for name, ch := range map[string]chan error{"the lost round's caller": lost, "a caller behind it": behind} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: no answer (the lost round was not issued again)", name)
		}
	}
}

// bucketGroupOfThree runs bucket "b" (one partition) on the three test
// nodes, in process, each with its own Host and engine, replicated by one
// group (gid) of all three; nc cuts their Raft traffic. They close when
// the test ends. more, if given, change the hosts' Options.
func bucketGroupOfThree(t *testing.T, ctx context.Context, more ...func(*Options)) (nc *netCut, gid GroupID, hosts map[string]*Host, buckets map[string]*engine.Bucket) {
	t.Helper()
	nc = newNetCut()
	res := &testResolver{addrs: map[string]string{}}
	dir := t.TempDir()
	gid = BucketGroup("b", "u", 0)
	hosts = map[string]*Host{}
	buckets = map[string]*engine.Bucket{}
	for _, n := range testNodes {
		o := Options{Dir: filepath.Join(dir, n, "raft"), Node: n, Listen: "127.0.0.1:0", Resolver: res}
		nc.install(&o)
		for _, f := range more {
			f(&o)
		}
		h, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		res.set(n, h.Addr())
		eng, err := engine.Open(filepath.Join(dir, n, "data"), &engine.Options{NumPartitions: 1, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			h.Close()
			eng.Close()
		})
		b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
		if err != nil {
			t.Fatal(err)
		}
		b.SetReplicator(&BucketReplicator{Host: h, Bucket: "b", UUID: "u"})
		if err := h.AddGroup(gid, testNodes, NewBucketMachine(b, 0, nil)); err != nil {
			t.Fatal(err)
		}
		hosts[n], buckets[n] = h, b
	}
	return nc, gid, hosts, buckets
}
