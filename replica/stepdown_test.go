package replica

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestProposalOnCutOffLeaderFailsAtStepDown: a write proposed on a leader
// cut off from its followers (no connection broken) cannot commit; once
// CheckQuorum steps the leader down and its entry's fate stays unknown
// for the bound (three election timeouts: nothing reaches the node), its
// proposer is told the leader changed (outcome unknown) instead of
// waiting out its whole deadline, and the write is never applied on the
// majority's side.
func TestProposalOnCutOffLeaderFailsAtStepDown(t *testing.T) {
	nc, c, ctx, old := newCutCluster(t)
	const g = GroupID(0)
	nc.isolate(old)

	// The deadline is far beyond the step-down (CheckQuorum: an election
	// timeout, 10 ticks) and the fate's bound after it (three more); only
	// a hang reaches it.
	pctx, pcancel := context.WithTimeout(ctx, time.Minute)
	defer pcancel()
	_, err := c.host(old).Propose(pctx, g, []byte("k=cut"))
	if !errors.Is(err, ErrLeaderChanged) {
		t.Fatalf("a write on the cut-off leader: %v, want ErrLeaderChanged", err)
	}
	if pctx.Err() != nil {
		t.Fatalf("the write waited for its deadline: %v", err)
	}
	for _, n := range others(old) {
		if v, _ := c.sm(n, g).get("k"); v != "v1" {
			t.Fatalf("%s holds k=%q, want v1: the cut-off leader's write was applied", n, v)
		}
	}
}

// newCutCluster starts three hosts whose frames a netCut can drop, with
// one group (GroupID 0) holding k=v1, and returns them with a context
// bounding the test (two minutes: a hang guard) and the group's leader.
func newCutCluster(t *testing.T) (*netCut, *testCluster, context.Context, string) {
	t.Helper()
	nc := newNetCut()
	c := newTestCluster(t, 1, nc.install, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	if _, err := c.propose(ctx, "n1", 0, "k=v1"); err != nil {
		t.Fatal(err)
	}
	return nc, c, ctx, c.leaderOf(t, 0, testNodes)
}
