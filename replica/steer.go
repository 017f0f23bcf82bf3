package replica

import (
	"fmt"
	"slices"
	"strconv"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// steerTicks is how often (in ticks) a leader compares its group with
// what the partition map wants of it (Host.steer): once a second at the
// default tick, so a transfer or a conf change is not retried on every
// tick while the last one is under way.
const steerTicks = 10

// SetTarget tells the Host what the partition map wants of group id: its
// voters (node names; nil or empty: whatever it has) and its preferred
// leader ("" for none). The group's leader, whichever node that is,
// steers towards them about once a second (steerTicks): it proposes the
// conf change that makes the voters the wanted ones (one ConfChangeV2,
// through a joint configuration when it changes more than one voter;
// a leader that is not wanted adds the new voters first and hands its
// leadership over, and its successor removes it), and hands its
// leadership to the preferred leader once that node is a voter, not
// marked down and has every entry the leader has (RawNode.TransferLeader).
// Every node of the group may be told; only the leader acts.
func (h *Host) SetTarget(id GroupID, voters []string, leader string) error {
	g, err := h.group(id)
	if err != nil {
		return err
	}
	ids := make([]uint64, 0, len(voters))
	h.mu.Lock()
	for _, v := range voters {
		nid := NodeID(v)
		if other, ok := h.names[nid]; ok && other != v {
			h.mu.Unlock()
			return fmt.Errorf("%w: nodes %q and %q have the same Raft ID", ErrBadOptions, other, v)
		}
		h.names[nid] = v
		if !slices.Contains(ids, nid) {
			ids = append(ids, nid)
		}
	}
	h.mu.Unlock()
	prefer := uint64(0)
	if leader != "" {
		if prefer = NodeID(leader); !slices.Contains(ids, prefer) && len(ids) > 0 {
			return fmt.Errorf("%w: group %d: preferred leader %q is not one of the voters %q", ErrBadOptions, id, leader, voters)
		}
		h.mu.Lock()
		h.names[prefer] = leader
		h.mu.Unlock()
	}
	slices.Sort(ids)
	g.withRaft(func(*raft.RawNode) {
		if len(ids) == 0 {
			ids = nil
		}
		g.want, g.prefer = ids, prefer
	})
	return nil
}

// Voters returns the voters of group id's applied configuration here
// (both halves of a joint one), sorted by name: what the group's conf
// changes made of it, which the map's voters may be ahead of. A node
// not among them takes no part in the group any more.
func (h *Host) Voters(id GroupID) ([]string, error) {
	g, err := h.group(id)
	if err != nil {
		return nil, err
	}
	var ids []uint64
	g.withRaft(func(*raft.RawNode) { ids = slices.Clone(g.voters) })
	out := make([]string, 0, len(ids))
	for _, nid := range ids {
		n := h.name(nid)
		if n == "" {
			n = "#" + strconv.FormatUint(nid, 16)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// HasVoter reports whether node is a voter of group id's applied
// configuration here (either half of a joint one), by its Raft ID, so
// that a node this Host was never told the name of counts too (Voters
// shows such a node by its ID only). A group joined empty has no
// configuration before its leader's snapshot arrives: no node is one of
// its voters then, this one included.
func (h *Host) HasVoter(id GroupID, node string) (bool, error) {
	g, err := h.group(id)
	if err != nil {
		return false, err
	}
	nid, in := NodeID(node), false
	g.withRaft(func(*raft.RawNode) { in = slices.Contains(g.voters, nid) })
	return in, nil
}

// leaveJoint proposes leaving the joint configuration g's leader found
// at two steers in a row (g.mu held), and reports whether it did. Raft
// leaves a joint configuration by itself once its leader applied it, but
// drops that proposal while a leadership transfer is under way and tries
// again only when it next applies an entry, which a group with nothing
// to do (quiet) may never do: its outgoing voters then stay voters (a
// failed-over node kept in a group of the others, probed for ever). An
// empty ConfChangeV2 is that same leave; were one pending already, raft
// appends an empty entry instead, whose application retries its own.
func (h *Host) leaveJoint(g *group, rn *raft.RawNode) bool {
	if !g.jointSeen {
		g.jointSeen = true // raft's own leave may be on its way
		return false
	}
	g.jointSeen = false
	if err := rn.ProposeConfChange(&pb.ConfChangeV2{}); err != nil {
		return false
	}
	h.confChanges.Add(1)
	return true
}

// steer makes one step of a leader towards what the map wants of g
// (SetTarget), g.mu held: a conf change when the voters differ, else a
// leadership transfer to the preferred leader when it can take over at
// once. It reports whether it did either. Nothing is done while a
// transfer or a conf change it proposed is under way; a joint
// configuration is left (leaveJoint).
func (h *Host) steer(g *group, rn *raft.RawNode) bool {
	if g.want == nil && g.prefer == 0 {
		return false
	}
	st := rn.BasicStatus()
	if st.RaftState != raft.StateLeader || st.LeadTransferee != raft.None {
		return false
	}
	cur := g.cs.GetVoters()
	if len(g.cs.GetVotersOutgoing()) > 0 {
		return h.leaveJoint(g, rn)
	}
	g.jointSeen = false
	if st.Applied < g.ccAt {
		return false
	}
	if g.want != nil {
		var changes []*pb.ConfChangeSingle
		for _, v := range g.want {
			if !slices.Contains(cur, v) {
				changes = append(changes, &pb.ConfChangeSingle{Type: pb.ConfChangeType_ConfChangeAddNode.Enum(), NodeId: new(v)})
			}
		}
		if slices.Contains(g.want, h.self) { // a leader does not remove itself: its successor does
			for _, v := range cur {
				if !slices.Contains(g.want, v) {
					changes = append(changes, &pb.ConfChangeSingle{Type: pb.ConfChangeType_ConfChangeRemoveNode.Enum(), NodeId: new(v)})
				}
			}
		}
		if len(changes) > 0 {
			last, _ := g.ms.LastIndex()
			// Auto transition: one change is simple, more go through a
			// joint configuration that raft leaves by itself.
			if err := rn.ProposeConfChange(&pb.ConfChangeV2{Changes: changes}); err != nil {
				return false
			}
			g.ccAt = last + 1
			h.confChanges.Add(1)
			return true
		}
	}
	if g.prefer == 0 || g.prefer == h.self || !slices.Contains(cur, g.prefer) || h.isDown(g.prefer) {
		return false
	}
	last, _ := g.ms.LastIndex()
	ready := false
	rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == g.prefer && pr.Match == last && pr.State == tracker.StateReplicate {
			ready = true
		}
	})
	if !ready {
		return false
	}
	rn.TransferLeader(g.prefer)
	h.transfers.Add(1)
	return true
}
