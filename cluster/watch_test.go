package cluster

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestWatchNodesDownSaysWhichNodeLeft(t *testing.T) {
	ctx, cli := oneNode(t)
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

// A watch goes on after the last event it was given, not after the
// response header's revision (the store's, beyond the events of a batch
// while the watcher catches up); a progress notification moves it to its
// header; a watch's creation says nothing.
func TestWatchedUpTo(t *testing.T) {
	batch := clientv3.WatchResponse{
		Header: &etcdserverpb.ResponseHeader{Revision: 5000},
		Events: []*clientv3.Event{{Kv: &mvccpb.KeyValue{ModRevision: 1200}}, {Kv: &mvccpb.KeyValue{ModRevision: 2100}}},
	}
	if got := watchedUpTo(batch); got != 2100 {
		t.Fatalf("a batch of history: %d, want its last event's 2100", got)
	}
	if got := watchedUpTo(clientv3.WatchResponse{Header: &etcdserverpb.ResponseHeader{Revision: 5000}}); got != 5000 {
		t.Fatalf("a progress notification: %d, want 5000", got)
	}
	if got := watchedUpTo(clientv3.WatchResponse{Header: &etcdserverpb.ResponseHeader{Revision: 5000}, Created: true}); got != 0 {
		t.Fatalf("a watch's creation: %d, want 0", got)
	}
}
