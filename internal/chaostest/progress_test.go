package chaostest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mayflydb/mayfly/cluster"
)

// groupProgress is one partition's Raft group on one node, as the chaos
// build's GET /_chaos/progress/BUCKET answers it (cmd/mayfly's
// faults_chaos.go): read from the node itself, not through etcd.
type groupProgress struct {
	Partition int    `json:"p"`
	Leader    string `json:"leader"`
	Leading   bool   `json:"leading"`
	Term      uint64 `json:"term"`
	Commit    uint64 `json:"commit"`
	Applied   uint64 `json:"applied"`
}

// progress reads node n's groups of the default bucket, by partition (a
// partition whose group does not run on n is absent).
func (r *run) progress(ctx context.Context, n *node) (map[int]groupProgress, error) {
	code, body, err := call(ctx, r.cl, n, http.MethodGet, "/_chaos/progress/default", "", "", 5*time.Second)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s: its groups' progress: %d %s", n.name, code, body)
	}
	var ps []groupProgress
	if err := json.Unmarshal(body, &ps); err != nil {
		return nil, fmt.Errorf("%s: its groups' progress: %w", n.name, err)
	}
	out := make(map[int]groupProgress, len(ps))
	for _, p := range ps {
		out[p.Partition] = p
	}
	return out, nil
}

// catchUp times a healed node's catch-up from its groups' own progress:
// each partition it is to follow is caught up once the node applied what
// the majority had committed in it at the heal.
type catchUp struct {
	target map[int]uint64        // partition → the highest commit index the other nodes knew at the heal
	at     map[int]time.Duration // partition → heal → the node applied target (absent: not yet)
	behind int                   // partitions the node had not applied target in at the heal
	most   uint64                // the most entries it was behind in one of them
	gone   int                   // partitions whose group stopped running on the node before catching up
}

// newCatchUp starts timing: targets are, per partition the node is to
// follow, the highest commit index the other nodes' groups knew at the
// heal; atHeal is the node's own progress read then (a partition already
// applied counts as caught up at 0).
func newCatchUp(targets map[int]uint64, atHeal map[int]groupProgress) *catchUp {
	c := &catchUp{target: targets, at: map[int]time.Duration{}}
	for p, want := range targets {
		have := atHeal[p].Applied
		if have >= want {
			c.at[p] = 0
			continue
		}
		c.behind++
		c.most = max(c.most, want-have)
	}
	return c
}

// targets are, for each partition of follow, the highest commit index any
// of others' groups knows.
func commitTargets(follow []int, others []map[int]groupProgress) map[int]uint64 {
	out := make(map[int]uint64, len(follow))
	for _, p := range follow {
		var most uint64
		for _, o := range others {
			most = max(most, o[p].Commit)
		}
		out[p] = most
	}
	return out
}

// observe records the node's progress read since after the heal; it
// reports whether every partition is caught up (or gone).
func (c *catchUp) observe(now map[int]groupProgress, since time.Duration) bool {
	c.gone = 0
	for p, want := range c.target {
		if _, ok := c.at[p]; ok {
			continue
		}
		g, ok := now[p]
		switch {
		case !ok:
			c.gone++
		case g.Applied >= want:
			c.at[p] = since
		}
	}
	return c.done()
}

// done reports whether every partition is caught up or gone.
func (c *catchUp) done() bool { return len(c.at)+c.gone == len(c.target) }

// all is heal → the last partition caught up, -1 while one is not (or
// none is to be followed).
func (c *catchUp) all() time.Duration {
	if len(c.target) == 0 || len(c.at) < len(c.target) {
		return -1
	}
	return slices.Max(slices.Collect(maps.Values(c.at)))
}

// String sums the catch-up up: the partitions behind at the heal, and
// for those the time until each caught up, p50/max, and until all.
func (c *catchUp) String() string {
	if len(c.target) == 0 {
		return "no partition to follow"
	}
	var ds []time.Duration
	for p, d := range c.at {
		if c.target[p] > 0 && d > 0 {
			ds = append(ds, d)
		}
	}
	slices.Sort(ds)
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d partitions behind at the heal (at most %d entries)", c.behind, len(c.target), c.most)
	if len(ds) > 0 {
		fmt.Fprintf(&b, "; caught up p50 %v, max %v", r(ds[len(ds)/2]), r(ds[len(ds)-1]))
	}
	if a := c.all(); a >= 0 {
		fmt.Fprintf(&b, "; all %d in %v", len(c.target), r(a))
	} else {
		fmt.Fprintf(&b, "; %d not caught up (%d of them no longer run there)", len(c.target)-len(c.at), c.gone)
	}
	return b.String()
}

// lagTrace is what the etcd-based catch-up saw after the heal: each change
// of what a cluster status read said of the victim (the read failed, the
// reasons it is reported lagging for, or nothing), with when the read
// began and how long it took.
type lagTrace struct {
	victim  string
	last    string
	changes []string
	reads   int
	failed  int
	longest time.Duration
}

// add records one status read begun at since (after the heal) that took
// took, and answered lags or err.
func (l *lagTrace) add(since, took time.Duration, lags []cluster.Lagging, err error) {
	l.reads++
	l.longest = max(l.longest, took)
	state := "not lagging"
	if err != nil {
		l.failed++
		state = "read failed"
	} else {
		var whys []string
		for _, lg := range lags {
			if lg.Follower == l.victim {
				whys = append(whys, fmt.Sprintf("%s %d (%s)", lg.Why, len(lg.Partitions), lg.Leader))
			}
		}
		if len(whys) > 0 {
			slices.Sort(whys)
			state = "lagging: " + strings.Join(whys, ", ")
		}
	}
	if state == l.last {
		return
	}
	l.last = state
	l.changes = append(l.changes, fmt.Sprintf("%.2fs (%v) %s", since.Seconds(), took.Round(time.Millisecond), state))
}

// String lists the changes.
func (l *lagTrace) String() string {
	return fmt.Sprintf("%d reads, %d failed, longest %v: %s", l.reads, l.failed, l.longest.Round(time.Millisecond), strings.Join(l.changes, "; "))
}
