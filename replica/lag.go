package replica

import (
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// LagEntries is how many log entries a follower may be behind its leader
// and still count as keeping up: a follower of a busy group is always a
// round trip's entries behind.
const LagEntries = 1000

// Lag is a follower of a group this node leads that is not keeping up.
type Lag struct {
	// Group is the group; Follower the follower's node name.
	Group    GroupID
	Follower string
	// Behind is how many entries the leader's log holds past what the
	// follower is known to hold (its match index).
	Behind uint64
	// Why is what makes it lagging: "down" (its connection broke, a
	// message to it failed, or its lease in the cluster expired, and it
	// has not been heard since), "snapshot" (it is being sent a snapshot:
	// it was behind the compacted log), "probe" (the leader is finding
	// where its log and the follower's meet, after a restart or lost
	// messages) or "behind" (more than LagEntries entries behind). Raft's
	// RecentActive is not used: the leader clears it at every quorum
	// check, so a live follower reads inactive until its next answer.
	Why string
}

// Lagging returns, for every group this node leads, its followers that do
// not keep up (see Lag.Why), sorted by group and follower. A group whose
// leader is quiet has every follower it can reach caught up. It takes
// each group's lock in turn, briefly: a status to ask now and then (the
// cluster's status), not on every write.
func (h *Host) Lagging() []Lag {
	h.mu.RLock()
	groups := make([]*group, 0, len(h.groups))
	for _, g := range h.groups {
		groups = append(groups, g)
	}
	h.mu.RUnlock()
	var lags []Lag
	for _, g := range groups {
		if g.leader.Load() != h.self {
			continue
		}
		var st raft.Status
		g.withRaft(func(rn *raft.RawNode) { st = rn.Status() })
		if st.RaftState != raft.StateLeader {
			continue
		}
		last := st.Progress[h.self].Match
		for id, pr := range st.Progress {
			if id == h.self || pr.IsLearner {
				continue
			}
			behind := uint64(0)
			if last > pr.Match {
				behind = last - pr.Match
			}
			why := ""
			switch {
			case h.isDown(id):
				why = "down"
			case pr.State == tracker.StateSnapshot:
				why = "snapshot"
			case pr.State == tracker.StateProbe && behind > 0:
				why = "probe"
			case behind > LagEntries:
				why = "behind"
			}
			if why != "" {
				lags = append(lags, Lag{Group: g.id, Follower: h.name(id), Behind: behind, Why: why})
			}
		}
	}
	slices.SortFunc(lags, func(a, b Lag) int {
		if a.Group != b.Group {
			if a.Group < b.Group {
				return -1
			}
			return 1
		}
		if a.Follower < b.Follower {
			return -1
		}
		if a.Follower > b.Follower {
			return 1
		}
		return 0
	})
	return lags
}
