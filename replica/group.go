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

	mu sync.Mutex // guards rn
	rn *raft.RawNode

	// Touched by the worker only.
	cs         *pb.ConfState
	lastStored uint64 // last log index in the store
	applied    uint64
	snapIndex  uint64

	leader atomic.Uint64 // the leader's NodeID as last seen, 0 for none
	queued bool          // in Host.ready; guarded by Host.readyMu
}

// withRaft runs fn on the group's RawNode under its lock.
func (g *group) withRaft(fn func(rn *raft.RawNode)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(g.rn)
}
