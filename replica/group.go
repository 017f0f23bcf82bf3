package replica

import (
	"sync"
	"sync/atomic"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// group is one Raft group on this Host.
type group struct {
	id GroupID
	sm StateMachine
	ms *raft.MemoryStorage // the log since the last snapshot, in front of the store

	mu sync.Mutex // guards rn, the quiescence fields and reads below
	rn *raft.RawNode

	// Quiescence (see Host.tickLoop). quiesced: the group is not ticked;
	// idle: ticks since the leader's last index or commit moved, or the
	// group was woken; last: that index as last seen; quiesceOut: the
	// leader's quiesce heartbeats waiting for the worker to send them
	// after the group's Ready messages.
	quiesced   bool
	idle       int
	last       uint64
	quiesceOut []outMsg
	// quiesceAsk is the leader's quiesce heartbeat a follower with a read
	// barrier not answered yet kept (Host.step); readStates quiets the
	// follower once the barrier is answered. Anything that wakes the
	// group drops it.
	quiesceAsk *pb.Message

	reads groupReads // read-index rounds (readindex.go)

	// parked are proposals other nodes forwarded here that raft would
	// have dropped (Host.park), stepped again once the group has a
	// leader (Host.unpark).
	parked []parkedProp

	// voters are the group's voters in its applied configuration (both
	// halves of a joint one), for quiescence and wakePeer; set by AddGroup
	// and by the worker applying a conf change.
	voters []uint64

	// What the partition map wants of the group (SetTarget): its voters
	// (nil: whatever it has) and its preferred leader (0: none). The
	// leader steers towards them (Host.steer). ccAt is the index above
	// which a conf change it proposed is still pending; jointSeen, that
	// the last steer found the group in a joint configuration.
	want      []uint64
	prefer    uint64
	ccAt      uint64
	jointSeen bool

	// removed is set (under mu) by RemoveGroups: the worker no longer
	// persists, sends or applies anything of the group.
	removed bool

	// Touched by the worker only (cs under mu too: Host.Voters reads it).
	// snapWanted asks for a snapshot after the round: a conf change added
	// a voter, which can only start from a snapshot whose ConfState names
	// it (raft refuses one that does not).
	cs         *pb.ConfState
	snapWanted bool
	left       bool   // this node is no longer in the applied configuration
	lastStored uint64 // last log index in the store
	applied    uint64
	snapIndex  uint64
	// restored is the index of the last snapshot this node restored (0:
	// none since it started): what was applied up to it is not known
	// entry by entry (settle).
	restored uint64

	leader atomic.Uint64 // the leader's NodeID as last seen, 0 for none
	queued bool          // in Host.ready; guarded by Host.readyMu
}

// wakeLocked unquiesces the group (g.mu held): it ticks again, counts
// its idle ticks from zero, and a quiesce heartbeat not sent yet is
// dropped (sent after the waking proposal's append it would quiet the
// followers of a busy leader).
func (g *group) wakeLocked() {
	g.quiesced = false
	g.idle = 0
	g.quiesceOut = nil
	g.quiesceAsk = nil
}

// withRaft runs fn on the group's RawNode under its lock.
func (g *group) withRaft(fn func(rn *raft.RawNode)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(g.rn)
}
