package replica

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
)

// Read index (raft's ReadIndex, ReadOnlySafe). A leader answers a read
// from its own memory only after ReadIndex: the leader notes its commit
// index, confirms with a heartbeat round that a majority still follows it
// in its term (a leader cut off from its followers, or deposed without
// knowing it, gets no majority and never confirms), then waits until this
// node has applied up to that index. A read answered after that sees
// every write acknowledged before the read began: the read is
// linearizable.
//
// ReadBarrier is the same round issued by any member of the group: a
// follower's raft forwards the request to the leader it knows, the
// leader confirms its commit index as above and answers it; the follower
// then waits until it has applied up to that index. Sequence numbers are
// assigned at apply and equal on every copy, so the follower's copy then
// holds every write acknowledged before the call, as the leader's would.
//
// Rounds are shared per group: one is in flight at a time; the callers
// that arrive meanwhile wait together for the next, issued as soon as the
// one in flight is answered. (Joining the round in flight would not do:
// its index was noted before they arrived and may miss a write
// acknowledged in between.) A round is issued as the leader (it serves
// ReadIndex's callers and ReadBarrier's) or as a follower to the leader
// it knows (ReadBarrier's only). The worker (Host.round) hands raft's
// ReadStates to readStates, which resolves the rounds.

// readWaiter is one caller of a round.
type readWaiter struct {
	ch chan error // capacity 1
	// any: a ReadBarrier caller, which a round issued as a follower
	// serves too and which a change of leader does not fail (its round is
	// issued again to the new leader).
	any bool
	// done is the caller's ctx.Done(): a round whose callers all left is
	// dropped rather than issued (nil: never).
	done <-chan struct{}
}

// gone reports whether the caller stopped waiting.
func (w readWaiter) gone() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// maxReadIDs bounds the request contexts a round issued again keeps
// answering to.
const maxReadIDs = 4

// readRound is one read-index round of a group: the callers sharing it.
type readRound struct {
	// ids are raft's request contexts the round was issued under (the
	// Host's proposal counter), the latest last: a round issued again
	// (ageRead) accepts the answer to any of them, each issued after
	// every caller of the round arrived.
	ids   []uint64
	term  uint64 // the term when issued
	lead  uint64 // the leader it was issued to (this node for a leader's round)
	ticks int    // ticks since last issued (ageRead)
	index uint64 // the read index raft returned (once it did)

	waiters []readWaiter
}

// answers reports whether rctx is one of r's request contexts.
func (r *readRound) answers(rctx []byte) bool {
	if len(rctx) != 8 {
		return false
	}
	id := binary.BigEndian.Uint64(rctx)
	for _, x := range r.ids {
		if x == id {
			return true
		}
	}
	return false
}

// groupReads is a group's read-index rounds; guarded by group.mu.
type groupReads struct {
	sent     *readRound   // issued to raft, its ReadState not back yet
	next     *readRound   // callers waiting for the next round
	applying []*readRound // confirmed, waiting for the applied index to reach theirs
}

// pending reports whether any round is outstanding: the group must keep
// ticking (raft repeats a pending request's context on its heartbeats)
// rather than go quiet.
func (r *groupReads) pending() bool {
	return r.sent != nil || r.next != nil || len(r.applying) > 0
}

// unconfirmed reports whether a round is not confirmed yet: a follower
// with one keeps ticking, to issue it again should it be lost, rather
// than go quiet with its leader.
func (r *groupReads) unconfirmed() bool {
	return r.sent != nil || r.next != nil
}

// fail answers err to the rounds not confirmed yet, and with all to the
// confirmed ones too (g.mu held).
func (r *groupReads) fail(all bool, err error) {
	rounds := []*readRound{r.sent, r.next}
	if all {
		rounds = append(rounds, r.applying...)
		r.applying = nil
	}
	for _, rr := range rounds {
		if rr != nil {
			for _, w := range rr.waiters {
				w.ch <- err
			}
		}
	}
	r.sent, r.next = nil, nil
}

// requeue puts the callers of rr, a round in flight that can no longer
// be answered (its leader or term changed, or raft lost it), in front of
// the next round's: an index noted later serves them as well (g.mu held).
func (r *groupReads) requeue(rr *readRound) {
	if r.next == nil {
		r.next = &readRound{}
	}
	r.next.waiters = append(rr.waiters, r.next.waiters...)
}

// ReadIndex is a linearizable read barrier on group id: it returns nil
// once this node has confirmed, with a heartbeat round answered by a
// majority, that it still leads the group, and has applied every entry
// committed when the call began; a read of the state machine after it
// sees every mutation acknowledged before the call. A quiet group is
// woken. It fails with ErrNotLeader when this node does not lead the
// group, or stops leading it before the round is confirmed; with
// ErrTimeout when ctx ends first (a leader cut off from its majority
// never confirms: it waits until CheckQuorum steps it down, then fails);
// with ErrClosed when the Host closes; with ErrNoGroup when the group is
// removed. A new leader that has not committed an entry of its term yet
// confirms once it has. Concurrent callers share rounds.
func (h *Host) ReadIndex(ctx context.Context, id GroupID) error {
	g, err := h.group(id)
	if err != nil {
		return err
	}
	ch := make(chan error, 1)
	if err := h.addReader(g, readWaiter{ch: ch, done: ctx.Done()}); err != nil {
		return err
	}
	h.enqueue(g)
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		// The round still completes; its answer to ch is dropped (ch is
		// buffered).
		return fmt.Errorf("%w: read index of group %d: %w", ErrTimeout, id, ctx.Err())
	case <-h.ctx.Done():
		return fmt.Errorf("%w: group %d", ErrClosed, id)
	}
}

// ReadBarrier makes this node's copies of groups ids current: it returns
// nil once, for each group, this node has applied every entry its leader
// had committed when the call began, so that a read of the state
// machines after it sees every mutation acknowledged before the call.
// Unlike ReadIndex it works on any member of a group: on a follower the
// round goes to the leader (raft forwards the request; the leader
// confirms its commit index with a heartbeat round answered by a
// majority, as for its own read index) and the follower waits until it
// has applied up to that index. The rounds of all groups are issued at
// once (the transport batches them per peer). A change of leader, a
// group with no leader for a while or a lost request do not fail it: the
// round is issued again, to the leader known then, until ctx ends. A
// failure is a *BarrierError naming the group, wrapping ErrTimeout when
// ctx ends first (saying whether the group knew no leader), ErrClosed
// when the Host closes, ErrNoGroup for a group not running here (or
// removed meanwhile). Quiet groups are woken,
// here and at the leader; they go quiet again after.
func (h *Host) ReadBarrier(ctx context.Context, ids []GroupID) error {
	if len(ids) == 0 {
		return nil
	}
	// The callers' rounds are dropped once this returns, whatever ctx.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gs := make([]*group, len(ids))
	for i, id := range ids {
		g, err := h.group(id)
		if err != nil {
			return &BarrierError{Index: i, Err: err}
		}
		gs[i] = g
	}
	chs := make([]chan error, len(ids))
	for i, g := range gs {
		chs[i] = make(chan error, 1)
		if err := h.addReader(g, readWaiter{ch: chs[i], any: true, done: ctx.Done()}); err != nil {
			return &BarrierError{Index: i, Err: err}
		}
		h.enqueue(g)
	}
	h.barriers.Add(1)
	for i, ch := range chs {
		select {
		case err := <-ch:
			if err != nil {
				return &BarrierError{Index: i, Err: err}
			}
		case <-ctx.Done():
			why := ""
			if gs[i].leader.Load() == raft.None {
				why = " (it has no leader at the moment)"
			}
			return &BarrierError{Index: i, Err: fmt.Errorf("%w: read barrier of group %d%s: %w", ErrTimeout, ids[i], why, context.Cause(ctx))}
		case <-h.ctx.Done():
			return &BarrierError{Index: i, Err: fmt.Errorf("%w: group %d", ErrClosed, ids[i])}
		}
	}
	return nil
}

// BarrierError is ReadBarrier's failure: the group it failed on (ids
// [Index]) and why (wrapping ErrTimeout, ErrClosed or ErrNoGroup).
type BarrierError struct {
	Index int
	Err   error
}

func (e *BarrierError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *BarrierError) Unwrap() error { return e.Err }

// addReader adds caller w to g's next read-index round, issued at once
// if none is in flight; it refuses a ReadIndex caller on a node that
// does not lead g.
func (h *Host) addReader(g *group, w readWaiter) error {
	var err error
	g.withRaft(func(rn *raft.RawNode) {
		if g.removed {
			err = fmt.Errorf("%w: %d", ErrNoGroup, g.id)
			return
		}
		if st := rn.BasicStatus(); !w.any && st.RaftState != raft.StateLeader {
			err = h.notLeader(g.id, st.Lead)
			return
		}
		g.wakeLocked() // a quiet group must tick: heartbeats, CheckQuorum, ageRead
		if g.reads.next == nil {
			g.reads.next = &readRound{}
		}
		g.reads.next.waiters = append(g.reads.next.waiters, w)
		h.issueRead(g, rn)
	})
	return err
}

// notLeader is ReadIndex's refusal on a node that does not lead group id
// (lead: the leader it knows, raft.None for none).
func (h *Host) notLeader(id GroupID, lead uint64) error {
	if lead == raft.None {
		return fmt.Errorf("%w: group %d has no leader at the moment", ErrNotLeader, id)
	}
	return fmt.Errorf("%w: group %d is led by node %s", ErrNotLeader, id, h.name(lead))
}

// issueRead sends g's next round to raft if there is one and none is in
// flight (g.mu held). A leader issues it as its own read index; a node
// that does not lead fails the round's ReadIndex callers (ErrNotLeader)
// and issues it for the others to the leader it knows, or keeps it until
// it knows one (readStates issues it then: a new leader is a Ready).
func (h *Host) issueRead(g *group, rn *raft.RawNode) {
	r := &g.reads
	if r.sent != nil || r.next == nil {
		return
	}
	st := rn.BasicStatus()
	lead := st.Lead
	if st.RaftState == raft.StateLeader {
		lead = h.self
	} else {
		keep := r.next.waiters[:0]
		for _, w := range r.next.waiters {
			if w.any {
				keep = append(keep, w)
			} else {
				w.ch <- h.notLeader(g.id, st.Lead)
			}
		}
		clear(r.next.waiters[len(keep):])
		r.next.waiters = keep
	}
	if len(r.next.waiters) == 0 {
		r.next = nil
		return
	}
	if lead == raft.None {
		return
	}
	rr := r.next
	r.next = nil
	rr.term, rr.lead = st.GetTerm(), lead
	h.sendRead(rr, rn)
	r.sent = rr
}

// sendRead hands round rr to raft under a new request context.
func (h *Host) sendRead(rr *readRound, rn *raft.RawNode) {
	id := h.seq.Add(1)
	if rr.ids = append(rr.ids, id); len(rr.ids) > maxReadIDs {
		rr.ids = rr.ids[1:]
	}
	rr.ticks = 0
	var rctx [8]byte
	binary.BigEndian.PutUint64(rctx[:], id)
	rn.ReadIndex(rctx[:])
	h.readRounds.Add(1)
}

// current reports whether round rr, in flight, can still be answered:
// this node is in the term it was issued in, and leads if it issued rr as
// the leader, or follows the same leader.
func (h *Host) current(rr *readRound, st raft.BasicStatus) bool {
	if st.GetTerm() != rr.term {
		return false
	}
	if rr.lead == h.self {
		return st.RaftState == raft.StateLeader
	}
	return st.RaftState != raft.StateLeader && st.Lead == rr.lead
}

// ageRead counts a tick of g's round in flight (g.mu held) and, when
// raft has not answered it in time, issues it again under a new request
// context (an answer to an earlier one still counts): raft may lose a
// read-index request without telling (its documented contract; a
// follower's forwarded request or its answer may be lost on the way),
// and the callers waiting for the next round would otherwise wait behind
// it until their deadlines. A leader's round is issued again after two
// election timeouts; a follower's after half of one, before the
// follower, awake while its leader may be quiet, would campaign. Rounds
// whose callers all left are dropped.
func (h *Host) ageRead(g *group, rn *raft.RawNode) {
	r := &g.reads
	if r.next != nil {
		r.next.waiters = slices.DeleteFunc(r.next.waiters, readWaiter.gone)
		if len(r.next.waiters) == 0 {
			r.next = nil
		}
	}
	if r.sent == nil {
		h.issueRead(g, rn) // a round kept while no leader was known
		return
	}
	if r.sent.waiters = slices.DeleteFunc(r.sent.waiters, readWaiter.gone); len(r.sent.waiters) == 0 {
		r.sent = nil
		h.issueRead(g, rn)
		return
	}
	limit := 2 * h.opts.ElectionTicks
	if r.sent.lead != h.self {
		limit = max(1, h.opts.ElectionTicks/2)
	}
	if r.sent.ticks++; r.sent.ticks < limit {
		return
	}
	if !h.current(r.sent, rn.BasicStatus()) {
		return // readStates requeues it at the group's next Ready
	}
	h.sendRead(r.sent, rn)
}

// readStates is the worker's part (after the round's commit, so the
// applied entries are visible): it takes the read indexes raft returned
// in rd, answers the rounds this node has applied far enough for, issues
// the next round, and handles a round in flight that can no longer be
// answered (raft drops its pending requests when the leader changes, or
// the term): its ReadIndex callers fail with ErrNotLeader, its
// ReadBarrier callers join the next round, issued to the leader known.
func (h *Host) readStates(g *group, rd *raft.Ready) {
	g.withRaft(func(rn *raft.RawNode) {
		r := &g.reads
		if !r.pending() {
			return
		}
		for _, rs := range rd.ReadStates {
			if r.sent == nil || !r.sent.answers(rs.RequestCtx) {
				continue
			}
			r.sent.index = rs.Index
			r.applying = append(r.applying, r.sent)
			r.sent = nil
		}
		keep := r.applying[:0]
		for _, a := range r.applying {
			if a.index > g.applied {
				keep = append(keep, a)
				continue
			}
			for _, w := range a.waiters {
				w.ch <- nil
			}
		}
		clear(r.applying[len(keep):])
		r.applying = keep

		st := rn.BasicStatus()
		if r.sent != nil && !h.current(r.sent, st) {
			// Confirmed rounds only wait for entries committed already:
			// they still complete here. This one cannot.
			lost := r.sent
			r.sent = nil
			err := h.notLeader(g.id, st.Lead)
			kept := lost.waiters[:0]
			for _, w := range lost.waiters {
				if w.any {
					kept = append(kept, w)
				} else {
					w.ch <- err
				}
			}
			lost.waiters = kept
			r.requeue(lost)
		}
		h.issueRead(g, rn)
		if q := g.quiesceAsk; q != nil && !r.unconfirmed() {
			g.quiesceAsk = nil
			if st.RaftState == raft.StateFollower && st.Lead == q.GetFrom() && st.GetTerm() == q.GetTerm() &&
				st.GetCommit() == q.GetCommit() {
				g.quiesced = true // as the leader's quiesce heartbeat asked (Host.step)
			}
		}
	})
}
