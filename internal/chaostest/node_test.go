package chaostest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/internal/mayflybin"
	"github.com/mayflydb/mayfly/internal/testport"
)

// adminPassword is the administrator's password of every node.
const adminPassword = "chaos-test-password"

// buildServer builds cmd/mayfly with -tags chaos: the binary's
// --chaos-cut-file (the partition case).
func buildServer(t *testing.T) string {
	t.Helper()
	bin, err := mayflybin.Build("chaos")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// node is one `mayfly serve --peers` process. Its HTTP and memcached ports
// are fixed, so clients reach it again at the same address once restarted.
type node struct {
	name, bin, dir, log string
	http, mc            string
	// kv is the node's binary KV port: a bucket's configuration lists
	// only the nodes that serve one, and the partition cases read which
	// partitions a node leads from it (partitionCut.groupLeads).
	kv   string
	args []string
	// cutFile is a cluster node's --chaos-cut-file: the peers whose Raft
	// traffic it drops.
	cutFile string
	// lab, when set, is the network the node runs in, as its node idx
	// (the isolate cases).
	lab *netLab
	idx int

	// serving is set by the harness once the process serves HTTP, and
	// cleared before it kills it.
	serving atomic.Bool

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// newCluster prepares three nodes (not started) on loopback ports picked
// by testport, and returns them with their --peers list.
// Each node's log is in logDir.
func newCluster(t *testing.T, bin, logDir string) ([]*node, []string) {
	t.Helper()
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("n%d=127.0.0.1:%d", i+1, testport.Consecutive(t, 3)))
	}
	nodes := make([]*node, 3)
	for i := range nodes {
		dir := t.TempDir()
		p := testport.Consecutive(t, 3)
		n := &node{name: fmt.Sprintf("n%d", i+1), bin: bin, dir: dir, log: filepath.Join(logDir, fmt.Sprintf("n%d.log", i+1)),
			http: fmt.Sprintf("127.0.0.1:%d", p), mc: fmt.Sprintf("127.0.0.1:%d", p+1), kv: fmt.Sprintf("127.0.0.1:%d", p+2)}
		n.cutFile = filepath.Join(dir, "cut")
		n.args = append(serveArgs(n, dir),
			"--node", n.name, "--peers", strings.Join(peers, ","), "--cluster-lease", "3s",
			"--cluster-failover-timeout", "10m", "--cluster-raft-tick", "100ms", "--chaos-cut-file", n.cutFile)
		nodes[i] = n
	}
	return nodes, peers
}

// newSingle prepares one `mayfly serve` without --peers (not started),
// its log in logDir: the figures' single node.
func newSingle(t *testing.T, bin, logDir string) *node {
	t.Helper()
	dir := t.TempDir()
	p := testport.Consecutive(t, 2)
	n := &node{name: "single", bin: bin, dir: dir, log: filepath.Join(logDir, "single.log"),
		http: fmt.Sprintf("127.0.0.1:%d", p), mc: fmt.Sprintf("127.0.0.1:%d", p+1)}
	n.args = serveArgs(n, dir)
	return n
}

// serveArgs are the flags of every node, clustered or not.
func serveArgs(n *node, dir string) []string {
	return []string{"serve", "--data", filepath.Join(dir, "data"), "--http", n.http, "--memcached", n.mc, "--kv", n.kv,
		"--views", "", "--search", "", "--log-level", "error", "--admin-password", adminPassword,
		"--memory-overhead-mb", "-1", "--heap-ratio", "0"}
}

// start starts the process, its output appended to its log.
func (n *node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()                                                       // the child holds its own descriptor
	fmt.Fprintf(logf, "=== start %s\n", time.Now().Format(time.RFC3339Nano)) // wall clock: a log line for a person
	cmd := exec.Command(n.bin, n.args...)
	if n.lab != nil {
		cmd = n.lab.command(n.idx, n.bin, n.args...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	n.cmd, n.done = cmd, done
	return nil
}

// started waits until the process (started last) prints that it serves
// HTTP: a node of a cluster serves once a quorum of etcd members answers.
func (n *node) started(ctx context.Context) error {
	for {
		b, _ := os.ReadFile(n.log)
		text := string(b)
		if i := strings.LastIndex(text, "=== start "); i >= 0 && strings.Contains(text[i:], "serving HTTP on http://") {
			return nil
		}
		n.mu.Lock()
		done := n.done
		n.mu.Unlock()
		select {
		case <-done:
			return fmt.Errorf("%s exited before serving (log %s)", n.name, n.log)
		case <-ctx.Done():
			return fmt.Errorf("%s did not serve: %w (log %s)", n.name, ctx.Err(), n.log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kill ends the process with SIGKILL (nothing flushed or closed) and
// waits for it to be gone.
func (n *node) kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd = nil
	n.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		<-done
	}
}

// up reports whether the process was started and not killed.
func (n *node) up() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// clusterStatus reads the cluster's status as `mayfly cluster status
// --peers` does.
func clusterStatus(ctx context.Context, peers []string) (*cluster.Status, error) {
	var st *cluster.Status
	err := withEtcd(ctx, peers, func(ctx context.Context, cli *clientv3.Client) (err error) {
		st, err = cluster.ReadStatus(ctx, cli, nil)
		return err
	})
	return st, err
}

// withEtcd calls f with a client of the cluster's etcd, within 10 s.
func withEtcd(ctx context.Context, peers []string, f func(context.Context, *clientv3.Client) error) error {
	eps, err := etcdEndpoints(peers)
	if err != nil {
		return err
	}
	return withEtcdAt(ctx, eps, f)
}

// withEtcdAt calls f with a client of the etcd members at the client
// endpoints eps (some of them: those a partition's majority side holds),
// within 10 s.
func withEtcdAt(ctx context.Context, eps []string, f func(context.Context, *clientv3.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cli, err := cluster.Connect(ctx, eps, 5*time.Second, nil)
	if err != nil {
		return err
	}
	defer cli.Close()
	return f(ctx, cli)
}

// lagging returns the default bucket's lagging replicas, nil when none.
func lagging(ctx context.Context, peers []string) ([]cluster.Lagging, error) {
	eps, err := etcdEndpoints(peers)
	if err != nil {
		return nil, err
	}
	return laggingAt(ctx, eps)
}

// laggingAt is lagging, read through the etcd endpoints eps.
func laggingAt(ctx context.Context, eps []string) ([]cluster.Lagging, error) {
	st, err := clusterStatusAt(ctx, eps)
	if err != nil {
		return nil, err
	}
	bs, ok := st.Bucket("default")
	if !ok {
		return nil, fmt.Errorf("no default bucket in the status")
	}
	return bs.Lagging, nil
}
