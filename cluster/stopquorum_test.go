package cluster

import (
	"context"
	"testing"
	"time"
)

// A node stops (Close, as on SIGTERM) even when the cluster's etcd members
// are gone: before, a node waiting in the orchestrator's election resigned
// under the etcd client's own context when it stopped, which waits for a
// quorum that never comes, and Close never returned (a test's cleanup
// killed such a process after a minute; a service manager would have too).
func TestCloseWithoutQuorumReturns(t *testing.T) {
	t.Parallel() // it mostly waits out the writes' timeouts without a quorum
	ctx := context.Background()
	nodes, _, _ := startCluster(t, ctx, 4)
	if nodes[3].IsMember() {
		t.Fatal("the fourth node runs an etcd member")
	}
	// The three members stop as machines that crash do (their terms and
	// leases left to expire, the election's queue as it was): no quorum
	// is left, and the fourth node still waits its turn in the election.
	done := make(chan error, 4)
	for _, n := range nodes[:3] {
		go func() { done <- n.stop(false) }()
	}
	hang := time.After(2 * time.Minute) // a hang, not a speed: stop's wait is bounded at 5 s
	for range 3 {
		select {
		case <-done:
		case <-hang:
			t.Fatal("a member whose quorum went with it never stopped")
		}
	}
	go func() { done <- nodes[3].Close() }()
	select {
	case <-done:
	case <-hang:
		t.Fatal("Close of a node whose etcd quorum is gone never returned")
	}
}
