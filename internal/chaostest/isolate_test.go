package chaostest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mayflydb/mayfly/cluster"
)

// newLabCluster prepares size nodes (not started), node i in lab's
// namespace i on its own address, every port fixed (each namespace has
// its own), with the failover timeout given, and returns them with their
// --peers list. No --chaos-cut-file: the lab cuts the network itself.
func newLabCluster(t *testing.T, bin, logDir string, lab *netLab, size int, failover time.Duration) ([]*node, []string) {
	t.Helper()
	var peers []string
	for i := range size {
		peers = append(peers, fmt.Sprintf("n%d=%s:7100", i+1, lab.Addr(i)))
	}
	nodes := make([]*node, size)
	for i := range nodes {
		dir := t.TempDir()
		n := &node{name: fmt.Sprintf("n%d", i+1), bin: bin, dir: dir, log: filepath.Join(logDir, fmt.Sprintf("n%d.log", i+1)),
			http: lab.Addr(i) + ":8091", mc: lab.Addr(i) + ":11211", kv: lab.Addr(i) + ":11210", lab: lab, idx: i}
		n.args = append(serveArgs(n, dir),
			"--node", n.name, "--peers", strings.Join(peers, ","), "--cluster-lease", "3s",
			"--cluster-failover-timeout", failover.String(), "--cluster-raft-tick", "100ms",
			// Not loopback, but a network of the test's own namespaces.
			"--memcached-allow-remote", "--kv-allow-remote", "--cluster-allow-remote",
			"--log-level", "info") // what the cut does (groups left, copies dropped), for a person reading the kept logs
		nodes[i] = n
	}
	return nodes, peers
}

// isolation is what an isolate case saw beyond its partitionCut.
type isolation struct {
	*partitionCut
	size        int
	etcdLeader  bool                            // the victim's etcd member led etcd at the cut
	failover    time.Duration                   // cut → every map entry that listed the victim changed (-1: not during the cut)
	statusBack  time.Duration                   // cut → the majority's etcd first answered the status (-1: never)
	etcdBack    time.Duration                   // healed → the victim's own etcd member first answered the status (-1: not within 3 min)
	votersAgain time.Duration                   // healed → no partition degraded, none lists the victim... (see runIsolate), nothing lagging
	dropped     time.Duration                   // healed → the victim counts no document (4 nodes: every copy moved away); -1: not within 3 min
	reads       struct{ answered, unknown int } // reads through the victim called during the cut
	// progress is the victim's catch-up timed from its groups' own
	// progress (nil: it could not be read at the heal); lags is what the
	// cluster status (through etcd) said of it meanwhile.
	progress *catchUp
	lags     lagTrace
}

// runIsolate is an isolate case: the register load on size nodes, each in
// a network namespace of its own, for dur; from the middle of it one node
// cut off from every other (etcd, Raft, forwarded requests: all its
// traffic with them, both ways) for partitionFor(dur), clients still
// reaching every node. The failover timeout is shorter than the cut, so
// the orchestrator fails the victim over during it: on 3 nodes (the
// victim is etcd's leader) it stays a degraded voter, on 4 (the victim
// leads the most partitions) a spare replaces it everywhere, by conf
// changes the victim never receives. Beyond the register checks and the
// partition case's (nothing acknowledged through the victim for a
// partition it led): the failover happened during the cut; after the
// heal every partition has its voters again, caught up; on 4 nodes the
// victim left the groups it was replaced in and dropped their documents,
// without a restart. Skipped where namespaces cannot be made (not root).
func runIsolate(t *testing.T, bin string, dur time.Duration, size int) {
	lab, err := newNetLab(t, size)
	if errors.Is(err, errNoNetLab) {
		t.Skipf("the isolate cases need network namespaces: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	logDir := newLogDir(t)
	cutFor := partitionFor(dur)
	failoverTimeout := min(10*time.Second, cutFor/3)
	nodes, peers := newLabCluster(t, bin, logDir, lab, size, failoverTimeout)
	r := startNodes(t, nodes, peers, logDir)
	ctx := context.Background()
	eps, err := etcdEndpoints(peers)
	if err != nil {
		t.Fatal(err)
	}
	iso := &isolation{size: size, failover: -1, statusBack: -1, etcdBack: -1, votersAgain: -1, dropped: -1}
	var pick *node
	if size == 3 {
		i, _, _, err := etcdLeader(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		pick, iso.etcdLeader = nodes[i], true
	}
	if iso.partitionCut, err = partitionVictim(ctx, r, pick); err != nil {
		t.Fatal(err)
	}
	victim := iso.victim
	var others []int
	var majority []string // the other nodes' etcd endpoints
	for i, n := range nodes {
		if n != victim {
			others = append(others, i)
			if i < len(eps) {
				majority = append(majority, eps[i])
			}
		}
	}
	listed, err := readMapAt(ctx, majority)
	if err != nil {
		t.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	failures := r.startRegisterClients(runCtx, &wg)
	endAt := time.Now().Add(dur) // wall clock: the load's length
	fail := func(err error) {
		stop()
		t.Fatal(err)
	}
	wait := func(d time.Duration) {
		select {
		case err := <-failures:
			fail(err)
		case <-time.After(d):
		}
	}
	wait((dur - cutFor) / 2)

	before, err := r.groupLeads(ctx, victim)
	if err != nil {
		fail(err)
	}
	if err := lab.cut(victim.idx, others); err != nil {
		fail(err)
	}
	iso.cutAt = r.now()
	after, err := r.groupLeads(ctx, victim) // the harness still reaches it
	if err != nil {
		fail(err)
	}
	iso.led = map[int]bool{}
	for p := range before {
		if after[p] {
			iso.led[p] = true
		}
	}
	t.Logf("%.1fs: %s (etcd leader: %v) cut off from every other node; its groups led %d of %d partitions before the cut, %d after, %d both (the map: %d); failover timeout %v",
		float64(iso.cutAt)/1e9, victim.name, iso.etcdLeader, len(before), iso.parts, len(after), len(iso.led), iso.mapLed, failoverTimeout)
	for until := time.Now().Add(cutFor); time.Now().Before(until); { // wall clock: the cut's length
		wait(min(time.Until(until), time.Second))
		st, err := clusterStatusAt(ctx, majority)
		if err != nil {
			continue
		}
		if iso.statusBack < 0 {
			iso.statusBack = time.Duration(r.now() - iso.cutAt)
		}
		if bs, ok := st.Bucket("default"); ok && slices.ContainsFunc(bs.Lagging, func(l cluster.Lagging) bool { return l.Follower == victim.name }) {
			iso.seenLagging = true
		}
		if iso.failover < 0 {
			if m, err := readMapAt(ctx, majority); err == nil && failedOver(listed, m, victim.name) {
				iso.failover = time.Duration(r.now() - iso.cutAt)
				t.Logf("%.1fs: %s failed over (%v after the cut)", float64(r.now())/1e9, victim.name, iso.failover.Round(10*time.Millisecond))
			}
		}
	}

	if c, err := iso.startCatchUp(ctx, r, majority); err != nil {
		t.Logf("the victim's catch-up is not timed from the groups' progress: %v", err)
	} else {
		iso.progress = c
	}
	iso.healAt = r.now()
	if err := lab.heal(); err != nil {
		fail(err)
	}
	iso.healed = r.now()
	t.Logf("%.1fs: healed", float64(iso.healed)/1e9)
	progDone := make(chan struct{}, 2)
	go func() {
		defer func() { progDone <- struct{}{} }()
		if iso.progress != nil {
			iso.pollCatchUp(ctx, r)
		}
	}()
	go func() {
		defer func() { progDone <- struct{}{} }()
		iso.pollEtcdBack(ctx, r, eps[victim.idx])
	}()
	iso.lags.victim = victim.name
	iso.caughtUp, iso.nothingLagging = -1, -1
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); { // wall clock: a hang guard
		wait(250 * time.Millisecond)
		since := time.Duration(r.now() - iso.healed)
		if iso.dropped < 0 && size > 3 {
			if c, err := r.itemCount(ctx, victim); err == nil && c == 0 {
				iso.dropped = since
			}
		}
		// Through the majority's members: the victim's own member, which
		// has to rejoin etcd first, answers nothing for tens of seconds
		// after the heal (timed apart: etcdBack).
		began := r.now()
		lags, err := laggingAt(ctx, majority)
		iso.lags.add(time.Duration(began-iso.healed), time.Duration(r.now()-began), lags, err)
		if err != nil {
			continue
		}
		if iso.caughtUp < 0 && !slices.ContainsFunc(lags, func(l cluster.Lagging) bool { return l.Follower == victim.name }) {
			iso.caughtUp = since
		}
		if len(lags) == 0 && iso.nothingLagging < 0 {
			iso.nothingLagging = since
		}
		if iso.votersAgain < 0 && len(lags) == 0 {
			if m, err := readMapAt(ctx, majority); err == nil && allVoters(m, victim.name, size) {
				iso.votersAgain = since
			}
		}
		if iso.nothingLagging >= 0 && iso.votersAgain >= 0 && (size == 3 || iso.dropped >= 0) {
			break
		}
	}
	<-progDone
	<-progDone
	wait(time.Until(endAt))
	stop()
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Fatal(err)
	}
	loadEnd := r.now()
	r.registerChecks(ctx, loadEnd)
	iso.check(r)
}

// startCatchUp reads, just before the heal, what the victim is to catch
// up: the partitions the majority's map lists it a voter of (on 4 nodes a
// spare replaced it in each: none), for each the highest commit index the
// other nodes' groups know, and the victim's own progress (the harness
// reaches every node during the cut).
func (iso *isolation) startCatchUp(ctx context.Context, r *run, majority []string) (*catchUp, error) {
	m, err := readMapAt(ctx, majority)
	if err != nil {
		return nil, err
	}
	var follow []int
	for p, part := range m.Partitions {
		if slices.Contains(part.Voters, iso.victim.name) {
			follow = append(follow, p)
		}
	}
	var others []map[int]groupProgress
	for _, n := range r.nodes {
		if n != iso.victim {
			g, err := r.progress(ctx, n)
			if err != nil {
				return nil, err
			}
			others = append(others, g)
		}
	}
	own, err := r.progress(ctx, iso.victim)
	if err != nil {
		return nil, err
	}
	return newCatchUp(commitTargets(follow, others), own), nil
}

// pollEtcdBack reads the cluster status through the victim's own etcd
// member (endpoint ep) from the heal until it answers, or 3 minutes
// passed: the member rejoining etcd, which the node's lease, its view of
// the maps and its `cluster status` wait for.
func (iso *isolation) pollEtcdBack(ctx context.Context, r *run, ep string) {
	deadline := time.Now().Add(3 * time.Minute) // wall clock: a hang guard
	for time.Now().Before(deadline) {           // wall clock: a hang guard
		began := r.now()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := clusterStatusAt(rctx, []string{ep})
		cancel()
		if err == nil {
			iso.etcdBack = time.Duration(began - iso.healed)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// pollCatchUp reads the victim's progress about every 100 ms from the
// heal until every partition caught up, or 3 minutes passed.
func (iso *isolation) pollCatchUp(ctx context.Context, r *run) {
	deadline := time.Now().Add(3 * time.Minute) // wall clock: a hang guard
	for !iso.progress.done() && time.Now().Before(deadline) {
		began := r.now()
		if now, err := r.progress(ctx, iso.victim); err == nil {
			iso.progress.observe(now, time.Duration(began-iso.healed))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// check asserts and logs what the isolate case is about, after the
// partition case's checks.
func (iso *isolation) check(r *run) {
	t := r.t
	iso.partitionCut.check(r)
	via := iso.victim.name + " "
	for _, op := range r.hist.ops {
		in, out := op.Input.(input), op.Output.(output)
		if in.kind != opGet || op.ClientId == clients || op.Call < iso.cutAt || op.Call >= iso.healAt || !strings.HasPrefix(in.via, via) {
			continue
		}
		switch {
		case out.kind == outUnknown:
			iso.reads.unknown++
		default:
			iso.reads.answered++
		}
	}
	d := func(x time.Duration) string {
		if x < 0 {
			return "never"
		}
		return x.Round(10 * time.Millisecond).String()
	}
	t.Logf("isolate (%d nodes): %s cut off %.1fs (etcd leader: %v); the majority's etcd answered %s after the cut, failover %s after it; reads through %s called during the cut: %d answered (linearizable, checked above), %d without an outcome",
		iso.size, iso.victim.name, float64(iso.healAt-iso.cutAt)/1e9, iso.etcdLeader, d(iso.statusBack), d(iso.failover), iso.victim.name, iso.reads.answered, iso.reads.unknown)
	t.Logf("isolate (%d nodes): after healing, every partition with its voters again and nothing lagging in %s; %s's copies moved away dropped in %s",
		iso.size, d(iso.votersAgain), iso.victim.name, d(iso.dropped))
	if iso.progress != nil {
		t.Logf("isolate (%d nodes): %s's catch-up from its groups' own progress (applied ≥ what the majority had committed at the heal): %v; from the lag reports through etcd: %s",
			iso.size, iso.victim.name, iso.progress, d(iso.caughtUp))

	}
	t.Logf("isolate (%d nodes): what the status reads through the majority's etcd members said of %s after the heal: %v; %s's own member first answered %s after the heal",
		iso.size, iso.victim.name, &iso.lags, iso.victim.name, d(iso.etcdBack))
	if iso.failover < 0 {
		t.Errorf("%s was not failed over during its cut", iso.victim.name)
	}
	if iso.votersAgain < 0 {
		t.Errorf("3 minutes after healing, some partition still lacks its voters (degraded, or listing %s on 4 nodes) or lags", iso.victim.name)
	}
	if iso.size > 3 && iso.dropped < 0 {
		t.Errorf("3 minutes after healing, %s (replaced in every partition it held) still holds documents: it did not leave the groups it was failed over from", iso.victim.name)
	}
}

// failedOver reports whether every entry of before that listed victim
// changed in now (its epoch is newer): failover replaced it, or marked the
// entry degraded.
func failedOver(before, now *cluster.PartitionMap, victim string) bool {
	if len(before.Partitions) != len(now.Partitions) {
		return false
	}
	for p, part := range before.Partitions {
		if slices.Contains(part.Voters, victim) && now.Partitions[p].Epoch <= part.Epoch {
			return false
		}
	}
	return true
}

// allVoters reports whether every partition of m has three voters, is not
// degraded and, with a spare (more than three nodes), does not list the
// victim.
func allVoters(m *cluster.PartitionMap, victim string, size int) bool {
	for _, part := range m.Partitions {
		if part.Degraded || len(part.Voters) != 3 || size > 3 && slices.Contains(part.Voters, victim) {
			return false
		}
	}
	return true
}

// readMapAt reads the default bucket's map through the etcd endpoints
// eps.
func readMapAt(ctx context.Context, eps []string) (*cluster.PartitionMap, error) {
	var m *cluster.PartitionMap
	err := withEtcdAt(ctx, eps, func(ctx context.Context, cli *clientv3.Client) (err error) {
		m, _, err = cluster.ReadMap(ctx, cli, "default")
		if err == nil && m == nil {
			err = fmt.Errorf("the default bucket has no map")
		}
		return err
	})
	return m, err
}

// clusterStatusAt reads the cluster's status through the etcd endpoints
// eps.
func clusterStatusAt(ctx context.Context, eps []string) (*cluster.Status, error) {
	var st *cluster.Status
	err := withEtcdAt(ctx, eps, func(ctx context.Context, cli *clientv3.Client) (err error) {
		st, err = cluster.ReadStatus(ctx, cli, nil)
		return err
	})
	return st, err
}

// itemCount is the number of documents of the default bucket node n
// holds in its own copies: its stats' curr_items (the bucket's
// basicStats.itemCount counts the whole cluster's).
func (r *run) itemCount(ctx context.Context, n *node) (int64, error) {
	code, body, err := call(ctx, r.cl, n, http.MethodGet, "/pools/default/buckets/default/stats", "", "", 10*time.Second)
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("%s: the bucket's stats: %d %s", n.name, code, body)
	}
	var st struct {
		CurrItems int64 `json:"curr_items"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return 0, fmt.Errorf("%s: the bucket's stats: %w", n.name, err)
	}
	return st.CurrItems, nil
}
