package replica

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestProgressSaysWhereEachGroupStands: Host.Progress gives, per group a
// node runs, its leader as the node sees it, and commit and applied
// indexes that reach a write's index once the node applied it; a group
// the node does not run is left out.
func TestProgressSaysWhereEachGroupStands(t *testing.T) {
	c := newTestCluster(t, 2, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.propose(ctx, "n1", 0, "k=1")
	if err != nil {
		t.Fatal(err)
	}
	lead := c.leaderOf(t, 0, testNodes)
	for _, n := range testNodes {
		eventually(t, fmt.Sprintf("%s applied the write", n), func() error {
			ps := c.host(n).Progress([]GroupID{0, 99})
			if len(ps) != 1 || ps[0].Group != 0 {
				return fmt.Errorf("progress of groups 0 and 99 (not run): %+v", ps)
			}
			p := ps[0]
			if p.Leader != lead || p.Leading != (n == lead) || p.Term == 0 {
				return fmt.Errorf("leader %q (leading %v, term %d), want %s", p.Leader, p.Leading, p.Term, lead)
			}
			if p.Applied < res.Index || p.Commit < p.Applied {
				return fmt.Errorf("commit %d, applied %d; the write is at %d", p.Commit, p.Applied, res.Index)
			}
			return nil
		})
	}
}
