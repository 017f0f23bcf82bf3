package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mayflydb/mayfly/cluster"
)

// readDefaultMap reads the default bucket's partition map from etcd.
func readDefaultMap(peers []string) (*cluster.PartitionMap, error) { return readMap(peers, "default") }

// readMap reads bucket's partition map from etcd.
func readMap(peers []string, bucket string) (*cluster.PartitionMap, error) {
	var m *cluster.PartitionMap
	err := withPeersClient(peers, func(ctx context.Context, cli *clientv3.Client) (err error) {
		if m, _, err = cluster.ReadMap(ctx, cli, bucket); err == nil && m == nil {
			err = fmt.Errorf("bucket %s is not placed yet", bucket)
		}
		return err
	})
	return m, err
}

// leadersFollowMap checks that every partition's latest lead record
// (the group's leader, recorded as it leads: recordsFollowMap) is the
// map's preferred leader's, and that every live node's configuration of
// the map's bucket names it first: the groups' leaders are the map's,
// and every node serves them. (A configuration alone would not tell:
// it names the preferred leader of a partition no record names yet, a
// group still electing.)
func leadersFollowMap(nodes []*procNode, m *cluster.PartitionMap) error {
	var peers []string // the --peers the nodes were started with (the last given wins)
	for i, a := range nodes[0].args {
		if a == "--peers" && i+1 < len(nodes[0].args) {
			peers = strings.Split(nodes[0].args[i+1], ",")
		}
	}
	if err := recordsFollowMap(peers, m); err != nil {
		return err
	}
	for _, n := range nodes {
		if n.cmd == nil {
			continue
		}
		var cfg kvConfig
		if err := nodeReq(n, http.MethodGet, "/pools/default/b/"+m.Bucket, &cfg); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
		sm := cfg.VBucketServerMap
		if len(sm.VBucketMap) != len(m.Partitions) {
			return fmt.Errorf("%s maps %d partitions", n.name, len(sm.VBucketMap))
		}
		wrong := 0
		for p, row := range sm.VBucketMap {
			if len(row) == 0 || row[0] < 0 || row[0] >= len(sm.ServerList) {
				wrong++
				continue
			}
			// The server list is the status's node list, by name: n1.. in
			// order.
			if name := fmt.Sprintf("n%d", row[0]+1); name != m.Partitions[p].Leader {
				wrong++
			}
		}
		if wrong > 0 {
			return fmt.Errorf("%s: %d partitions led by another node than the map's preferred leader", n.name, wrong)
		}
	}
	return nil
}

// threeCopies checks that every partition of the map has three voters,
// none of them dead, none degraded, and that no leader that is up reports
// a follower that does not keep up: the Raft groups hold the map's voters
// (a group still counting the dead node reports it "down"; a copy still
// arriving, "snapshot" or "probe").
func threeCopies(peers []string, dead string) error {
	m, err := readDefaultMap(peers)
	if err != nil {
		return err
	}
	for p, part := range m.Partitions {
		if len(part.Voters) != 3 || slices.Contains(part.Voters, dead) || part.Degraded {
			return fmt.Errorf("partition %d: voters %v, degraded %v", p, part.Voters, part.Degraded)
		}
	}
	st, err := clusterStatus(peers)
	if err != nil {
		return err
	}
	for _, b := range st.Buckets {
		if len(b.Lagging) > 0 {
			return fmt.Errorf("bucket %s: lagging replicas %+v", b.Name, b.Lagging)
		}
	}
	return nil
}

// TestFailoverReplicatesAgain runs four `mayfly serve --peers` processes
// with a short failover timeout. The groups' leaders become the map's
// preferred leaders. One node (not an etcd member) is killed: once the
// orchestrator fails it over, every partition has three voters on live
// nodes again, in the map and in its Raft group (the spare joined by
// conf change and holds a full copy); writes acknowledged before and
// after read right from every node. The killed node comes back and drops
// the documents of its copies moved away, then dies again. Then a second
// node is killed: with
// the dead node's copies moved, every partition keeps a majority, so
// every write is acknowledged (without the move, the partitions both
// dead nodes held would have none); with no spare left, its failover
// marks every partition degraded, the survivors lead them all, and they
// still take writes. It comes back: once it has been up a while
// (LeaderSettle) and caught up, it leads a third of the partitions again.
func TestFailoverReplicatesAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four server processes")
	}
	// Beside the package's other four-process tests: each mostly waits
	// out timeouts and elections, and this package is make test's longest.
	t.Parallel()
	// The failover timeout also bounds how long the orchestrator waits for
	// every node before it places the bucket on those up: race-built
	// processes on a busy machine start slower.
	timeout := "5s"
	if raceNodes() {
		timeout = "20s"
	}
	began := time.Now()
	nodes, peers, acked, m := startFourWithDocs(t, "--cluster-failover-timeout", timeout)
	var err error
	victim := nodes[3] // n4 runs no etcd member: etcd keeps its three
	held := 0
	for _, p := range m.Partitions {
		if slices.Contains(p.Voters, victim.name) {
			held++
		}
	}
	if held == 0 {
		t.Fatalf("the map was placed without %s (it started late): %+v", victim.name, m.Partitions[0])
	}
	eventuallyT(t, "every group led by the map's preferred leader", func() error { return leadersFollowMap(nodes, m) })
	t.Logf("leaders follow the map %v after the processes started", time.Since(began).Round(100*time.Millisecond))
	// A view over the documents: whole at every node through the
	// failovers, once each dead node's partitions have a coverer that
	// caught up from its copy (a spare's copy included).
	if code, body, err := viewReq(http.MethodPut, nodes[0].http, "/default/_design/scatter", scatterDDoc); err != nil || code != http.StatusCreated {
		t.Fatalf("PUT a design document: %d %s %v", code, body, err)
	}

	victim.kill()
	killed := time.Now()
	for i := range 40 {
		k := fmt.Sprintf("during%d", i)
		acked[k] = writeAnywhere(t, nodes, http.MethodPut, k, fmt.Sprintf(`{"v":%d}`, i))
	}
	eventuallyT(t, "three copies of every partition on live nodes", func() error { return threeCopies(peers, victim.name) })
	t.Logf("three copies again %v after the kill (%d partitions moved; lease 3 s + failover timeout %s)",
		time.Since(killed).Round(100*time.Millisecond), held, timeout)
	for i := range 40 {
		k := fmt.Sprintf("after%d", i)
		acked[k] = writeAnywhere(t, nodes, http.MethodPut, k, fmt.Sprintf(`{"v":%d}`, i))
	}
	for _, n := range nodes[:3] {
		eventuallyT(t, n.name+" reads every acknowledged write", func() error { return readsAcked(n, acked) })
	}
	// The map as it is now: once the spares caught up, the orchestrator
	// also evens the preferred leaders out over the three.
	eventuallyT(t, "every group led by the map's preferred leader after the failover", func() error { return leadersFollowCurrentMap(nodes, peers) })
	viewWhole(t, nodes, peers, acked)

	// The failed-over node comes back: every copy it had moved away, so
	// their documents leave its bucket (its disk too) rather than stay
	// there unserved. It dies again before the second kill, so that it is
	// no spare then.
	victim.start(t)
	victim.started(t)
	itemCounts(t, []*procNode{victim}, 0)
	victim.kill()

	// A second node dies: every partition still has two of its three
	// voters.
	nodes[2].kill()
	for i := range 40 {
		k := fmt.Sprintf("second%d", i)
		acked[k] = writeAnywhere(t, nodes, http.MethodPut, k, fmt.Sprintf(`{"v":%d}`, i))
	}
	for _, n := range nodes[:2] {
		eventuallyT(t, n.name+" reads every acknowledged write after the second kill", func() error { return readsAcked(n, acked) })
	}

	// No spare left: once the second node is failed over every partition
	// is degraded (two live copies, the dead node still a voter), the
	// status says so, and its leaderships are with the survivors.
	eventuallyT(t, "every partition degraded", func() error {
		st, err := clusterStatus(peers)
		if err != nil {
			return err
		}
		bs, ok := st.Bucket("default")
		if !ok || len(bs.Degraded) != len(m.Partitions) {
			return fmt.Errorf("%d partitions degraded", len(bs.Degraded))
		}
		return nil
	})
	if m, err = readDefaultMap(peers); err != nil {
		t.Fatal(err)
	}
	for p, part := range m.Partitions {
		if part.Leader == nodes[2].name || !slices.Contains(part.Voters, nodes[2].name) {
			t.Fatalf("partition %d after the second failover: %+v", p, part)
		}
	}
	eventuallyT(t, "the survivors lead what the map gives them", func() error { return leadersFollowMap(nodes, m) })
	for i := range 10 {
		k := fmt.Sprintf("degraded%d", i)
		acked[k] = writeAnywhere(t, nodes, http.MethodPut, k, fmt.Sprintf(`{"v":%d}`, i))
	}
	for _, n := range nodes[:2] {
		eventuallyT(t, n.name+" reads every acknowledged write, degraded", func() error { return readsAcked(n, acked) })
	}

	// The second node comes back on its data: nothing is degraded any
	// more, and once it has been up a while and caught up the
	// orchestrator hands it back a third of the leaderships (it led none
	// since its failover), which its groups take.
	nodes[2].start(t)
	returned := time.Now()
	nodes[2].started(t)
	eventuallyT(t, nodes[2].name+" leads its share of the partitions again", func() error {
		m, err := readDefaultMap(peers)
		if err != nil {
			return err
		}
		leads := map[string]int{}
		for p, part := range m.Partitions {
			if part.Degraded {
				return fmt.Errorf("partition %d still degraded", p)
			}
			leads[part.Leader]++
		}
		for _, n := range nodes[:3] {
			if l := leads[n.name]; l < len(m.Partitions)/3 || l > len(m.Partitions)/3+1 {
				return fmt.Errorf("preferred leaders %v", leads)
			}
		}
		return leadersFollowMap(nodes, m)
	})
	t.Logf("%s leads its share again %v after it was started", nodes[2].name, time.Since(returned).Round(100*time.Millisecond))
	for i := range 10 {
		k := fmt.Sprintf("returned%d", i)
		acked[k] = writeAnywhere(t, nodes, http.MethodPut, k, fmt.Sprintf(`{"v":%d}`, i))
	}
	for _, n := range nodes[:3] {
		eventuallyT(t, n.name+" reads every acknowledged write after the return", func() error { return readsAcked(n, acked) })
	}
	viewWhole(t, nodes, peers, acked)
}

// leadersFollowCurrentMap is leadersFollowMap of the map as etcd has it
// now.
func leadersFollowCurrentMap(nodes []*procNode, peers []string) error {
	m, err := readDefaultMap(peers)
	if err != nil {
		return err
	}
	return leadersFollowMap(nodes, m)
}

// freeze stops n's process (SIGSTOP: alive and silent, as a node cut off
// by a network partition) and returns thaw, which resumes it once (later
// calls do nothing); the test's cleanup thaws it too, before the
// fixture's kill, so that it can exit.
func freeze(t *testing.T, n *procNode) (thaw func()) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw = func() {
		if !thawed {
			thawed = true
			n.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)
	return thaw
}

// TestFailedOverWhileCutOffLeavesItsGroups runs four `mayfly serve
// --peers` processes and freezes one (SIGSTOP, not an etcd member): alive,
// its groups and connections kept, but silent, as a node cut off by a
// network partition. Its lease expires, the orchestrator fails it over and
// a spare replaces it in every partition it held, by conf changes it never
// receives. Thawed (SIGCONT), without a restart, it sees that the map no
// longer lists it: it leaves those groups and drops their documents
// (before, it kept them, its groups campaigning, until restarted), and the
// cluster has three caught-up copies of every partition.
func TestFailedOverWhileCutOffLeavesItsGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four server processes")
	}
	// Beside the package's other four-process tests: each mostly waits
	// out timeouts and elections, and this package is make test's longest.
	t.Parallel()
	timeout := "5s"
	if raceNodes() {
		timeout = "20s"
	}
	nodes, peers, acked, m := startFourWithDocs(t, "--cluster-failover-timeout", timeout,
		"--log-level", "info") // its log says when it left groups
	victim := nodes[3] // n4 runs no etcd member: etcd keeps its three
	if !slices.ContainsFunc(m.Partitions, func(p cluster.Partition) bool { return slices.Contains(p.Voters, victim.name) }) {
		t.Fatalf("the map was placed without %s (it started late): %+v", victim.name, m.Partitions[0])
	}
	eventuallyT(t, "every group led by the map's preferred leader", func() error { return leadersFollowMap(nodes, m) })

	thaw := freeze(t, victim)
	live := nodes[:3]
	for i := range 40 {
		k := fmt.Sprintf("during%d", i)
		acked[k] = writeAnywhere(t, live, http.MethodPut, k, fmt.Sprintf(`{"v":%d}`, i))
	}
	eventuallyT(t, "three copies of every partition on the live nodes", func() error { return threeCopies(peers, victim.name) })

	thaw()
	eventuallyT(t, victim.name+" left the groups of the copies moved away", func() error {
		if !strings.Contains(victim.out.String(), "removed the groups of copies moved away") {
			return fmt.Errorf("not in its log yet")
		}
		return nil
	})
	itemCounts(t, []*procNode{victim}, 0)
	for i := range 10 {
		k := fmt.Sprintf("after%d", i)
		acked[k] = writeAnywhere(t, nodes, http.MethodPut, k, fmt.Sprintf(`{"v":%d}`, i))
	}
	eventuallyT(t, "three copies of every partition, nothing lagging, after the thaw", func() error { return threeCopies(peers, victim.name) })
	for _, n := range nodes {
		eventuallyT(t, n.name+" reads every acknowledged write", func() error { return readsAcked(n, acked) })
	}
}

// startFourWithDocs starts four `mayfly serve --peers` processes (memcached
// and KV ports on, with args), writes 40 documents before0..before39
// through any of them, and returns the nodes, their peer list, what was
// acknowledged and the default bucket's map.
func startFourWithDocs(t *testing.T, args ...string) ([]*procNode, []string, map[string]ackedDoc, *cluster.PartitionMap) {
	t.Helper()
	nodes, peers := procClusterN(t, 4, append([]string{"--memcached", "127.0.0.1:0", "--kv", "127.0.0.1:0"}, args...)...)
	for _, n := range nodes {
		n.start(t)
	}
	for _, n := range nodes {
		n.started(t)
	}
	acked := map[string]ackedDoc{}
	for i := range 40 {
		k := fmt.Sprintf("before%d", i)
		acked[k] = writeAnywhere(t, nodes, http.MethodPut, k, fmt.Sprintf(`{"v":%d}`, i))
	}
	m, err := readDefaultMap(peers)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, peers, acked, m
}
