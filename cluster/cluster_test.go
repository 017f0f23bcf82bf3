package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/testport"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// testPeers is a peer list of n nodes on loopback.
func testPeers(t *testing.T, n int) []Peer {
	var out []Peer
	for i := range n {
		p := testport.Consecutive(t, 3)
		out = append(out, Peer{Name: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: p})
	}
	return out
}

// testConfig is node name's configuration with short timeouts: a 5 s
// lease, failover after 3 s down. Shorter ones are within reach of a busy
// machine's stalls (all the members run in the test's process): the
// client renews a lease every third of its TTL, so a 3 s lease is lost to
// a stall of about two seconds, and the client finds the session lost
// only at its next renewal, a second later; a node down that long was
// failed over by a 1 s timeout, and the map moved under the test.
func testConfig(t *testing.T, peers []Peer, name, dir string, logs *syncLog) Config {
	c := Config{Node: name, Peers: peers, DataDir: dir, LeaseTTL: 5 * time.Second, FailoverTimeout: 3 * time.Second,
		ReconcileInterval: 100 * time.Millisecond, LeaderSettle: time.Second, FormTimeout: time.Minute, Version: "test",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	c.test.noFsync = true
	return c
}

// syncLog collects log lines from many goroutines.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startAll starts the nodes at once (each member waits for the others).
// startCluster starts n nodes on loopback (testPeers), each with a data
// directory of its own and testConfig's settings, logging to one syncLog.
func startCluster(t *testing.T, ctx context.Context, n int) ([]*Node, []Config, *syncLog) {
	t.Helper()
	peers := testPeers(t, n)
	logs := &syncLog{}
	var cfgs []Config
	for _, p := range peers {
		cfgs = append(cfgs, testConfig(t, peers, p.Name, t.TempDir(), logs))
	}
	return startAll(t, ctx, cfgs), cfgs, logs
}

func startAll(t *testing.T, ctx context.Context, cfgs []Config) []*Node {
	t.Helper()
	nodes := make([]*Node, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, c := range cfgs {
		wg.Go(func() { nodes[i], errs[i] = Start(ctx, c) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("starting %s: %v", cfgs[i].Node, err)
		}
	}
	return nodes
}

// oneNode starts a cluster of one node for t, closed when t ends, and
// returns a context that ends with t (or after two minutes, a hang) and the
// node's etcd client.
func oneNode(t *testing.T) (context.Context, *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	nodes := startAll(t, ctx, []Config{testConfig(t, testPeers(t, 1), "n1", t.TempDir(), &syncLog{})})
	t.Cleanup(func() { closeAll(nodes) })
	return ctx, nodes[0].Client()
}

// closeAll closes the nodes at once, as a cluster's machines stop
// together (one by one, the last members wait for a quorum that is gone).
func closeAll(nodes []*Node) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		if n != nil {
			wg.Go(func() { n.Close() })
		}
	}
	wg.Wait()
}

// eventually polls cond every 50 ms until it holds, failing after a
// minute (a deadline only to catch a hang).
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, got := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never; last: %s", what, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// orchestratorOf is the node holding an orchestration handle, and the
// handle; nil when none does (or more than one claims it).
func orchestratorOf(nodes []*Node) (*Node, *Orchestrator) {
	var on *Node
	var oh *Orchestrator
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if o := n.Orchestrator(); o != nil {
			if oh != nil {
				return nil, nil
			}
			on, oh = n, o
		}
	}
	return on, oh
}

func TestClusterFormsPlacesFailsOverAndFences(t *testing.T) {
	ctx := context.Background()
	nodes, cfgs, logs := startCluster(t, ctx, 3)
	peers := cfgs[0].Peers
	defer closeAll(nodes)
	for _, n := range nodes {
		if !n.IsMember() {
			t.Fatalf("%s is not an etcd member", n.Name())
		}
		if _, err := os.Stat(etcdDir(n.cfg.DataDir)); err != nil {
			t.Fatalf("%s's etcd data: %v", n.Name(), err)
		}
	}
	cli := nodes[0].Client()
	status := func() *Status {
		s, err := ReadStatus(ctx, cli, []string{"n1", "n2", "n3"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// Every node is up; one orchestrator, which the status names.
	var orchNode *Node
	eventually(t, "one orchestrator, every node up", func() (bool, string) {
		on, _ := orchestratorOf(nodes)
		s := status()
		up := 0
		for _, n := range s.Nodes {
			if n.Up {
				up++
			}
		}
		orchNode = on
		return on != nil && s.Orchestrator == on.Name() && up == 3, fmt.Sprintf("%+v", s)
	})

	// A bucket defined (without a replicaNumber: the cluster's default, three
	// copies): the orchestrator places it, balanced.
	def := BucketDef{BucketSettings: engine.DefaultBucketSettings("b")}
	if err := DefineBucket(ctx, cli, def); err != nil {
		t.Fatal(err)
	}
	if err := DefineBucket(ctx, cli, def); !errors.Is(err, ErrBucketExists) {
		t.Fatalf("defining it again: %v, want ErrBucketExists", err)
	}
	var m *PartitionMap
	var rev int64
	eventually(t, "the bucket's map", func() (bool, string) {
		var err error
		m, rev, err = ReadMap(ctx, cli, "b")
		return err == nil && m != nil, fmt.Sprint(err)
	})
	if len(m.Partitions) != NumPartitions || m.Copies != 3 {
		t.Fatalf("map of %d partitions, %d copies", len(m.Partitions), m.Copies)
	}
	s := status()
	bs, _ := s.Bucket("b")
	for _, n := range peers {
		if l := bs.Leads[n.Name]; l < NumPartitions/3 || l > NumPartitions/3+1 {
			t.Errorf("%s leads %d partitions", n.Name, l)
		}
		if bs.Holds[n.Name] != NumPartitions {
			t.Errorf("%s holds %d copies, want every partition's", n.Name, bs.Holds[n.Name])
		}
	}
	if len(bs.Degraded) != 0 {
		t.Fatalf("%d partitions degraded with every node up", len(bs.Degraded))
	}

	// Fenced on the map's revision: a write from a stale read is refused.
	var oh *Orchestrator
	eventually(t, "an orchestrator", func() (bool, string) {
		_, oh = orchestratorOf(nodes)
		return oh != nil, ""
	})
	stale := *m
	stale.Partitions = append([]Partition(nil), m.Partitions...)
	stale.Partitions[0].Epoch++
	if _, err := oh.PutMap(ctx, &stale, rev-1); !errors.Is(err, ErrMapChanged) {
		t.Fatalf("write from a stale read: %v, want ErrMapChanged", err)
	}

	// Deposed: the orchestrator's election lease revoked, another term
	// begins; the old handle's write is refused and changes nothing.
	lk, err := cli.Get(ctx, oh.key)
	if err != nil || len(lk.Kvs) != 1 {
		t.Fatalf("leadership key: %v %v", lk, err)
	}
	if _, err := cli.Revoke(ctx, clientLease(lk.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a new orchestrator term", func() (bool, string) {
		// Name the node only: printing the *Node reads its fields
		// unlocked while its campaign writes them (a data race).
		on, o := orchestratorOf(nodes)
		name := "none"
		if on != nil {
			name = on.Name()
		}
		return o != nil && o != oh && o.rev != oh.rev, "orchestrator: " + name
	})
	if _, err := oh.PutMap(ctx, &stale, rev); !errors.Is(err, ErrDeposed) {
		t.Fatalf("a deposed orchestrator's write: %v, want ErrDeposed", err)
	}
	if after, afterRev, _ := ReadMap(ctx, cli, "b"); afterRev != rev || after.Partitions[0].Epoch != 1 {
		t.Fatalf("the map moved after the refused writes: rev %d -> %d", rev, afterRev)
	}

	// Stop the orchestrator's node as a crash (its leases are left to
	// expire): another node takes over, the stopped node goes down, and
	// after the failover timeout every partition (three nodes, three
	// copies: no spare) is degraded, none preferring it as leader.
	orchNode, _ = orchestratorOf(nodes)
	victim := orchNode.Name()
	vi := 0
	for i, n := range nodes {
		if n == orchNode {
			vi = i
		}
	}
	if err := orchNode.stop(false); err != nil {
		t.Logf("stopping %s: %v", victim, err)
	}
	nodes[vi] = nil
	var rest []*Node
	for _, n := range nodes {
		if n != nil {
			rest = append(rest, n)
		}
	}
	cli = rest[0].Client()
	eventually(t, "another orchestrator", func() (bool, string) {
		on, _ := orchestratorOf(rest)
		return on != nil && on.Name() != victim, ""
	})
	eventually(t, victim+" down and its partitions degraded", func() (bool, string) {
		s := status()
		ns, _ := s.Node(victim)
		bs, _ := s.Bucket("b")
		return !ns.Up && len(bs.Degraded) == NumPartitions && bs.Leads[victim] == 0 && s.Orchestrator != victim,
			fmt.Sprintf("up=%v degraded=%d leads=%d orch=%s", ns.Up, len(bs.Degraded), bs.Leads[victim], s.Orchestrator)
	})
	var text strings.Builder
	if err := status().WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{victim + " ", "down", "1024 partitions, 1024 degraded", "degraded: 0-1023", "Documents are replicated"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, text.String())
		}
	}
	m2, _, _ := ReadMap(ctx, cli, "b")
	for i, p := range m2.Partitions {
		if len(p.Voters) != 3 || p.Epoch < 2 {
			t.Fatalf("partition %d after failover: %+v", i, p)
		}
	}

	// A survivor reports the victim lagging in partitions 0-99 (its copy
	// catching up, as serve's replication publishes it): their
	// leaderships stay where they are while the report stands (they
	// count: the others make up the victim's share).
	lagPub := NewLagPublisher(cli, rest[0].Name())
	var behind []int
	for p := range 100 {
		behind = append(behind, p)
	}
	if err := lagPub.Publish(ctx, []Lagging{{Bucket: "b", Follower: victim, Why: "behind", Partitions: behind, MaxBehind: 5}}); err != nil {
		t.Fatal(err)
	}

	// Restart it on the same data: it rejoins the etcd cluster, its lease
	// is back, and the partitions have their three copies up again.
	nodes[vi], err = Start(ctx, cfgs[vi])
	if err != nil {
		t.Fatalf("restarting %s: %v", victim, err)
	}
	eventually(t, victim+" up and nothing degraded", func() (bool, string) {
		s := status()
		ns, _ := s.Node(victim)
		bs, _ := s.Bucket("b")
		return ns.Up && len(bs.Degraded) == 0, fmt.Sprintf("up=%v degraded=%d", ns.Up, len(bs.Degraded))
	})
	// It stayed a voter, so it holds every copy; once it has been up for
	// LeaderSettle the orchestrator hands it back its share of the
	// leaderships, 64 a pass, each node ending within one of a third,
	// though not the leaderships of the partitions it lags in.
	eventually(t, victim+" leads its share again", func() (bool, string) {
		bs, _ := status().Bucket("b")
		for _, n := range peers {
			if l := bs.Leads[n.Name]; l < NumPartitions/3 || l > NumPartitions/3+1 {
				return false, fmt.Sprintf("leads %v", bs.Leads)
			}
		}
		return bs.Holds[victim] == NumPartitions, fmt.Sprintf("holds %d", bs.Holds[victim])
	})
	mEven, _, _ := ReadMap(ctx, cli, "b")
	for p := range 100 {
		if mEven.Partitions[p].Leader != m2.Partitions[p].Leader {
			t.Fatalf("partition %d, where %s lags, moved: %+v -> %+v", p, victim, m2.Partitions[p], mEven.Partitions[p])
		}
	}
	if err := lagPub.Publish(ctx, nil); err != nil {
		t.Fatal(err)
	}
	m3, rev3, _ := ReadMap(ctx, cli, "b")
	for i, p := range m3.Partitions {
		if len(p.Voters) != 3 || p.Degraded {
			t.Fatalf("partition %d once even: %+v", i, p)
		}
	}
	// Once even, the orchestrator leaves the map alone.
	time.Sleep(500 * time.Millisecond) // five reconciles' worth
	if _, again, _ := ReadMap(ctx, cli, "b"); again != rev3 {
		t.Fatalf("the map moved from revision %d to %d once even", rev3, again)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Logf("logs:\n%s", logs.String())
	}
}

// clientLease converts a key's lease number.
func clientLease(id int64) clientv3.LeaseID { return clientv3.LeaseID(id) }

func TestStartWithoutQuorumFailsClearly(t *testing.T) {
	peers := testPeers(t, 3)
	logs := &syncLog{}
	c := testConfig(t, peers, "n1", t.TempDir(), logs)
	c.FormTimeout = 2 * time.Second
	n, err := Start(context.Background(), c)
	if err == nil {
		n.Close()
		t.Fatal("one member of three formed a cluster")
	}
	if !errors.Is(err, ErrNotFormed) || !strings.Contains(err.Error(), "2s") {
		t.Fatalf("error %q, want ErrNotFormed saying the timeout", err)
	}
}

func TestConfigRefusesNodeOutsidePeers(t *testing.T) {
	peers, err := ParsePeers("n1=127.0.0.1:7000, n2=127.0.0.1:7010,n3=127.0.0.1:7020")
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Node: "n4", Peers: peers, DataDir: t.TempDir()}
	c.EnsureDefaults()
	if err := c.Validate(); !errors.Is(err, ErrBadPeers) {
		t.Fatalf("node outside the list: %v, want ErrBadPeers", err)
	}
	for _, bad := range []string{"", "n1", "n1=host", "n1=:7000", "n1=h:0", "n1=h:1,n1=h:2", "n 1=h:1", "n1=h:65534"} {
		if _, err := ParsePeers(bad); !errors.Is(err, ErrBadPeers) {
			t.Errorf("ParsePeers(%q): %v, want ErrBadPeers", bad, err)
		}
	}
	if got := ClientEndpoints(peers, 0); len(got) != 3 || got[1] != "http://127.0.0.1:7012" {
		t.Fatalf("client endpoints %v", got)
	}
	for n, want := range map[int]int{1: 1, 2: 2, 3: 3, 4: 3, 5: 5, 9: 5} {
		if got := EtcdMembers(n); got != want {
			t.Errorf("EtcdMembers(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestClientNodeAndSpareFailover runs four nodes: the fourth is an etcd
// client only. With three copies wanted, a node that goes down has a spare
// for each of its partitions: after the failover timeout its copies are on
// the other three and nothing is degraded.
func TestClientNodeAndSpareFailover(t *testing.T) {
	ctx := context.Background()
	nodes, cfgs, _ := startCluster(t, ctx, 4)
	peers := cfgs[0].Peers
	defer closeAll(nodes)
	if nodes[3].IsMember() || !nodes[0].IsMember() {
		t.Fatal("the fourth node runs an etcd member, or the first does not")
	}
	if _, err := os.Stat(filepath.Join(cfgs[3].DataDir, "cluster")); !os.IsNotExist(err) {
		t.Fatalf("a client-only node made a cluster directory: %v", err)
	}
	cli := nodes[3].Client()
	if info, err := ReadNode(ctx, cli, "n2"); err != nil || info.Cluster != peers[1].Addr() {
		t.Fatalf("ReadNode(n2): %+v, %v; want cluster address %s", info, err, peers[1].Addr())
	}
	if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.DefaultBucketSettings("b")}); err != nil {
		t.Fatal(err)
	}
	status := func() *Status {
		s, err := ReadStatus(ctx, nodes[0].Client(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	eventually(t, "the bucket placed on four nodes", func() (bool, string) {
		bs, _ := status().Bucket("b")
		return bs.Placed, ""
	})
	bs, _ := status().Bucket("b")
	for _, p := range peers {
		// 3 copies x 1024 over 4 nodes: 768 each; 256 leaderships each.
		if bs.Holds[p.Name] != 768 || bs.Leads[p.Name] != 256 {
			t.Fatalf("%s holds %d, leads %d", p.Name, bs.Holds[p.Name], bs.Leads[p.Name])
		}
	}
	if err := nodes[3].stop(false); err != nil {
		t.Logf("stopping n4: %v", err)
	}
	nodes[3] = nil
	eventually(t, "n4's copies on the other three", func() (bool, string) {
		s := status()
		bs, _ := s.Bucket("b")
		ns, _ := s.Node("n4")
		return !ns.Up && bs.Holds["n4"] == 0 && len(bs.Degraded) == 0,
			fmt.Sprintf("n4 up=%v holds=%d degraded=%d", ns.Up, bs.Holds["n4"], len(bs.Degraded))
	})
	if _, err := ReadNode(ctx, nodes[0].Client(), "n4"); !errors.Is(err, ErrNodeDown) {
		t.Errorf("ReadNode(n4) once its lease expired: %v, want ErrNodeDown", err)
	}
	bs, _ = status().Bucket("b")
	for _, p := range peers[:3] {
		if bs.Holds[p.Name] != NumPartitions {
			t.Errorf("%s holds %d copies, want %d", p.Name, bs.Holds[p.Name], NumPartitions)
		}
	}
}
