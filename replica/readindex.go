package replica

import (
	"context"
	"encoding/binary"
	"fmt"

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
// Rounds are shared per group: one is in flight at a time; the callers
// that arrive meanwhile wait together for the next, issued as soon as the
// one in flight is answered. (Joining the round in flight would not do:
// its index was noted before they arrived and may miss a write
// acknowledged in between.) The worker (Host.round) hands raft's
// ReadStates to readStates, which resolves the rounds.

// readRound is one read-index round of a group: the callers sharing it.
type readRound struct {
	id      uint64 // raft's request context: the Host's proposal counter
	term    uint64 // the leader's term when issued
	ticks   int    // ticks since issued (ageRead)
	index   uint64 // the read index raft returned (once it did)
	waiters []chan error
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
			for _, ch := range rr.waiters {
				ch <- err
			}
		}
	}
	r.sent, r.next = nil, nil
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
	g.withRaft(func(rn *raft.RawNode) {
		if g.removed {
			err = fmt.Errorf("%w: %d", ErrNoGroup, id)
			return
		}
		if st := rn.BasicStatus(); st.RaftState != raft.StateLeader {
			err = h.notLeader(id, st.Lead)
			return
		}
		g.wakeLocked() // a quiet leader must tick: heartbeats, CheckQuorum
		if g.reads.next == nil {
			g.reads.next = &readRound{}
		}
		g.reads.next.waiters = append(g.reads.next.waiters, ch)
		if g.reads.sent == nil {
			h.issueRead(g, rn)
		}
	})
	if err != nil {
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

// notLeader is ReadIndex's refusal on a node that does not lead group id
// (lead: the leader it knows, raft.None for none).
func (h *Host) notLeader(id GroupID, lead uint64) error {
	if lead == raft.None {
		return fmt.Errorf("%w: group %d has no leader at the moment", ErrNotLeader, id)
	}
	return fmt.Errorf("%w: group %d is led by node %s", ErrNotLeader, id, h.name(lead))
}

// issueRead sends g's next round to raft (g.mu held, g led here, no round
// in flight).
func (h *Host) issueRead(g *group, rn *raft.RawNode) {
	r := g.reads.next
	g.reads.next = nil
	r.id = h.seq.Add(1)
	r.term = rn.BasicStatus().GetTerm()
	var rctx [8]byte
	binary.BigEndian.PutUint64(rctx[:], r.id)
	rn.ReadIndex(rctx[:])
	h.readRounds.Add(1)
	g.reads.sent = r
}

// ageRead counts a tick of g's round in flight (g.mu held) and, when
// raft has not answered it in two election timeouts, issues it again:
// raft may lose a read-index request without telling (its documented
// contract), and the callers waiting for the next round would otherwise
// wait behind it until their deadlines. The callers of the lost round
// join the next one: its index, noted later, serves them as well. An
// answer to the lost one after all is ignored.
func (h *Host) ageRead(g *group, rn *raft.RawNode) {
	r := &g.reads
	if r.sent == nil {
		return
	}
	if r.sent.ticks++; r.sent.ticks < 2*h.opts.ElectionTicks {
		return
	}
	if st := rn.BasicStatus(); st.RaftState != raft.StateLeader {
		return // readStates fails it at the group's next round
	}
	lost := r.sent
	r.sent = nil
	if r.next == nil {
		r.next = &readRound{}
	}
	r.next.waiters = append(lost.waiters, r.next.waiters...)
	h.issueRead(g, rn)
}

// readStates is the worker's part (after the round's commit, so the
// applied entries are visible): it takes the read indexes raft returned
// in rd, answers the rounds this node has applied far enough for, issues
// the next round, and fails the rounds not confirmed when the node no
// longer leads in the term they were issued in (raft drops its pending
// requests when it steps down).
func (h *Host) readStates(g *group, rd *raft.Ready) {
	g.withRaft(func(rn *raft.RawNode) {
		r := &g.reads
		if !r.pending() {
			return
		}
		for _, rs := range rd.ReadStates {
			if r.sent == nil || len(rs.RequestCtx) != 8 || binary.BigEndian.Uint64(rs.RequestCtx) != r.sent.id {
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
			for _, ch := range a.waiters {
				ch <- nil
			}
		}
		clear(r.applying[len(keep):])
		r.applying = keep

		st := rn.BasicStatus()
		if st.RaftState != raft.StateLeader || (r.sent != nil && r.sent.term != st.GetTerm()) {
			// Confirmed rounds only wait for entries committed already:
			// they still complete here. The others cannot.
			r.fail(false, h.notLeader(g.id, st.Lead))
			return
		}
		if r.sent == nil && r.next != nil {
			h.issueRead(g, rn)
		}
	})
}
