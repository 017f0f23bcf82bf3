package cluster

import (
	"context"
	"fmt"
	"sync"
)

// revisionGate is what a mirror of etcd keys tells its waiters: whether it
// was loaded once, and the etcd revision it is current to, which only
// grows; each move wakes whoever waits for a revision. Its owner's mutex
// guards it.
type revisionGate struct {
	loaded  bool
	rev     int64
	advance chan struct{} // closed (and replaced) when rev moves
}

func newRevisionGate() revisionGate { return revisionGate{advance: make(chan struct{})} }

// moveLocked records that the mirror is current to rev (0: not moved).
//
// REQUIRES: the owner's mutex held.
func (g *revisionGate) moveLocked(rev int64) {
	if rev > g.rev {
		g.rev = rev
		close(g.advance)
		g.advance = make(chan struct{})
	}
}

// wait waits until the mirror was loaded and is current to rev or later;
// mu is the owner's mutex (not held by the caller), what names the mirror
// in the error of a wait ctx ended.
func (g *revisionGate) wait(ctx context.Context, mu *sync.Mutex, rev int64, what string) error {
	for {
		mu.Lock()
		reached, advance := g.loaded && g.rev >= rev, g.advance
		mu.Unlock()
		if reached {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for the %s at revision %d: %w", what, rev, ctx.Err())
		case <-advance:
		}
	}
}
