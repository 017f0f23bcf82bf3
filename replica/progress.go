package replica

import "go.etcd.io/raft/v3"

// Progress is where one of a Host's groups stands in its log, as this
// node sees it.
type Progress struct {
	// Group is the group.
	Group GroupID
	// Leader is its leader's node name as this node last saw it ("" for
	// none); Leading says this node leads it.
	Leader  string
	Leading bool
	// Term is this node's term of the group; Commit the highest log index
	// it knows committed; Applied the highest it applied (its copy holds
	// every entry up to it: a bucket partition's sequence numbers are
	// these indexes).
	Term, Commit, Applied uint64
}

// Progress returns where each of the groups ids stands on this node, in
// the order of ids; a group this node does not run is left out. It takes
// each group's lock in turn, briefly: a figure to read now and then (a
// test timing a replica's catch-up from the groups themselves), not on
// every write.
func (h *Host) Progress(ids []GroupID) []Progress {
	out := make([]Progress, 0, len(ids))
	for _, id := range ids {
		g, err := h.group(id)
		if err != nil {
			continue
		}
		var st raft.BasicStatus
		g.withRaft(func(rn *raft.RawNode) { st = rn.BasicStatus() })
		p := Progress{Group: id, Leading: st.RaftState == raft.StateLeader,
			Term: st.GetTerm(), Commit: st.GetCommit(), Applied: st.Applied}
		if st.Lead != raft.None {
			p.Leader = h.name(st.Lead)
		}
		out = append(out, p)
	}
	return out
}
