package cluster

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestWatchNodesDownSaysWhichNodeLeft(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	peers := testPeers(t, 1)
	nodes := startAll(t, ctx, []Config{testConfig(t, peers, "n1", t.TempDir(), &syncLog{})})
	defer closeAll(nodes)
	cli := nodes[0].Client()
	downs := make(chan string, 8)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchNodesDown(wctx, cli, func(name string) { downs <- name })
	}()
	defer func() { stop(); <-done }()

	// A node registers on a lease (registering says nothing), then its
	// lease ends: it is reported down. The watch may start after a
	// deletion: the node comes and goes until one is seen.
	for {
		lease, err := cli.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, nodesPrefix+"gone", "{}", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Revoke(ctx, lease.ID); err != nil {
			t.Fatal(err)
		}
		select {
		case name := <-downs:
			if name != "gone" {
				t.Fatalf("down %q, want gone", name)
			}
			return
		case <-time.After(time.Second):
		case <-ctx.Done():
			t.Fatal("no node reported down")
		}
	}
}
