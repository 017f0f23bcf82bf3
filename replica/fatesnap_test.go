package replica

import (
	"errors"
	"testing"
	"time"
)

// A proposal this node appended at index 5, then restored a snapshot past
// (index 10) in a round where its group's leader did not change: the
// snapshot may hold it applied (the leader that appended it committed it),
// and no answer comes from a snapshot. When the leader then changes, its
// fate is not known: ErrLeaderChanged (outcome unknown), never ErrDropped
// (not applied, resent by Replicate: a write applied twice).
func TestFateAfterEarlierSnapshotIsUnknown(t *testing.T) {
	h := &Host{pending: map[uint64]waiter{}, fates: map[GroupID][]uint64{}}
	h.opts.test.fateWait = time.Minute
	g := &group{id: 7}
	ch := make(chan outcome, 1)
	h.pending[1] = waiter{ch: ch, g: g.id}
	h.place([]position{{seq: 1, index: 5, term: 2}})

	// Round 1: the snapshot restored (persist sets applied to its index);
	// no change of leader, so nothing awaits a fate yet.
	g.snapIndex, g.applied, g.restored = 10, 10, 10 // as persist restores it
	h.settle(g)

	// Round 2: the leader changes; entries past the snapshot applied.
	g.applied = 12
	h.awaitFates(g.id)
	h.settle(g)

	select {
	case o := <-ch:
		if errors.Is(o.err, ErrDropped) {
			t.Fatalf("a proposal a snapshot may hold applied was told %v: Replicate resends it", o.err)
		}
		if !errors.Is(o.err, ErrLeaderChanged) {
			t.Fatalf("got %v, want ErrLeaderChanged", o.err)
		}
	default:
		// Still awaiting its fate: sweepFates would end it as unknown.
	}
}
