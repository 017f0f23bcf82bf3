package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cockroachdb/pebble/v2"
)

// work is the worker goroutine: it runs rounds while groups are ready.
func (h *Host) work() {
	defer h.wg.Done()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.wake:
		}
		if err := h.round(); err != nil {
			if h.ctx.Err() != nil {
				return
			}
			h.opts.Logger.Error("replica: the worker stopped; the node no longer replicates", "err", err)
			h.failed.Store(&err)
			h.cancel()
			return
		}
	}
}

// readyGroup is one group's part of a round.
type readyGroup struct {
	g       *group
	rd      raft.Ready
	answers []answer
}

type answer struct {
	seq uint64
	res Result
}

// position is where one of this Host's proposals sits in its group's
// log as this node appended it (Ready.Entries): its index and term.
type position struct {
	seq, index, term uint64
}

// round takes the ready groups, collects their Ready, writes all of them
// (log entries, HardStates, snapshots, applied mutations and indexes) in
// one batch synced once, then sends the messages, answers the proposers
// and advances the groups. The ordering follows raft's contract: nothing
// is sent before the state it depends on is on disk.
func (h *Host) round() error {
	h.readyMu.Lock()
	gs := h.ready
	h.ready = nil
	for _, g := range gs {
		g.queued = false
	}
	removals := h.removals
	h.removals = nil
	h.readyMu.Unlock()

	if len(removals) > 0 {
		// Before this round's Readies: a removed group's last persisted
		// round is behind it, and it has none in this one.
		if err := h.remove(removals); err != nil {
			return err
		}
	}
	var work []readyGroup
	var quiet []outMsg    // leaders' quiesce heartbeats, sent after every Ready's messages
	var placed []position // this Host's proposals appended this round
	b := h.st.db.NewBatch()
	defer b.Close()
	for _, g := range gs {
		var rd raft.Ready
		has := false
		g.withRaft(func(rn *raft.RawNode) {
			if g.removed {
				return
			}
			if has = rn.HasReady(); has {
				rd = rn.Ready()
			}
			quiet = append(quiet, g.quiesceOut...)
			g.quiesceOut = nil
		})
		if !has {
			continue
		}
		rg := readyGroup{g: g, rd: rd}
		if err := h.persist(b, &rg); err != nil {
			return fmt.Errorf("replica: group %d: %w", g.id, err)
		}
		placed = h.ownEntries(placed, rd.Entries)
		work = append(work, rg)
	}
	if len(work) == 0 {
		h.sendQuiet(quiet)
		return nil
	}
	h.rounds.Add(1)
	if err := h.ctx.Err(); err != nil {
		return err // closing: the round is abandoned, as a killed process's
	}
	if !b.Empty() {
		if err := b.Commit(h.st.sync); err != nil {
			return fmt.Errorf("replica: committing a round: %w", err)
		}
		h.syncs.Add(1)
	}

	// The round is durable: update the in-memory logs, send, answer.
	out := map[uint64][]outMsg{}
	for _, rg := range work {
		g, rd := rg.g, rg.rd
		if !raft.IsEmptySnap(rd.Snapshot) {
			if err := g.ms.ApplySnapshot(rd.Snapshot); err != nil {
				return fmt.Errorf("replica: group %d: %w", g.id, err)
			}
		}
		if !raft.IsEmptyHardState(rd.HardState) {
			if err := g.ms.SetHardState(rd.HardState); err != nil {
				return err
			}
		}
		if err := g.ms.Append(rd.Entries); err != nil {
			return fmt.Errorf("replica: group %d: %w", g.id, err)
		}
		for _, m := range rd.Messages {
			out[m.GetTo()] = append(out[m.GetTo()], outMsg{g: g.id, m: m})
		}
	}
	for to, msgs := range out {
		h.tr.send(to, msgs)
	}
	h.sendQuiet(quiet) // queued behind the Ready messages to the same peers
	h.place(placed)
	for _, rg := range work {
		g := rg.g
		g.withRaft(func(rn *raft.RawNode) { rn.Advance(rg.rd) })
		leaderChanged := false
		if rg.rd.SoftState != nil {
			prev := g.leader.Swap(rg.rd.SoftState.Lead)
			leaderChanged = prev != raft.None && prev != rg.rd.SoftState.Lead
			if prev != rg.rd.SoftState.Lead {
				h.leadersChanged()
			}
		}
		h.answer(rg.answers)
		if leaderChanged {
			h.awaitFates(g.id)
		}
		h.settle(g)
		h.readStates(g, &rg.rd)
		if g.left {
			if err := h.leave(g); err != nil {
				return fmt.Errorf("replica: group %d: %w", g.id, err)
			}
			continue
		}
		if err := h.maybeSnapshot(g); err != nil {
			return fmt.Errorf("replica: group %d: snapshot: %w", g.id, err)
		}
		h.enqueue(g) // HasReady is checked next round
	}
	return nil
}

// leave removes a group whose applied configuration no longer holds this
// node, as RemoveGroups does: it stops, and its state is deleted (synced)
// before the worker goes on. Its state machine keeps what it holds (an
// engine partition's documents stay on disk).
func (h *Host) leave(g *group) error {
	h.mu.Lock()
	if h.groups[g.id] == g {
		delete(h.groups, g.id)
	}
	h.mu.Unlock()
	g.withRaft(func(*raft.RawNode) {
		g.removed = true
		g.reads.fail(true, fmt.Errorf("%w: %d (this node left it)", ErrNoGroup, g.id))
	})
	b := h.st.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(groupKey(g.id, 0, 0)[:groupKeyLen], groupEnd(g.id), nil); err != nil {
		return err
	}
	if err := b.Commit(h.st.sync); err != nil {
		return err
	}
	h.left.Add(1)
	h.opts.Logger.Info("replica: this node left the group", "group", uint64(g.id))
	return nil
}

// remove deletes the removed groups' keys in one synced batch and answers
// their RemoveGroups calls. A failure is answered to them and stops the
// worker, as a failed round does.
func (h *Host) remove(rs []removal) error {
	b := h.st.db.NewBatch()
	defer b.Close()
	var err error
	for _, r := range rs {
		for _, id := range r.ids {
			if err = b.DeleteRange(groupKey(id, 0, 0)[:groupKeyLen], groupEnd(id), nil); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = b.Commit(h.st.sync)
	}
	if err != nil {
		err = fmt.Errorf("replica: removing groups: %w", err)
	}
	for _, r := range rs {
		r.done <- err
	}
	return err
}

// sendQuiet sends leaders' quiesce heartbeats.
func (h *Host) sendQuiet(quiet []outMsg) {
	out := map[uint64][]outMsg{}
	for _, m := range quiet {
		out[m.m.GetTo()] = append(out[m.m.GetTo()], m)
	}
	for to, msgs := range out {
		h.tr.send(to, msgs)
	}
}

// persist writes one group's Ready into the round's batch and applies its
// committed entries to the state machine (whose writes join the batch).
func (h *Host) persist(b *pebble.Batch, rg *readyGroup) error {
	g, rd := rg.g, rg.rd
	w := machineWriter{b: b, g: g.id}
	if !raft.IsEmptySnap(rd.Snapshot) {
		meta := rd.Snapshot.GetMetadata()
		if err := putSnapshot(b, g.id, rd.Snapshot, true); err != nil {
			return err
		}
		if err := g.sm.Restore(w, rd.Snapshot.GetData()); err != nil {
			return fmt.Errorf("restoring a snapshot: %w", err)
		}
		h.snapsRestored.Add(1)
		if err := pruneConfs(b, g.id, ^uint64(0)-1); err != nil {
			return err
		}
		g.withRaft(func(*raft.RawNode) {
			g.cs = meta.GetConfState()
			g.voters = confVoters(g.cs)
		})
		g.snapIndex, g.applied, g.lastStored = meta.GetIndex(), meta.GetIndex(), meta.GetIndex()
		g.restored = meta.GetIndex()
		if err := putApplied(b, g.id, g.applied); err != nil {
			return err
		}
	}
	if len(rd.Entries) > 0 {
		if err := appendEntries(b, g.id, rd.Entries, g.lastStored); err != nil {
			return err
		}
		g.lastStored = rd.Entries[len(rd.Entries)-1].GetIndex()
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		if err := setProto(b, groupKey(g.id, kindHard, 0), rd.HardState); err != nil {
			return err
		}
	}
	if len(rd.CommittedEntries) == 0 {
		return nil
	}
	var ents []Entry
	var seqs []uint64 // this Host's proposal numbers, 0 for others'
	for _, e := range rd.CommittedEntries {
		switch e.GetType() {
		case pb.EntryNormal:
			d := e.GetData()
			if len(d) < proposalHeader {
				continue // a new leader's empty entry
			}
			seq := uint64(0)
			if binary.BigEndian.Uint64(d) == h.nonce {
				seq = binary.BigEndian.Uint64(d[8:])
			}
			ents = append(ents, Entry{Index: e.GetIndex(), Term: e.GetTerm(), Data: d[proposalHeader:]})
			seqs = append(seqs, seq)
		case pb.EntryConfChange, pb.EntryConfChangeV2:
			if err := h.applyConf(b, g, e); err != nil {
				return err
			}
		}
	}
	if len(ents) > 0 {
		vals, err := g.sm.Apply(w, ents)
		if err != nil {
			return fmt.Errorf("applying entries %d..%d: %w", ents[0].Index, ents[len(ents)-1].Index, err)
		}
		if len(vals) != len(ents) {
			return fmt.Errorf("the state machine returned %d results for %d entries", len(vals), len(ents))
		}
		for i, seq := range seqs {
			if seq != 0 {
				rg.answers = append(rg.answers, answer{seq: seq, res: Result{Index: ents[i].Index, Value: vals[i]}})
			}
		}
	}
	g.applied = rd.CommittedEntries[len(rd.CommittedEntries)-1].GetIndex()
	return putApplied(b, g.id, g.applied)
}

// applyConf applies a committed conf change entry to the group's raft
// and stores the resulting ConfState with the round (a restart replaying
// from below it starts from the one before: confStorage). A voter added
// asks for a snapshot after the round (its first state); this node no
// longer in the configuration marks the group left (removed after the
// round: the leader no longer sends it anything).
func (h *Host) applyConf(b *pebble.Batch, g *group, e *pb.Entry) error {
	cc, err := confChange(e)
	if err != nil {
		return err
	}
	var cs *pb.ConfState
	g.withRaft(func(rn *raft.RawNode) {
		before := g.voters
		cs = rn.ApplyConfChange(cc)
		g.cs = cs
		g.voters = confVoters(cs)
		for _, v := range g.voters {
			if !slices.Contains(before, v) {
				g.snapWanted = true
			}
		}
		g.wakeLocked()
	})
	g.left = !slices.Contains(g.voters, h.self) && !slices.Contains(cs.GetLearners(), h.self) &&
		!slices.Contains(cs.GetLearnersNext(), h.self)
	return putConf(b, g.id, e.GetIndex(), cs)
}

func confChange(e *pb.Entry) (pb.ConfChangeI, error) {
	if e.GetType() == pb.EntryConfChange {
		var cc pb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			return nil, err
		}
		return &cc, nil
	}
	var cc pb.ConfChangeV2
	if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
		return nil, err
	}
	return &cc, nil
}

// waiter is a Propose call waiting for its mutation's result.
type waiter struct {
	ch chan outcome // capacity 1
	g  GroupID
	// index and term are the mutation's place in the group's log as this
	// node appended it (0: not seen in this node's log yet).
	index, term uint64
	// deadline is set when the group's leader changed while the mutation
	// waited: its fate is awaited until then (awaitFates).
	deadline time.Time
}

// fateElections is how many election timeouts a proposal waits for its
// fate once its group's leader changed: at a leadership transfer the new
// leader commits its predecessor's entries as soon as it was elected
// (well within one); a leader cut off from its majority never learns.
const fateElections = 3

// fateWait is how long a proposal waits for its fate once its group's
// leader changed: fateElections election timeouts (Options.test.fateWait
// in tests that must not reach it at any load).
func (h *Host) fateWait() time.Duration {
	if h.opts.test.fateWait > 0 {
		return h.opts.test.fateWait
	}
	return fateElections * h.ElectionTimeout()
}

// ownEntries appends to ps the positions of this Host's proposals among
// the entries a Ready appends to the log (the leader's own, and, on a
// follower, those it forwarded and the leader replicated back).
func (h *Host) ownEntries(ps []position, ents []*pb.Entry) []position {
	for _, e := range ents {
		d := e.GetData()
		if e.GetType() != pb.EntryNormal || len(d) < proposalHeader || binary.BigEndian.Uint64(d) != h.nonce {
			continue
		}
		ps = append(ps, position{seq: binary.BigEndian.Uint64(d[8:]), index: e.GetIndex(), term: e.GetTerm()})
	}
	return ps
}

// place records where this round appended this Host's proposals (one
// lock for the whole round).
func (h *Host) place(ps []position) {
	if len(ps) == 0 {
		return
	}
	h.pendMu.Lock()
	defer h.pendMu.Unlock()
	for _, p := range ps {
		if w, ok := h.pending[p.seq]; ok {
			w.index, w.term = p.index, p.term
			h.pending[p.seq] = w
		}
	}
}

// answer hands applied proposals' results to their waiters.
func (h *Host) answer(as []answer) {
	if len(as) == 0 {
		return
	}
	h.pendMu.Lock()
	defer h.pendMu.Unlock()
	for _, a := range as {
		if w, ok := h.pending[a.seq]; ok {
			w.ch <- outcome{res: a.res}
			delete(h.pending, a.seq)
		}
	}
}

// awaitFates is the worker's answer to a change of group id's leader
// (or its loss) for the proposals still waiting here: each now waits
// for its fate, up to fateElections election timeouts, instead of
// failing at once. An entry the new leader has (at a leadership
// transfer, all of the old leader's) is committed under it and applied
// here: its proposer gets its result (answer). An entry the new leader
// overwrote is not applied, and this node learns it when it applies
// another entry at its index: ErrDropped (settle), which may be retried.
// Neither by the deadline (a leader cut off from its majority, which
// raft tells nothing): ErrLeaderChanged, outcome unknown (sweepFates).
// A proposal whose place this node never saw (forwarded by a follower
// and not replicated back yet) can only be answered applied or, at the
// deadline, ErrLeaderChanged. Without this, a write waited for its whole
// deadline (30 s) in the cut-off case, and before this every waiter was
// told ErrLeaderChanged at once, writes a transfer was committing
// included.
func (h *Host) awaitFates(id GroupID) {
	deadline := time.Now().Add(h.fateWait()) // wall clock: network timing
	h.pendMu.Lock()
	defer h.pendMu.Unlock()
	for seq, w := range h.pending {
		if w.g == id && w.deadline.IsZero() {
			w.deadline = deadline
			h.pending[seq] = w
			h.fates[id] = append(h.fates[id], seq)
		}
	}
	h.fateGroups.Store(int32(len(h.fates)))
}

// settle answers, after group g's round was applied, the proposals
// awaiting their fate in it whose log index this node has applied
// without applying them (another entry took that index: ErrDropped),
// or restored a snapshot past (what was applied there is not known:
// ErrLeaderChanged). ErrDropped is sound because a proposal is appended
// at one index at most: raft never copies one, the transport sends no
// frame twice, and park steps again only what raft did not take; so the
// entry committed at its index, not being it, means it never commits.
func (h *Host) settle(g *group) {
	if h.fateGroups.Load() == 0 {
		return
	}
	// A snapshot restored in this round or an earlier one (persist), even
	// before the leader changed: a proposal appended here before it may be
	// applied in it, and no answer comes from a snapshot.
	snapTo := g.restored
	h.pendMu.Lock()
	defer h.pendMu.Unlock()
	seqs, ok := h.fates[g.id]
	if !ok {
		return
	}
	keep := seqs[:0]
	for _, seq := range seqs {
		w, ok := h.pending[seq]
		switch {
		case !ok: // answered
			continue
		case w.index != 0 && w.index <= snapTo:
			w.ch <- outcome{err: fmt.Errorf("%w: group %d (a snapshot passed its entry %d)", ErrLeaderChanged, g.id, w.index)}
		case w.index != 0 && w.index <= g.applied:
			w.ch <- outcome{err: fmt.Errorf("%w: group %d: another entry was applied at its index %d (term %d)", ErrDropped, g.id, w.index, w.term)}
		default:
			keep = append(keep, seq)
			continue
		}
		delete(h.pending, seq)
	}
	h.keepFates(g.id, keep)
}

// sweepFates answers ErrLeaderChanged to the proposals whose fate was not
// known by their deadline (the tick loop runs it: a group with no more
// Ready must still end them).
func (h *Host) sweepFates(now time.Time) {
	if h.fateGroups.Load() == 0 {
		return
	}
	h.pendMu.Lock()
	defer h.pendMu.Unlock()
	for id, seqs := range h.fates {
		keep := seqs[:0]
		for _, seq := range seqs {
			w, ok := h.pending[seq]
			switch {
			case !ok:
			case now.After(w.deadline):
				w.ch <- outcome{err: fmt.Errorf("%w: group %d", ErrLeaderChanged, id)}
				delete(h.pending, seq)
			default:
				keep = append(keep, seq)
			}
		}
		h.keepFates(id, keep)
	}
}

// keepFates sets group id's proposals still awaiting their fate (pendMu
// held).
func (h *Host) keepFates(id GroupID, seqs []uint64) {
	if len(seqs) == 0 {
		delete(h.fates, id)
	} else {
		h.fates[id] = seqs
	}
	h.fateGroups.Store(int32(len(h.fates)))
}

// maybeSnapshot snapshots g's state machine once SnapshotEntries entries
// were applied since the last snapshot, and compacts the log up to
// KeepEntries behind it. The batch is not synced: the next round's sync
// makes it durable, and until then the store still holds the whole log.
func (h *Host) maybeSnapshot(g *group) error {
	if !g.snapWanted && g.applied-g.snapIndex < h.opts.SnapshotEntries {
		return nil
	}
	g.snapWanted = false
	if dm, ok := g.sm.(DurableMachine); ok {
		// The snapshot's index must not pass what the machine holds
		// durably: a restart replays from there (AddGroup).
		if err := dm.Sync(h.ctx); err != nil {
			return err
		}
	}
	data, err := g.sm.Snapshot()
	if err != nil {
		return err
	}
	snap, err := g.ms.CreateSnapshot(g.applied, g.cs, data)
	if err != nil {
		if errors.Is(err, raft.ErrSnapOutOfDate) {
			return nil
		}
		return err
	}
	b := h.st.db.NewBatch()
	defer b.Close()
	if err := errors.Join(setProto(b, groupKey(g.id, kindSnap, 0), snap), pruneConfs(b, g.id, g.applied)); err != nil {
		return err
	}
	g.snapIndex = g.applied
	h.snapsTaken.Add(1)
	if g.applied > h.opts.KeepEntries {
		compact := g.applied - h.opts.KeepEntries
		if first, _ := g.ms.FirstIndex(); compact > first {
			if err := g.ms.Compact(compact); err != nil && !errors.Is(err, raft.ErrCompacted) {
				return err
			}
			if err := compactLog(b, g.id, compact); err != nil {
				return err
			}
		}
	}
	return b.Commit(nil)
}
