package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/testport"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// oneNodeCluster starts a cluster of one node, n1, in process, and its
// topology mirror; both stop when the test ends.
func oneNodeCluster(t *testing.T, ctx context.Context) (*cluster.Node, *cluster.TopologyMirror) {
	t.Helper()
	return oneNodeClusterWith(t, ctx, nil)
}

// oneNodeClusterWith is oneNodeCluster with its configuration changed by
// edit (if set) before the node starts.
func oneNodeClusterWith(t *testing.T, ctx context.Context, edit func(*cluster.Config)) (*cluster.Node, *cluster.TopologyMirror) {
	t.Helper()
	port := testport.Consecutive(t, 3)
	cfg := cluster.Config{
		Node: "n1", Peers: []cluster.Peer{{Name: "n1", Host: "127.0.0.1", Port: port}}, DataDir: t.TempDir(),
		LeaseTTL: 5 * time.Second, FailoverTimeout: 3 * time.Second, FormTimeout: time.Minute, Version: "test",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if edit != nil {
		edit(&cfg)
	}
	node, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mirror := cluster.NewTopologyMirror(node.Client())
	mctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { mirror.Run(mctx) })
	t.Cleanup(func() {
		stop()
		wg.Wait()
		node.Close()
	})
	return node, mirror
}

// TestViewCoverageFromTheMirror: on a one-node cluster, a bucket's
// coverage appears once the orchestrator places its map, then goes by its
// coverage map (every partition this node's, under the coverage map's
// revision), is kept while nothing changes,
// is computed again when the nodes up change, and a share request under a
// revision the mirror never reaches waits a bounded moment and answers
// with the coverage it has (which the coverer's check then refuses).
func TestViewCoverageFromTheMirror(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, mirror := oneNodeCluster(t, ctx)
	vc := newViewCoverage(node.Name(), mirror, "http")

	if cov, err := vc.coverage(ctx, "b", 0); cov != nil || err != nil {
		t.Fatalf("coverage of a bucket without a map: %+v, %v; want none", cov, err)
	}
	def := cluster.BucketDef{BucketSettings: engine.BucketSettings{Name: "b", UUID: engine.NewBucketUUID()}}
	if err := cluster.DefineBucket(ctx, node.Client(), def); err != nil {
		t.Fatal(err)
	}
	var cov *httpapi.ViewCoverage
	var err error
	for cov == nil {
		if cov, err = vc.coverage(ctx, "b", 0); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("no coverage after the bucket was defined")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The orchestrator writes the coverage map after the partition map:
	// from then on the coverage goes by its revision.
	var rev int64
	for {
		c, crev, err := cluster.ReadCoverage(ctx, node.Client(), "b")
		if err != nil {
			t.Fatal(err)
		}
		if c != nil {
			if cov, err = vc.coverage(ctx, "b", crev); err != nil {
				t.Fatal(err)
			}
			rev = crev
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no coverage map after the bucket was placed")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if cov.Rev != rev || len(cov.Nodes) != 1 || !cov.Nodes[0].Self || len(cov.Nodes[0].Partitions) != cluster.NumPartitions {
		t.Fatalf("coverage %d (coverage map at %d), %d coverers: want every partition this node's", cov.Rev, rev, len(cov.Nodes))
	}
	if again, _ := vc.coverage(ctx, "b", rev); again != cov {
		t.Fatal("the coverage was computed again though neither the map nor the nodes changed")
	}

	// Another node registering changes the nodes up: computed again, the
	// same assignment.
	lease, err := node.Client().Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Client().Revoke(context.Background(), lease.ID)
	if _, err := node.Client().Put(ctx, "/mayfly/nodes/n9", `{"name":"n9","http":"127.0.0.1:9"}`, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	for {
		next, err := vc.coverage(ctx, "b", 0)
		if err != nil {
			t.Fatal(err)
		}
		if next != cov {
			if next.Rev != rev || len(next.Nodes) != 1 || len(next.Nodes[0].Partitions) != cluster.NumPartitions {
				t.Fatalf("after a node registered: %d, %d coverers", next.Rev, len(next.Nodes))
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the coverage never saw the nodes change")
		case <-time.After(20 * time.Millisecond):
		}
	}

	// Asked under a revision far ahead: a bounded wait, then its own.
	start := time.Now() // wall clock: bounds a wait, asserts no speed
	stale, err := vc.coverage(ctx, "b", rev+1_000_000)
	if err != nil || stale == nil || stale.Rev != rev {
		t.Fatalf("asked under a revision never reached: %+v, %v; want the coverage at %d", stale, err, rev)
	}
	if waited := time.Since(start); waited < shareWait/2 {
		t.Fatalf("answered after %v: it did not wait for its mirror", waited)
	}
}

// TestViewCoverageShareWaitsForItsCoverageMap: a node asked for its view
// share under a coverage map revision its mirror has not reached yet
// answers under that revision as soon as its mirror reaches it. The
// partition maps' watch moves only on a map's change: waiting for it to
// reach a coverage map's revision held every such share the whole
// shareWait, then answered the old revision (coverage_changed, and the
// querying node asked again): each coverage change cost the queries that
// met it two seconds.
func TestViewCoverageShareWaitsForItsCoverageMap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, mirror := oneNodeCluster(t, ctx)
	vc := newViewCoverage(node.Name(), mirror, "http")
	def := cluster.BucketDef{BucketSettings: engine.BucketSettings{Name: "b", UUID: engine.NewBucketUUID()}}
	if err := cluster.DefineBucket(ctx, node.Client(), def); err != nil {
		t.Fatal(err)
	}
	var crev int64
	for crev == 0 {
		c, rev, err := cluster.ReadCoverage(ctx, node.Client(), "b")
		if err != nil {
			t.Fatal(err)
		}
		if c != nil {
			if cov, err := vc.coverage(ctx, "b", rev); err != nil || cov == nil || cov.Rev != rev {
				t.Fatalf("coverage under the coverage map's revision %d: %+v %v", rev, cov, err)
			}
			crev = rev
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no coverage map after the bucket was placed")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The coverage map written again (the orchestrator's next write, as
	// a move's: a new revision, no partition map's change) while this
	// node is asked for its share under that revision, before its mirror
	// has it.
	resp, err := node.Client().Get(ctx, "/mayfly/coverage/b")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the coverage map: %v", err)
	}
	next := resp.Header.Revision + 1 // (or later: another write came first)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		time.Sleep(200 * time.Millisecond) // the share's wait begins first
		if _, err := node.Client().Put(ctx, "/mayfly/coverage/b", string(resp.Kvs[0].Value)); err != nil {
			t.Error(err)
		}
	})
	cov, err := vc.coverage(ctx, "b", next)
	if err != nil || cov == nil || cov.Rev < next {
		var got int64
		if cov != nil {
			got = cov.Rev
		}
		t.Fatalf("asked under the coverage map's new revision %d: answered under %d (%v)", next, got, err)
	}
}
