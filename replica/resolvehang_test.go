package replica

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stuckResolver answers only once its context ends, with the address its
// table holds: what ClusterResolver does while the node's etcd member has
// no quorum (its read times out, and it falls back to the address it
// last saw), as on a node just back from a network partition whose
// member has not rejoined yet.
type stuckResolver struct{ inner Resolver }

func (r stuckResolver) Addr(ctx context.Context, node string) (string, error) {
	<-ctx.Done()
	return r.inner.Addr(context.Background(), node)
}

// TestFollowerKeepsUpWhileItsLookupsHang: a node whose lookups of its
// peers' addresses hang until their deadline still dials them at the
// address it knows, so its answers reach the leaders and it holds every
// write made through the others. Before, the lookup used up the dial's
// own deadline: the node could send nothing to anyone (its groups'
// leaders never heard it, and it stayed behind) until its etcd member
// answered again.
func TestFollowerKeepsUpWhileItsLookupsHang(t *testing.T) {
	const groups = 8
	const stuck = "n3"
	c := newTestCluster(t, groups, func(o *Options) {
		if o.Node == stuck {
			o.Resolver = stuckResolver{inner: o.Resolver}
		}
	}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	majority := others(stuck)
	for i := range 3 {
		for g := range GroupID(groups) {
			if _, err := c.propose(ctx, majority[int(g)%2], g, fmt.Sprintf("k%d=%d", g, i)); err != nil {
				t.Fatalf("group %d through the others: %v", g, err)
			}
		}
	}
	for g := range GroupID(groups) {
		key := fmt.Sprintf("k%d", g)
		eventually(t, fmt.Sprintf("%s holds group %d's writes", stuck, g), func() error {
			if v, _ := c.sm(stuck, g).get(key); v != "2" {
				return fmt.Errorf("%s = %q", key, v)
			}
			return nil
		})
	}
}

// switchResolver fails every lookup until its link is up, then answers
// from its table: a node that cannot reach its peers' addresses yet.
type switchResolver struct {
	inner  Resolver
	up     atomic.Bool
	mu     sync.Mutex
	failed map[string]bool // the nodes a lookup failed for
	fails  map[string]int  // how many lookups failed, by node
}

func (r *switchResolver) Addr(ctx context.Context, node string) (string, error) {
	if !r.up.Load() {
		r.mu.Lock()
		r.failed[node] = true
		if r.fails != nil {
			r.fails[node]++
		}
		r.mu.Unlock()
		return "", fmt.Errorf("%s: unreachable", node)
	}
	return r.inner.Addr(ctx, node)
}

// waitFailed waits until node back's lookups of each of nodes failed.
func (r *switchResolver) waitFailed(t *testing.T, back string, nodes map[string]bool) {
	t.Helper()
	eventually(t, back+"'s dials to the leaders failed", func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		for n := range nodes {
			if !r.failed[n] {
				return fmt.Errorf("no dial of %s yet", n)
			}
		}
		return nil
	})
}

// TestHeardFromPeerRedialsAtOnce: a node whose dials to its peers failed
// waits out a backoff before dialling again; the first frame it hears
// from one of them (the link works again) ends that wait, so its answers
// reach its leaders at once rather than after the backoff (here an hour:
// the node would stay behind all that time).
func TestHeardFromPeerRedialsAtOnce(t *testing.T) {
	const groups = 4
	const back = "n3"
	res := &switchResolver{failed: map[string]bool{}}
	c := newTestCluster(t, groups, func(o *Options) {
		if o.Node == back {
			res.inner = o.Resolver
			o.Resolver = res
			o.test.backoff = time.Hour
		}
	}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	majority := others(back)
	for g := range GroupID(groups) {
		if _, err := c.propose(ctx, majority[int(g)%2], g, fmt.Sprintf("k%d=0", g)); err != nil {
			t.Fatalf("group %d through the others: %v", g, err)
		}
	}
	// Its dials to the groups' leaders failed (it answers their
	// messages; a peer that leads nothing it may never dial): it waits
	// out its hour.
	leaders := map[string]bool{}
	for g := range GroupID(groups) {
		leaders[c.leaderOf(t, g, majority)] = true
	}
	res.waitFailed(t, back, leaders)
	res.up.Store(true)
	for i := 1; i <= 2; i++ {
		for g := range GroupID(groups) {
			if _, err := c.propose(ctx, majority[int(g)%2], g, fmt.Sprintf("k%d=%d", g, i)); err != nil {
				t.Fatalf("group %d through the others: %v", g, err)
			}
		}
	}
	for g := range GroupID(groups) {
		key := fmt.Sprintf("k%d", g)
		eventually(t, fmt.Sprintf("%s holds group %d's writes", back, g), func() error {
			if v, _ := c.sm(back, g).get(key); v != "2" {
				return fmt.Errorf("%s = %q", key, v)
			}
			return nil
		})
	}
}

// TestOneWayPeerRedialBounded: a node hears a peer's frames while its own
// dials to that peer fail (a firewall that refuses only its connections).
// Each frame would end its wait between dials (redial): it must still
// dial at most about once a kickGap beside its backoff, not at the
// peer's frame rate, which here is a write every 10 ms.
func TestOneWayPeerRedialBounded(t *testing.T) {
	const groups = 4
	const back = "n3"
	res := &switchResolver{failed: map[string]bool{}, fails: map[string]int{}}
	c := newTestCluster(t, groups, func(o *Options) {
		if o.Node == back {
			res.inner = o.Resolver
			o.Resolver = res
		}
	}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	majority := others(back)
	leaders := map[string]bool{}
	for g := range GroupID(groups) {
		if _, err := c.propose(ctx, majority[int(g)%2], g, fmt.Sprintf("k%d=0", g)); err != nil {
			t.Fatalf("group %d through the others: %v", g, err)
		}
		leaders[c.leaderOf(t, g, majority)] = true
	}
	res.waitFailed(t, back, leaders)
	// Writes keep the leaders' frames coming to n3 for a window; its
	// failed lookups of each leader in that window are counted.
	res.mu.Lock()
	before := maps.Clone(res.fails)
	res.mu.Unlock()
	start := time.Now() // monotonic: the window's length, for the bound
	for i := 1; time.Since(start) < 3*time.Second; i++ {
		g := GroupID(i % groups)
		if _, err := c.propose(ctx, majority[int(g)%2], g, fmt.Sprintf("k%d=%d", g, i)); err != nil {
			t.Fatalf("group %d through the others: %v", g, err)
		}
		time.Sleep(10 * time.Millisecond) // the frame rate, not a wait for an outcome
	}
	window := time.Since(start)
	res.mu.Lock()
	defer res.mu.Unlock()
	// At most one kicked dial a kickGap, and the dials at the end of
	// each backoff (50 ms doubling to 2 s: at most 6 in the first
	// 1.6 s, then one each 2 s), and one in flight: on a slow machine
	// fewer, never more.
	bound := int(window/kickGap) + 1 + 6 + int(window/maxBackoff) + 1
	for n := range leaders {
		if got := res.fails[n] - before[n]; got > bound {
			t.Errorf("%s dialled %s %d times in %v with its frames arriving (at most %d)", back, n, got, window.Round(time.Millisecond), bound)
		}
	}
}
