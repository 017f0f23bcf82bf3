package replica

import (
	pb "go.etcd.io/raft/v3/raftpb"
)

// frameQueue holds the messages of one peer connection (all its
// groups') waiting to be written to it (a peer's sender) or, having
// arrived on it, to be stepped (an inbound connection's inbox), in two
// lanes, so that a starved node's backlog is not a FIFO of stale
// heartbeats in front of the messages elections and commits wait for.
//
// Heartbeats and heartbeat responses are periodic: each one a group
// sends makes the one before it, still queued, useless (it carries the
// term and commit the newer one carries, and raft repeats the latest
// pending read-index context on every heartbeat, whose acknowledgement
// confirms the earlier ones). So a newer one takes the older one's place
// in the queue (superseded), and the lane holds at most about one of
// each kind per group, however long the node is held up. Everything
// else (votes and pre-votes, appends and their acknowledgements,
// snapshots, proposals forwarded, the leaders' quiesce heartbeats, ...)
// keeps its order in the other lane, taken first: a vote or an
// acknowledgement waits for the batch in hand, not behind the
// heartbeats of a thousand groups. At a full queue (the sender's
// Options.SendQueue) a message that is not a heartbeat evicts the oldest
// queued heartbeat or response rather than being dropped; only when none
// is left is it dropped (and raft told: Host.unreachable).
//
// Raft's safety does not depend on any of this: it tolerates messages
// lost, duplicated and reordered, and no message is altered.
type frameQueue struct {
	urgent []outMsg // everything but (plain) heartbeats and their responses, in order
	beats  []outMsg // heartbeats and responses; an entry whose m is nil was removed
	head   int      // beats[:head] are all removed
	live   int      // entries of beats not removed
	slot   map[beatKey]int
}

// beatKey names a group's latest queued heartbeat or response.
type beatKey struct {
	g GroupID
	t pb.MessageType
}

// What push did with a message.
type pushResult int

const (
	pushQueued     pushResult = iota
	pushSuperseded            // queued in place of its group's older heartbeat or response
	pushEvicted               // queued, evicting the oldest heartbeat or response
	pushDropped               // not queued: the queue was full
)

// isBeat reports whether m goes in the heartbeat lane: a heartbeat or a
// heartbeat response. A leader's quiesce heartbeat does not: it must
// arrive after its group's other messages and is never replaced.
func isBeat(m outMsg) bool {
	t := m.m.GetType()
	return !m.quiesce && (t == pb.MsgHeartbeat || t == pb.MsgHeartbeatResp)
}

// len is how many messages the queue holds.
func (q *frameQueue) len() int { return len(q.urgent) + q.live }

// push queues m, the queue holding at most limit messages.
func (q *frameQueue) push(m outMsg, limit int) pushResult {
	if m.quiesce {
		// The group's plain heartbeat still queued would reach the
		// follower after this one (the ordered lane goes first) and
		// wake it: it is superseded.
		if q.remove(beatKey{m.g, pb.MsgHeartbeat}) {
			q.urgent = append(q.urgent, m)
			return pushSuperseded
		}
	}
	beat := isBeat(m)
	k := beatKey{m.g, m.m.GetType()}
	if beat {
		if i, ok := q.slot[k]; ok && (len(q.beats[i].m.GetContext()) == 0 || len(m.m.GetContext()) > 0) {
			q.beats[i] = m
			return pushSuperseded
		}
	}
	res := pushQueued
	if q.len() >= limit {
		if beat || !q.evictOldest() {
			return pushDropped
		}
		res = pushEvicted
	}
	if !beat {
		q.urgent = append(q.urgent, m)
		return res
	}
	if q.slot == nil {
		q.slot = map[beatKey]int{}
	}
	q.slot[k] = len(q.beats)
	q.beats = append(q.beats, m)
	q.live++
	return res
}

// remove takes k's queued heartbeat or response out, if there is one.
func (q *frameQueue) remove(k beatKey) bool {
	i, ok := q.slot[k]
	if !ok {
		return false
	}
	delete(q.slot, k)
	q.beats[i].m = nil
	q.live--
	return true
}

// evictOldest removes the oldest queued heartbeat or response, if any.
func (q *frameQueue) evictOldest() bool {
	for ; q.head < len(q.beats); q.head++ {
		b := q.beats[q.head]
		if b.m == nil {
			continue
		}
		if i, ok := q.slot[beatKey{b.g, b.m.GetType()}]; ok && i == q.head {
			delete(q.slot, beatKey{b.g, b.m.GetType()})
		}
		q.beats[q.head].m = nil
		q.live--
		q.head++
		return true
	}
	return false
}

// take empties the queue and returns its messages in the order they are
// to be written: the ordered lane, then the heartbeats.
func (q *frameQueue) take() []outMsg {
	out := q.urgent
	for _, b := range q.beats[q.head:] {
		if b.m != nil {
			out = append(out, b)
		}
	}
	q.urgent, q.beats, q.head, q.live = nil, nil, 0, 0
	clear(q.slot)
	return out
}
