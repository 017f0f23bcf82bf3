package replica

import "go.etcd.io/raft/v3"

// Term returns group id's Raft term as this node knows it, and false when
// the group does not run here. A group's term only grows, and every change
// of leader comes with a new term, so a sum of terms tells a changed
// leadership from an unchanged one (the KV port's configuration revision).
func (h *Host) Term(id GroupID) (uint64, bool) {
	g, err := h.group(id)
	if err != nil {
		return 0, false
	}
	var term uint64
	g.withRaft(func(rn *raft.RawNode) { term = rn.BasicStatus().GetTerm() })
	return term, true
}
