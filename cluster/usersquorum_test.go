package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestUserWriteWithoutQuorumFailsClearly: creating (or deleting) a user
// through a node whose etcd has lost its quorum fails, rather than
// hanging on the client's request, with an error that says it is
// temporary (engine.ErrTempFail: a 503 the client may retry), and writes
// nothing: the user logs in nowhere.
func TestUserWriteWithoutQuorumFailsClearly(t *testing.T) {
	t.Parallel() // it mostly waits out the writes' timeouts without a quorum
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes, _, _ := startCluster(t, ctx, 3)
	defer closeAll(nodes)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := openUsers(t, t.TempDir(), "Administrator")
	us := StartUserSync(nodes[2].Client(), s, "n3", quiet)
	defer us.Close()
	if err := us.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := us.PutUser(ctx, "ann", "", "ann-pass", mustRoles(t, "admin")); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:2] {
		if err := n.stop(false); err != nil {
			t.Log(err)
		}
	}
	nodes[0], nodes[1] = nil, nil

	done := make(chan error, 2)
	start := time.Now() // wall clock: reported only
	go func() { done <- us.PutUser(ctx, "bo", "", "bo-pass", mustRoles(t, "admin")) }()
	go func() { done <- us.DeleteUser(ctx, "ann") }()
	for range 2 {
		select {
		case err := <-done:
			t.Logf("after %v: %v", time.Since(start), err)
			if err == nil || !errors.Is(err, engine.ErrTempFail) {
				t.Errorf("a user's write without a quorum: %v; want an engine.ErrTempFail", err)
			}
		case <-time.After(2 * time.Minute): // a hang guard, not a speed
			t.Fatal("a user's write without a quorum never returned")
		}
	}
	if err := login(s, "bo", "bo-pass"); err == nil {
		t.Error("bo logs in though its creation failed")
	}
	if err := login(s, "ann", "ann-pass"); err != nil {
		t.Errorf("ann, whose deletion failed: %v", err)
	}
	resp, err := nodes[2].Client().Get(ctx, userKey("bo"), clientv3.WithSerializable())
	if err == nil && len(resp.Kvs) > 0 {
		t.Errorf("bo's key is in this member's etcd: %s", resp.Kvs[0].Value)
	}
}
