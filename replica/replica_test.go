package replica

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mayflydb/mayfly/cluster"
)

// testResolver is a name-to-address table the test updates as hosts
// (re)start on fresh ports.
type testResolver struct {
	mu    sync.Mutex
	addrs map[string]string
}

func (r *testResolver) Addr(_ context.Context, node string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.addrs[node]; ok {
		return a, nil
	}
	return "", fmt.Errorf("no address for %q", node)
}

func (r *testResolver) set(node, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addrs[node] = addr
}

// testCluster is hosts on loopback in one process, each running its part
// of a partition map.
type testCluster struct {
	t       testing.TB
	dir     string
	res     *testResolver
	pm      *cluster.PartitionMap
	mu      sync.Mutex
	hosts   map[string]*Host
	sms     map[string]map[GroupID]*kvMachine
	opts    func(*Options)
	groups  int
	crashFS map[string]*vfs.MemFS // nodes whose store is on a crashable file system
}

var testNodes = []string{"n1", "n2", "n3"}

func newTestCluster(t testing.TB, groups int, opts func(*Options), crashable bool) *testCluster {
	t.Helper()
	pm := &cluster.PartitionMap{Bucket: "b", Copies: 3, Partitions: cluster.Place(testNodes, groups, 3)}
	c := &testCluster{t: t, dir: t.TempDir(), res: &testResolver{addrs: map[string]string{}}, pm: pm,
		hosts: map[string]*Host{}, sms: map[string]map[GroupID]*kvMachine{}, opts: opts, groups: groups}
	if crashable {
		c.useCrashFS()
	}
	for _, n := range testNodes {
		c.start(n)
	}
	t.Cleanup(func() {
		for _, n := range testNodes {
			c.stop(n)
		}
	})
	return c
}

// start opens node n's host from its directory and adds its groups, each
// state machine rebuilt from the store.
func (c *testCluster) start(n string) {
	c.t.Helper()
	o := Options{Dir: filepath.Join(c.dir, n), Node: n, Listen: "127.0.0.1:0", Resolver: c.res}
	if c.opts != nil {
		c.opts(&o)
	}
	c.mu.Lock()
	if fs := c.crashFS[n]; fs != nil {
		o.test.fs = fs
	}
	c.mu.Unlock()
	h, err := Open(o)
	if err != nil {
		c.t.Fatal(err)
	}
	c.res.set(n, h.Addr())
	sms := map[GroupID]*kvMachine{}
	for _, mg := range MapGroups(c.pm, n) {
		g := GroupID(mg.Partition)
		sm, err := loadKV(h, g)
		if err != nil {
			c.t.Fatal(err)
		}
		if err := h.AddGroup(g, mg.Voters, sm); err != nil {
			c.t.Fatal(err)
		}
		sms[g] = sm
	}
	c.mu.Lock()
	c.hosts[n], c.sms[n] = h, sms
	c.mu.Unlock()
}

// useCrashFS puts the nodes' stores on crashable in-memory file systems
// (before they start), for crash.
func (c *testCluster) useCrashFS() {
	c.crashFS = map[string]*vfs.MemFS{}
	for _, n := range testNodes {
		c.crashFS[n] = vfs.NewCrashableMem()
	}
}

// crash kills node n as a power cut would: its store restarts from what
// was synced at this moment, nothing written since the last fsync.
func (c *testCluster) crash(n string) {
	c.mu.Lock()
	fs := c.crashFS[n]
	c.mu.Unlock()
	if fs == nil {
		c.t.Fatalf("%s is not on a crashable file system", n)
	}
	synced := fs.CrashClone(vfs.CrashCloneCfg{})
	c.stop(n)
	c.mu.Lock()
	c.crashFS[n] = synced
	c.mu.Unlock()
}

// stop closes node n's host at once (Close has no clean-shutdown step).
func (c *testCluster) stop(n string) {
	c.mu.Lock()
	h := c.hosts[n]
	delete(c.hosts, n)
	c.mu.Unlock()
	if h != nil {
		if err := h.Close(); err != nil {
			c.t.Errorf("closing %s: %v", n, err)
		}
	}
}

func (c *testCluster) host(n string) *Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hosts[n]
}

func (c *testCluster) sm(n string, g GroupID) *kvMachine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sms[n][g]
}

// propose retries a mutation on group g through node n until it is
// acknowledged (a leaderless moment, a lost proposal or one whose leader
// changed is retried, as a client would), or the deadline.
func (c *testCluster) propose(ctx context.Context, n string, g GroupID, data string) (Result, error) {
	res, _, err := c.proposeCounting(ctx, n, g, data)
	return res, err
}

// proposeCounting is propose, also saying whether an attempt before the
// one answered ended with its outcome unknown (a timeout, or the leader
// changing while it waited): that attempt may have been applied, so the
// answer's previous value may be this very data's.
func (c *testCluster) proposeCounting(ctx context.Context, n string, g GroupID, data string) (Result, bool, error) {
	unknown := false
	for {
		h := c.host(n)
		if h == nil {
			return Result{}, unknown, ErrClosed
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		res, err := h.Propose(pctx, g, []byte(data))
		cancel()
		if err == nil || ctx.Err() != nil || !(errors.Is(err, ErrNoLeader) || errors.Is(err, ErrBusy) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrLeaderChanged)) {
			return res, unknown, err
		}
		if errors.Is(err, ErrTimeout) || errors.Is(err, ErrLeaderChanged) {
			unknown = true
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventually polls cond until it holds or a generous deadline (a hang
// guard, not a speed assertion) passes.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // wall clock: a hang guard (elections of race-built hosts on a busy machine)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) { // wall clock: a hang guard
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logHas reports whether node n's log holds entry index of group g with
// this data (the entry is then on n's disk: the in-memory log is appended
// after the round's sync).
func logHas(h *Host, g GroupID, index uint64, data string) bool {
	grp, err := h.group(g)
	if err != nil {
		return false
	}
	if last, _ := grp.ms.LastIndex(); last < index {
		return false
	}
	ents, err := grp.ms.Entries(index, index+1, math.MaxUint64)
	if err != nil || len(ents) != 1 {
		return false
	}
	d := ents[0].GetData()
	return len(d) >= proposalHeader && string(d[proposalHeader:]) == data
}

// sameLogs checks that every replica of every group applied the same
// entries in the same order: where two replicas' apply logs overlap (by
// index) they agree, and each log's indexes increase.
func (c *testCluster) sameLogs(nodes []string) error {
	for g := range GroupID(c.groups) {
		byIndex := map[uint64]Entry{}
		for _, n := range nodes {
			log := c.sm(n, g).applyLog()
			for i, e := range log {
				if i > 0 && e.Index <= log[i-1].Index {
					return fmt.Errorf("group %d on %s applied index %d after %d", g, n, e.Index, log[i-1].Index)
				}
				if o, ok := byIndex[e.Index]; ok && (o.Term != e.Term || string(o.Data) != string(e.Data)) {
					return fmt.Errorf("group %d index %d: %s applied %q (term %d), another replica %q (term %d)",
						g, e.Index, n, e.Data, e.Term, o.Data, o.Term)
				}
				byIndex[e.Index] = e
			}
		}
	}
	return nil
}

// hasAll checks that node n's state machines hold every acknowledged
// mutation (each key is written once).
func (c *testCluster) hasAll(n string, acked map[GroupID]map[string]string) error {
	for g, kvs := range acked {
		sm := c.sm(n, g)
		for k, v := range kvs {
			if got, ok := sm.get(k); !ok || got != v {
				return fmt.Errorf("%s group %d: %s = %q, want %q (acknowledged)", n, g, k, got, v)
			}
		}
	}
	return nil
}

func TestReplicateAcknowledgesOnMajority(t *testing.T) {
	c := newTestCluster(t, 64, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	acked := map[GroupID]map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range GroupID(64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				n := testNodes[(int(g)+i)%3] // followers propose too
				k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d-%d", g, i)
				res, retried, err := c.proposeCounting(ctx, n, g, k+"="+v)
				if err != nil {
					errs <- fmt.Errorf("group %d via %s: %w", g, n, err)
					return
				}
				// Acknowledged: on the disks of a majority already.
				on := 0
				for _, m := range testNodes {
					if logHas(c.host(m), g, res.Index, k+"="+v) {
						on++
					}
				}
				if on < 2 {
					errs <- fmt.Errorf("group %d index %d acknowledged while in %d logs", g, res.Index, on)
				}
				// The key is new, unless an attempt whose outcome was
				// unknown (a busy machine's 3 s timeout) was applied
				// after all: then the retry finds that attempt's value.
				if res.Value != "" && !(retried && res.Value == v) {
					errs <- fmt.Errorf("group %d: %s's previous value %q, want none (retried after an unknown outcome: %v)", g, k, res.Value, retried)
				}
				mu.Lock()
				if acked[g] == nil {
					acked[g] = map[string]string{}
				}
				acked[g][k] = v
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	// Overwriting returns the previous value (the state machine's result
	// reaches the proposer).
	res, err := c.propose(ctx, "n2", 7, "k0=again")
	if err != nil || res.Value != "v7-0" {
		t.Fatalf("overwrite: %+v %v, want previous value v7-0", res, err)
	}
	acked[7]["k0"] = "again"
	for _, n := range testNodes {
		eventually(t, "every replica applies every acknowledged mutation", func() error { return c.hasAll(n, acked) })
	}
	if err := c.sameLogs(testNodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range testNodes {
		st := c.host(n).Stats()
		if st.Syncs == 0 || st.Syncs > st.Rounds {
			t.Errorf("%s: %d syncs in %d rounds: want at most one a round", n, st.Syncs, st.Rounds)
		}
	}
}

// writer proposes unique keys to random groups through random live nodes
// until stopped, recording what was acknowledged.
type writer struct {
	c     *testCluster
	mu    sync.Mutex
	acked map[GroupID]map[string]string
	count int
	stop  chan struct{}
	wg    sync.WaitGroup
	seq   int
}

func startWriters(c *testCluster, workers int, nodes func() []string) *writer {
	w := &writer{c: c, acked: map[GroupID]map[string]string{}, stop: make(chan struct{})}
	for i := range workers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for j := 0; ; j++ {
				select {
				case <-w.stop:
					return
				default:
				}
				ns := nodes()
				n := ns[r.IntN(len(ns))]
				g := GroupID(r.IntN(c.groups))
				k := fmt.Sprintf("w%d-%d", i, j)
				h := c.host(n)
				if h == nil {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := h.Propose(ctx, g, []byte(k+"=x"))
				cancel()
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				w.mu.Lock()
				if w.acked[g] == nil {
					w.acked[g] = map[string]string{}
				}
				w.acked[g][k] = "x"
				w.count++
				w.mu.Unlock()
			}
		}()
	}
	return w
}

func (w *writer) acks() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count
}

func (w *writer) finish() map[GroupID]map[string]string {
	close(w.stop)
	w.wg.Wait()
	return w.acked
}

func TestFailoverAndCatchUp(t *testing.T) {
	// Small snapshot intervals: the restarted node catches up through
	// snapshots for the groups that moved on without it.
	c := newTestCluster(t, 64, func(o *Options) { o.SnapshotEntries, o.KeepEntries = 20, 5 }, true)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for g := range GroupID(64) {
		if _, err := c.propose(ctx, testNodes[int(g)%3], g, "warm=1"); err != nil {
			t.Fatalf("group %d: %v", g, err)
		}
	}
	// The victim is the node leading the most groups.
	leads := map[string][]GroupID{}
	for g := range GroupID(64) {
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
	if len(leads[victim]) == 0 {
		t.Fatalf("no leaders known: %v", leads)
	}
	var survivors []string
	for _, n := range testNodes {
		if n != victim {
			survivors = append(survivors, n)
		}
	}
	live := func() []string { return survivors }
	w := startWriters(c, 8, live)
	eventually(t, "writes acknowledged before the kill", func() error {
		if w.acks() < 50 {
			return fmt.Errorf("%d acks", w.acks())
		}
		return nil
	})
	c.crash(victim) // no leadership transfer, and its store keeps only what was synced
	before := w.acks()
	// Every group the victim led elects a leader among the survivors and
	// acknowledges again.
	for _, g := range leads[victim] {
		if _, err := c.propose(ctx, survivors[int(g)%2], g, fmt.Sprintf("after%d=1", g)); err != nil {
			t.Fatalf("group %d (led by %s) after the kill: %v", g, victim, err)
		}
		w.mu.Lock()
		if w.acked[g] == nil {
			w.acked[g] = map[string]string{}
		}
		w.acked[g][fmt.Sprintf("after%d", g)] = "1"
		w.mu.Unlock()
		l, ok := c.host(survivors[0]).Leader(g)
		if !ok || l == victim {
			t.Errorf("group %d: leader %q after the kill", g, l)
		}
	}
	// One group moves on by more than a snapshot interval and what it
	// keeps: the victim can only catch it up from a snapshot, whatever
	// the random writers' spread (on a busy machine they may write too
	// little to any one group for that).
	deep := leads[victim][0]
	for i := range 30 {
		k := fmt.Sprintf("deep%d", i)
		if _, err := c.propose(ctx, survivors[0], deep, k+"=1"); err != nil {
			t.Fatalf("group %d after the kill: %v", deep, err)
		}
		w.mu.Lock()
		w.acked[deep][k] = "1"
		w.mu.Unlock()
	}
	eventually(t, "writes acknowledged after the kill", func() error {
		if w.acks() < before+100 {
			return fmt.Errorf("%d acks since the kill", w.acks()-before)
		}
		return nil
	})
	c.start(victim)
	restarted := c.host(victim)
	eventually(t, "writes acknowledged with the node back", func() error {
		if w.acks() < before+200 {
			return fmt.Errorf("%d acks since the kill", w.acks()-before)
		}
		return nil
	})
	acked := w.finish()
	for _, n := range testNodes {
		eventually(t, n+" holds every acknowledged write", func() error { return c.hasAll(n, acked) })
	}
	if err := c.sameLogs(testNodes); err != nil {
		t.Fatal(err)
	}
	if st := restarted.Stats(); st.SnapshotsRestored == 0 {
		t.Errorf("%s caught up without a snapshot (%+v): the test meant to cover both", victim, st)
	}
	// Every replica ends with the same state in every group.
	for g := range GroupID(64) {
		eventually(t, "replicas converge", func() error {
			want := c.sm(survivors[0], g).snapshotData()
			for _, n := range testNodes {
				if got := c.sm(n, g).snapshotData(); !mapsEqual(got, want) {
					return fmt.Errorf("group %d: %s holds %d keys, %s %d", g, n, len(got), survivors[0], len(want))
				}
			}
			return nil
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestMinorityAcknowledgesNothing(t *testing.T) {
	c := newTestCluster(t, 8, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for g := range GroupID(8) {
		if _, err := c.propose(ctx, "n1", g, "a=1"); err != nil {
			t.Fatal(err)
		}
	}
	c.stop("n2")
	c.stop("n3")
	h := c.host("n1")
	for g := range GroupID(8) {
		pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
		res, err := h.Propose(pctx, g, []byte("b=2"))
		pcancel()
		if !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrLeaderChanged) {
			t.Fatalf("group %d on a minority: %+v, %v; want ErrNoLeader, ErrTimeout or ErrLeaderChanged", g, res, err)
		}
	}
	// After an election timeout or two, the minority knows it has no
	// leader (CheckQuorum deposes a leader cut off from its followers) and
	// refuses at once.
	eventually(t, "the minority knows no leader", func() error {
		for g := range GroupID(8) {
			if _, err := h.Propose(ctx, g, []byte("c=3")); !errors.Is(err, ErrNoLeader) {
				return fmt.Errorf("group %d: %v", g, err)
			}
		}
		return nil
	})
	for g := range GroupID(8) {
		if v, ok := c.sm("n1", g).get("b"); ok {
			t.Errorf("group %d applied b=%q without a majority", g, v)
		}
	}
}

func TestTransportSurvivesGarbage(t *testing.T) {
	c := newTestCluster(t, 2, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, junk := range [][]byte{
		[]byte("GET / HTTP/1.0\r\n\r\n"),
		append([]byte("MFR1\x00\x00\x00\x00\x00\x00\x00\x01"), 0xff, 0xff, 0xff, 0xff), // a 4 GB frame
		append([]byte("MFR1\x00\x00\x00\x00\x00\x00\x00\x01"), 0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4),
	} {
		conn, err := net.Dial("tcp", c.host("n1").Addr())
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(junk)
		conn.Close()
	}
	for g := range GroupID(2) {
		if _, err := c.propose(ctx, "n1", g, "after=junk"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenRefusesRemoteAndBadOptions(t *testing.T) {
	res := StaticResolver{}
	_, err := Open(Options{Dir: t.TempDir(), Node: "n1", Listen: "0.0.0.0:0", Resolver: res})
	if !errors.Is(err, ErrRemote) {
		t.Fatalf("listen everywhere without AllowRemote: %v, want ErrRemote", err)
	}
	_, err = Open(Options{Dir: t.TempDir(), Node: "n1", Listen: "127.0.0.1:0"})
	if !errors.Is(err, ErrBadOptions) {
		t.Fatalf("no resolver: %v, want ErrBadOptions", err)
	}
	h, err := Open(Options{Dir: t.TempDir(), Node: "n1", Listen: "127.0.0.1:0", Resolver: res})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.AddGroup(1, []string{"n2", "n3"}, newKV()); !errors.Is(err, ErrBadOptions) {
		t.Errorf("a group without this node: %v, want ErrBadOptions", err)
	}
	if err := h.AddGroup(1, []string{"n1", "n2", "n3"}, newKV()); err != nil {
		t.Fatal(err)
	}
	if err := h.AddGroup(1, []string{"n1", "n2", "n3"}, newKV()); !errors.Is(err, ErrGroupExists) {
		t.Errorf("the same group twice: %v, want ErrGroupExists", err)
	}
	if _, err := h.Propose(context.Background(), 2, []byte("a=1")); !errors.Is(err, ErrNoGroup) {
		t.Errorf("an unknown group: %v, want ErrNoGroup", err)
	}
	if !slices.Equal(MapGroups(&cluster.PartitionMap{Partitions: []cluster.Partition{
		{Voters: []string{"n1", "n2"}}, {Voters: []string{"n2", "n3"}}, {Voters: []string{"n3", "n1"}},
	}}, "n1")[1].Voters, []string{"n3", "n1"}) {
		t.Error("MapGroups: wrong voters")
	}
}

func TestRestartAllFromDisk(t *testing.T) {
	c := newTestCluster(t, 4, func(o *Options) { o.SnapshotEntries, o.KeepEntries = 10, 3 }, true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	acked := map[GroupID]map[string]string{}
	for g := range GroupID(4) {
		acked[g] = map[string]string{}
		for i := range 25 { // past two snapshots and compactions
			k := fmt.Sprintf("k%d", i)
			if _, err := c.propose(ctx, testNodes[i%3], g, k+"=1"); err != nil {
				t.Fatal(err)
			}
			acked[g][k] = "1"
		}
	}
	for _, n := range testNodes {
		eventually(t, n+" applies everything", func() error { return c.hasAll(n, acked) })
	}
	lastIndex := map[GroupID]uint64{}
	for g := range GroupID(4) {
		log := c.sm("n1", g).applyLog()
		lastIndex[g] = log[len(log)-1].Index
	}
	for _, n := range testNodes {
		c.crash(n) // each store keeps only what it synced
	}
	for _, n := range testNodes {
		c.start(n)
	}
	// The state machines come back from the store (what a round applied
	// was committed with its applied index) ...
	for _, n := range testNodes {
		if err := c.hasAll(n, acked); err != nil {
			t.Fatalf("after a restart: %v", err)
		}
	}
	// ... and the groups go on from their logs: new entries follow the old.
	for g := range GroupID(4) {
		res, err := c.propose(ctx, "n2", g, "k0=2")
		if err != nil {
			t.Fatal(err)
		}
		if res.Index <= lastIndex[g] || res.Value != "1" {
			t.Errorf("group %d: new entry at %d (last before %d), previous value %q", g, res.Index, lastIndex[g], res.Value)
		}
		acked[g]["k0"] = "2"
	}
	for _, n := range testNodes {
		eventually(t, n+" applies the new entries", func() error { return c.hasAll(n, acked) })
	}
	if err := c.sameLogs(testNodes); err != nil {
		t.Fatal(err)
	}
}
