package replica

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// proposalHeader prefixes every proposed entry's data: the proposing
// Host's random nonce and its proposal counter, so that Host (and no
// other) recognises the entry at apply and answers its waiter.
const proposalHeader = 16

// quiesceTicks is how many ticks a leader's group must be idle (its last
// index and commit unchanged, every follower caught up) before it goes
// quiet.
const quiesceTicks = 3

// Host runs the Raft groups of one node: their ticker, the worker that
// persists, sends and applies their Ready rounds, the store and the
// transport. Its methods are safe for concurrent use.
type Host struct {
	opts  Options
	self  uint64
	st    *store
	tr    *transport
	nonce uint64
	seq   atomic.Uint64

	mu     sync.RWMutex
	groups map[GroupID]*group
	names  map[uint64]string // NodeID -> name, of Options.Peers and every voter of every group

	downMu sync.Mutex
	down   map[uint64]bool // peers whose connection broke or whose lease expired, not heard since
	downs  atomic.Int32    // len(down), read without the lock on every received frame

	readyMu  sync.Mutex
	ready    []*group
	removals []removal     // groups whose state the worker deletes next round
	wake     chan struct{} // capacity 1: the worker has groups to look at

	// leads is LeaderChanges' channel (capacity 1): a group's leader as
	// this node knows it changed since its reader last looked.
	leads chan struct{}

	pendMu  sync.Mutex
	pending map[uint64]waiter
	// fates are, by group, the proposals awaiting their fate after a
	// change of the group's leader (awaitFates); fateGroups is len(fates),
	// read without the lock by every round and tick.
	fates      map[GroupID][]uint64
	fateGroups atomic.Int32

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	failed atomic.Pointer[error] // the error that stopped the worker

	rounds, syncs, snapsTaken, snapsRestored, sent, readRounds, barriers, left atomic.Uint64
	confChanges, transfers, superseded, dropped                                atomic.Uint64
}

type outcome struct {
	res Result
	err error
}

// Open opens the store under opts.Dir, starts listening on opts.Listen,
// and starts the ticker and the worker. Groups are added with AddGroup.
func Open(opts Options) (*Host, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var nb [8]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	st, err := openStore(opts.Dir, opts.Logger, opts.test.noSync, opts.test.fs)
	if err != nil {
		return nil, err
	}
	names, _ := opts.names() // Validate checked them
	ctx, cancel := context.WithCancel(context.Background())
	h := &Host{
		opts: opts, self: NodeID(opts.Node), st: st, nonce: binary.BigEndian.Uint64(nb[:]),
		groups: map[GroupID]*group{}, names: names,
		wake: make(chan struct{}, 1), leads: make(chan struct{}, 1), pending: map[uint64]waiter{}, fates: map[GroupID][]uint64{}, down: map[uint64]bool{},
		ctx: ctx, cancel: cancel,
	}
	if h.tr, err = listen(h); err != nil {
		cancel()
		st.db.Close()
		return nil, err
	}
	h.wg.Add(2)
	go h.tickLoop()
	go h.work()
	return h, nil
}

// Addr is the transport's listening address.
func (h *Host) Addr() string { return h.tr.ln.Addr().String() }

// Node is this Host's node name.
func (h *Host) Node() string { return h.opts.Node }

// ElectionTimeout is the groups' election timeout (Options.ElectionTicks
// ticks): about how long an election takes, and the longest a leadership
// transfer keeps its leader refusing proposals before raft abandons it.
func (h *Host) ElectionTimeout() time.Duration {
	return time.Duration(h.opts.ElectionTicks) * h.opts.TickInterval
}

// AddGroup starts group id with the given voters (node names, this node
// among them) and state machine. A group the store already holds restarts
// from it (its voters are then the stored ones: the ConfState in force at
// the index it restarts from); a new one starts from the same initial
// state on every voter: a snapshot at index 1, term 1, whose ConfState
// holds the voters. The state machine must already hold what the store
// holds for it (see ScanMachine): the Host replays only the entries
// committed after the stored applied index, or, for a DurableMachine,
// after its durable position; a new group's DurableMachine must hold
// nothing yet (ErrMachineAhead).
func (h *Host) AddGroup(id GroupID, voters []string, sm StateMachine) error {
	return h.addGroup(id, voters, sm, false)
}

// JoinGroup starts group id on a node a conf change adds to it (or is
// about to): a group the store already holds restarts from it as in
// AddGroup; a new one starts EMPTY, with no configuration of its own, and
// waits for its leader's snapshot (whose ConfState names this node),
// which sm restores, then applies the log after it. voters (this node
// among them) only name the nodes, for Leader. A DurableMachine that
// already holds entries of the group (a copy this node held before it
// was removed) is not refused: its Restore makes it the snapshot's state
// (a bucket partition takes the newer versions and deletes what the
// snapshot lacks).
func (h *Host) JoinGroup(id GroupID, voters []string, sm StateMachine) error {
	return h.addGroup(id, voters, sm, true)
}

// confStorage is a group's in-memory log whose initial ConfState is the
// one in force at the index raft restarts from, past the snapshot's when
// conf changes were applied since (raft does not hand those entries to
// the application again).
type confStorage struct {
	*raft.MemoryStorage
	cs *pb.ConfState
}

// InitialState implements raft.Storage.
func (s confStorage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	hs, _, err := s.MemoryStorage.InitialState()
	return hs, s.cs, err
}

func (h *Host) addGroup(id GroupID, voters []string, sm StateMachine, join bool) error {
	if h.ctx.Err() != nil {
		return ErrClosed
	}
	seen, err := h.nameVoters(id, voters)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.groups[id]; ok {
		return fmt.Errorf("%w: %d", ErrGroupExists, id)
	}
	for nid, n := range seen {
		if other, ok := h.names[nid]; ok && other != n {
			return fmt.Errorf("%w: nodes %q and %q have the same Raft ID", ErrBadOptions, other, n)
		}
	}
	gs, found, err := h.st.load(id)
	if err != nil {
		return err
	}
	dm, durable := sm.(DurableMachine)
	if durable && !found && !join && dm.Durable() > 0 {
		return fmt.Errorf("%w: group %d: the machine is at %d", ErrMachineAhead, id, dm.Durable())
	}
	switch {
	case !found && join:
		// Nothing stored, nothing written: raft starts at index 0 and the
		// leader's snapshot (persisted by the worker) is the first state.
		gs = groupState{snap: &pb.Snapshot{Metadata: &pb.SnapshotMetadata{ConfState: &pb.ConfState{}}}}
	case !found:
		ids := make([]uint64, 0, len(voters))
		for _, v := range voters {
			ids = append(ids, NodeID(v))
		}
		gs = groupState{
			snap: &pb.Snapshot{Metadata: &pb.SnapshotMetadata{
				Index: new(uint64(1)), Term: new(uint64(1)), ConfState: &pb.ConfState{Voters: ids},
			}},
			hard:    &pb.HardState{Term: new(uint64(1)), Commit: new(uint64(1))},
			applied: 1,
		}
		// Written before the group runs, but not synced: the first round's
		// synced batch, later in pebble's log, makes it durable before
		// anything depends on it (a vote, an acknowledgement), and a crash
		// before that only means starting from the same state again. So
		// adding 1024 groups costs no fsync each.
		b := h.st.db.NewBatch()
		err := errors.Join(putSnapshot(b, id, gs.snap, true), setProto(b, groupKey(id, kindHard, 0), gs.hard),
			putApplied(b, id, 1), b.Commit(pebble.NoSync))
		b.Close()
		if err != nil {
			return fmt.Errorf("replica: group %d: %w", id, err)
		}
	}
	snapIndex := gs.snap.GetMetadata().GetIndex()
	if durable && found {
		// Replay from what the machine's own store holds: never before
		// the snapshot (taken only once the machine was synced up to it)
		// nor after what this store says was applied.
		gs.applied = min(max(dm.Durable(), snapIndex), gs.applied)
	}
	g := &group{id: id, sm: sm, ms: raft.NewMemoryStorage(), cs: gs.confAsOf(gs.applied),
		applied: gs.applied, snapIndex: snapIndex}
	g.voters = confVoters(g.cs)
	g.lastStored = g.snapIndex
	if snapIndex > 0 {
		if err := g.ms.ApplySnapshot(gs.snap); err != nil {
			return fmt.Errorf("replica: group %d: %w", id, err)
		}
	}
	if gs.hard != nil {
		if err := g.ms.SetHardState(gs.hard); err != nil {
			return fmt.Errorf("replica: group %d: %w", id, err)
		}
	}
	if len(gs.ents) > 0 {
		if err := g.ms.Append(gs.ents); err != nil {
			return fmt.Errorf("replica: group %d: %w", id, err)
		}
		g.lastStored = gs.ents[len(gs.ents)-1].GetIndex()
	}
	g.rn, err = raft.NewRawNode(&raft.Config{
		ID:              h.self,
		ElectionTick:    h.opts.ElectionTicks,
		HeartbeatTick:   h.opts.HeartbeatTicks,
		Storage:         confStorage{MemoryStorage: g.ms, cs: g.cs},
		Applied:         gs.applied,
		MaxSizePerMsg:   h.opts.MaxSizePerMsg,
		MaxInflightMsgs: h.opts.MaxInflightMsgs,
		// Bound one Ready's committed entries so a replica catching up
		// applies in rounds rather than one huge batch.
		MaxCommittedSizePerReady:  16 * h.opts.MaxSizePerMsg,
		MaxUncommittedEntriesSize: 64 * h.opts.MaxSizePerMsg,
		CheckQuorum:               true,
		PreVote:                   true,
		Logger:                    raftLogger{h.opts.Logger.With("group", uint64(id))},
	})
	if err != nil {
		return fmt.Errorf("replica: group %d: %w", id, err)
	}
	maps.Copy(h.names, seen)
	h.groups[id] = g
	h.enqueue(g)
	return nil
}

// nameVoters checks a group's voters (node names): this node among them,
// no two with the same Raft ID; it returns them by Raft ID.
func (h *Host) nameVoters(id GroupID, voters []string) (map[uint64]string, error) {
	self := false
	seen := map[uint64]string{}
	for _, v := range voters {
		nid := NodeID(v)
		if other, ok := seen[nid]; ok {
			return nil, fmt.Errorf("%w: group %d: voters %q and %q have the same Raft ID", ErrBadOptions, id, other, v)
		}
		seen[nid] = v
		self = self || v == h.opts.Node
	}
	if !self {
		return nil, fmt.Errorf("%w: group %d: node %q is not one of its voters %q", ErrBadOptions, id, h.opts.Node, voters)
	}
	return seen, nil
}

// confVoters are a configuration's voters, both halves of a joint one.
func confVoters(cs *pb.ConfState) []uint64 {
	vs := slices.Clone(cs.GetVoters())
	for _, v := range cs.GetVotersOutgoing() {
		if !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	return vs
}

// removal is a RemoveGroups call waiting for the worker.
type removal struct {
	ids  []GroupID
	done chan error // capacity 1
}

// RemoveGroups stops the groups ids (those running here) and deletes
// everything the store holds of them (log, HardState, snapshot, applied
// index, the machine's keys), including groups that are not running; it
// returns once the deletion is synced. A message for a removed group is
// dropped, a proposal to it fails with ErrNoGroup (one already waiting
// for it is answered only by its context), and AddGroup of the same id
// afterwards starts a new group from nothing. Removing a group the store
// never held does nothing.
func (h *Host) RemoveGroups(ctx context.Context, ids []GroupID) error {
	if h.ctx.Err() != nil {
		return ErrClosed
	}
	h.mu.Lock()
	var gs []*group
	for _, id := range ids {
		if g := h.groups[id]; g != nil {
			gs = append(gs, g)
			delete(h.groups, id)
		}
	}
	h.mu.Unlock()
	for _, g := range gs {
		// A round that took the group already persists its Ready; the
		// next one (which deletes its keys) skips it.
		g.withRaft(func(*raft.RawNode) {
			g.removed = true
			g.reads.fail(true, fmt.Errorf("%w: %d (removed)", ErrNoGroup, g.id))
		})
	}
	req := removal{ids: slices.Clone(ids), done: make(chan error, 1)}
	h.readyMu.Lock()
	h.removals = append(h.removals, req)
	h.readyMu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("replica: removing %d groups: %w", len(ids), ctx.Err())
	case <-h.ctx.Done():
		return ErrClosed
	}
}

// ScanMachine calls fn for each key the store holds for group id's state
// machine, in key order (to rebuild it before AddGroup). The slices are
// valid during the call only.
func (h *Host) ScanMachine(id GroupID, fn func(key, value []byte) error) error {
	if h.ctx.Err() != nil {
		return ErrClosed
	}
	return h.st.scanMachine(id, fn)
}

// Propose submits an opaque mutation to group id and waits until it is
// committed on a majority of the group's voters and applied here, then
// returns its log index and what the state machine returned for it. Any
// voter may propose: a follower forwards it to the leader. It fails at
// once with ErrNoLeader when the group knows no leader and with ErrBusy
// when the leader refuses more (neither proposed the mutation), and with
// ErrTimeout when ctx ends first (then the outcome is unknown): pass a
// deadline. When the group's leader changes while it waits, it waits for
// its fate, a few election timeouts at most (see awaitFates): its result
// when applied, ErrDropped when the new leader dropped it (not applied),
// ErrLeaderChanged when still unknown (outcome unknown).
func (h *Host) Propose(ctx context.Context, id GroupID, data []byte) (Result, error) {
	g, err := h.group(id)
	if err != nil {
		return Result{}, err
	}
	seq := h.seq.Add(1)
	buf := make([]byte, proposalHeader, proposalHeader+len(data))
	binary.BigEndian.PutUint64(buf, h.nonce)
	binary.BigEndian.PutUint64(buf[8:], seq)
	buf = append(buf, data...)
	ch := make(chan outcome, 1)
	h.pendMu.Lock()
	h.pending[seq] = waiter{ch: ch, g: id}
	h.pendMu.Unlock()
	var lead uint64
	g.withRaft(func(rn *raft.RawNode) {
		g.wakeLocked() // a follower's forwarded proposal wakes its leader
		if err = rn.Propose(buf); err != nil {
			lead = rn.BasicStatus().Lead
		}
	})
	if err != nil {
		h.forget(seq)
		switch {
		case errors.Is(err, raft.ErrProposalDropped) && lead == raft.None:
			return Result{}, fmt.Errorf("%w: group %d", ErrNoLeader, id)
		case errors.Is(err, raft.ErrProposalDropped):
			return Result{}, fmt.Errorf("%w: group %d", ErrBusy, id)
		}
		return Result{}, fmt.Errorf("replica: group %d: %w", id, err)
	}
	h.enqueue(g)
	select {
	case o := <-ch:
		return o.res, o.err
	case <-ctx.Done():
		h.forget(seq)
		return Result{}, fmt.Errorf("%w: group %d: %w", ErrTimeout, id, ctx.Err())
	case <-h.ctx.Done():
		h.forget(seq)
		return Result{}, fmt.Errorf("%w: group %d", ErrClosed, id)
	}
}

func (h *Host) forget(seq uint64) {
	h.pendMu.Lock()
	delete(h.pending, seq)
	h.pendMu.Unlock()
}

// Holds reports whether this node runs group id (it is one of its
// voters): Leader's false then means the group has no leader at the
// moment, not that this node knows nothing of it.
func (h *Host) Holds(id GroupID) bool {
	_, err := h.group(id)
	return err == nil
}

// Stored reports whether the store holds state of group id (a snapshot or
// a HardState): a group running here, or one this node ran before a
// restart and has not left, which AddGroup or JoinGroup would start from
// that state.
func (h *Host) Stored(id GroupID) (bool, error) {
	if h.ctx.Err() != nil {
		return false, ErrClosed
	}
	return h.st.holds(id)
}

// Leader returns the name of group id's leader as this node last saw it,
// and false when it knows none.
func (h *Host) Leader(id GroupID) (string, bool) {
	g, err := h.group(id)
	if err != nil {
		return "", false
	}
	l := g.leader.Load()
	if l == 0 {
		return "", false
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	n, ok := h.names[l]
	return n, ok
}

// LeaderChanges returns a channel that receives a value after the leader
// of one or more of the groups running here changed as this node knows it
// (Leader's answer: a new leader heard of, this node elected or stepped
// down, an election begun); changes that come before the reader takes the
// value coalesce into it. There is one channel per Host, meant for one
// reader, which reads what changed with Leader and Term: the cluster's
// record of the partitions each node leads (cmd/mayfly's followLayouts)
// is kept by it at once rather than at its next poll.
func (h *Host) LeaderChanges() <-chan struct{} { return h.leads }

// leadersChanged tells LeaderChanges' reader that a group's leader
// changed, without waiting.
func (h *Host) leadersChanged() {
	select {
	case h.leads <- struct{}{}:
	default:
	}
}

// Stats are a Host's counters.
type Stats struct {
	// Rounds is how many Ready rounds the worker ran.
	Rounds uint64
	// Syncs is how many batches it committed with fsync (at most one a
	// round).
	Syncs uint64
	// SnapshotsTaken counts the state machine snapshots taken to compact
	// a log; SnapshotsRestored the snapshots received from a leader and
	// restored (a replica too far behind the leader's log).
	SnapshotsTaken, SnapshotsRestored uint64
	// MessagesSent counts the Raft messages queued to peers (of all
	// groups; idle groups send none once quiet).
	MessagesSent uint64
	// MessagesSuperseded counts the heartbeats and heartbeat responses
	// not sent to a peer, or not stepped after arriving from one, because
	// a newer one of their group replaced them while they waited (a node
	// held up: see frameQueue); MessagesDropped the
	// messages lost to a full queue (Options.SendQueue): heartbeats and
	// responses evicted for other messages, and other messages when
	// none was left to evict.
	MessagesSuperseded, MessagesDropped uint64
	// ReadIndexRounds counts the read-index rounds this node's groups
	// issued to raft, as leaders or forwarded as followers (concurrent
	// ReadIndex and ReadBarrier calls share one; a round issued again
	// counts again); ReadBarriers counts the ReadBarrier calls.
	ReadIndexRounds, ReadBarriers uint64
	// ConfChanges counts the conf changes this node proposed as a leader,
	// Transfers the leadership transfers it started (SetTarget), and
	// GroupsLeft the groups it left once a conf change removed it.
	ConfChanges, Transfers, GroupsLeft uint64
}

// Stats returns the Host's counters.
func (h *Host) Stats() Stats {
	return Stats{Rounds: h.rounds.Load(), Syncs: h.syncs.Load(),
		SnapshotsTaken: h.snapsTaken.Load(), SnapshotsRestored: h.snapsRestored.Load(),
		MessagesSent: h.sent.Load(), MessagesSuperseded: h.superseded.Load(), MessagesDropped: h.dropped.Load(),
		ReadIndexRounds: h.readRounds.Load(), ReadBarriers: h.barriers.Load(),
		ConfChanges: h.confChanges.Load(),
		Transfers:   h.transfers.Load(), GroupsLeft: h.left.Load()}
}

func (h *Host) group(id GroupID) (*group, error) {
	if h.ctx.Err() != nil {
		return nil, ErrClosed
	}
	h.mu.RLock()
	g := h.groups[id]
	h.mu.RUnlock()
	if g == nil {
		return nil, fmt.Errorf("%w: %d", ErrNoGroup, id)
	}
	return g, nil
}

func (h *Host) name(nid uint64) string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.names[nid]
}

// enqueue puts g in the worker's ready set.
func (h *Host) enqueue(g *group) {
	h.readyMu.Lock()
	if !g.queued {
		g.queued = true
		h.ready = append(h.ready, g)
	}
	h.readyMu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// step hands a message from the transport to its group. Any message
// wakes a quiet group but two: a follower's heartbeat response (it
// changes nothing that needs ticks; one carrying a read-index
// acknowledgement reaches a leader awake already, as a leader with a read
// index pending does not go quiet), and the leader's quiesce heartbeat,
// which quiets a follower that agrees: it knows that leader in that
// term and has committed what the leader has (raft's step of the
// heartbeat just committed it, and restarted the election timeout), and
// has no read barrier waiting for the leader's answer (it keeps ticking
// to issue it again, ageRead, should the request or answer be lost; once
// answered, readStates quiets it as the heartbeat asked).
func (h *Host) step(f outMsg) {
	h.mu.RLock()
	g := h.groups[f.g]
	h.mu.RUnlock()
	if g == nil {
		return // not (yet) running here: raft retransmits
	}
	m := f.m
	g.withRaft(func(rn *raft.RawNode) {
		if m.GetType() == pb.MsgProp {
			// A follower forwards a proposal on to its leader as it came,
			// and the next node's transport drops a frame whose sender is
			// not the node that sent it: the proposal goes on as this
			// node's (raft's leader does not read a proposal's sender).
			m.From = new(h.self)
			if h.park(g, rn, m) {
				g.wakeLocked()
				return
			}
		}
		_ = rn.Step(m)
		switch {
		case f.quiesce:
			st := rn.BasicStatus()
			if st.RaftState == raft.StateFollower && st.Lead == m.GetFrom() && st.GetTerm() == m.GetTerm() &&
				st.GetCommit() == m.GetCommit() {
				if g.reads.unconfirmed() {
					g.quiesceAsk = m // readStates quiets it once answered
				} else {
					g.quiesced = true
				}
			} else {
				g.wakeLocked()
			}
		case m.GetType() == pb.MsgHeartbeatResp:
		default:
			g.wakeLocked()
		}
	})
	h.enqueue(g)
}

// maxParked bounds the proposals forwarded to a group that one node
// holds back (park): more are dropped, as raft would drop them.
const maxParked = 1024

// parkedProp is a proposal forwarded to this node, held back.
type parkedProp struct {
	m  *pb.Message
	at time.Time
}

// park holds back a proposal another node forwarded here when raft would
// drop it without a word (g.mu held): this node leads and is handing its
// leadership over, or follows and knows no leader (an election, such as
// the one the transfer starts). Its proposer, which raft tells nothing,
// would wait for its fate until its deadline and learn only "outcome
// unknown". Stepped again once this node has a leader (unpark), it is
// appended by the leader or forwarded to it, once: raft does not copy a
// proposal. It reports whether it held m back.
func (h *Host) park(g *group, rn *raft.RawNode, m *pb.Message) bool {
	if len(g.parked) >= maxParked || !parks(rn.BasicStatus()) {
		return false
	}
	g.parked = append(g.parked, parkedProp{m: m, at: time.Now()}) // wall clock: network timing
	return true
}

// parks reports whether raft would drop a forwarded proposal in state st
// for want of a leader to take it.
func parks(st raft.BasicStatus) bool {
	if st.RaftState == raft.StateLeader {
		return st.LeadTransferee != raft.None
	}
	return st.Lead == raft.None
}

// unpark steps the proposals held back in g (g.mu held) once the group
// has a leader not handing over; those held longer than their proposers
// wait for their fate (fateWait, three election timeouts: raft abandons
// a transfer after one) are dropped, as raft would have dropped them,
// their proposers told "outcome unknown" by then. It reports whether it
// stepped any.
func (h *Host) unpark(g *group, rn *raft.RawNode, now time.Time) bool {
	if len(g.parked) == 0 {
		return false
	}
	if parks(rn.BasicStatus()) {
		old := now.Add(-h.fateWait())
		g.parked = slices.DeleteFunc(g.parked, func(p parkedProp) bool { return p.at.Before(old) })
		return false
	}
	for _, p := range g.parked {
		_ = rn.Step(p.m)
	}
	g.parked = nil
	return true
}

// unreachable tells group id that a message to node to was lost; failed
// snapshots are reported as such.
func (h *Host) unreachable(id GroupID, to uint64, snap bool) {
	h.mu.RLock()
	g := h.groups[id]
	h.mu.RUnlock()
	if g == nil {
		return
	}
	g.withRaft(func(rn *raft.RawNode) {
		rn.ReportUnreachable(to)
		if snap {
			rn.ReportSnapshot(to, raft.SnapshotFailure)
		}
	})
	h.enqueue(g)
}

// snapshotSent tells group id that its snapshot reached node to.
func (h *Host) snapshotSent(id GroupID, to uint64) {
	h.mu.RLock()
	g := h.groups[id]
	h.mu.RUnlock()
	if g == nil {
		return
	}
	g.withRaft(func(rn *raft.RawNode) { rn.ReportSnapshot(to, raft.SnapshotFinish) })
	h.enqueue(g)
}

// peerDown marks node nid down (its connection broke, a message to it
// failed, its lease expired) and, the first time, wakes every quiet
// group it is a voter of: a follower of a dead leader must tick again to
// elect another; a leader ticks again, to go quiet without it (below) or,
// with CheckQuorum, to step down without a majority. Marked again while
// down it wakes nothing: the messages raft keeps sending it fail, and a
// group must be able to go quiet without it.
func (h *Host) peerDown(nid uint64) {
	h.downMu.Lock()
	was := h.down[nid]
	h.down[nid] = true
	h.downs.Store(int32(len(h.down)))
	h.downMu.Unlock()
	if !was {
		h.opts.Logger.Info("replica: a peer is down; waking its quiet groups", "peer", h.name(nid))
		h.wakePeer(nid)
	}
}

// peerUp clears nid's down mark: a frame came from it, and reports
// whether it was marked (the transport then ends its sender's wait after
// a failed dial: transport.redial). The first frame after it was down
// wakes every quiet group it is a voter of: their
// leaders went quiet without it, and a quiet leader sends nothing by
// itself, so a node back from a partition (or a restart) would otherwise
// stay behind in every group not written to since, until its next write.
func (h *Host) peerUp(nid uint64) bool {
	if h.downs.Load() == 0 {
		return false
	}
	h.downMu.Lock()
	was := h.down[nid]
	delete(h.down, nid)
	h.downs.Store(int32(len(h.down)))
	h.downMu.Unlock()
	if was {
		h.opts.Logger.Info("replica: heard from a peer that was down; waking its quiet groups", "peer", h.name(nid))
		h.wakePeer(nid)
	}
	return was
}

// isDown reports whether nid is marked down.
func (h *Host) isDown(nid uint64) bool {
	if h.downs.Load() == 0 {
		return false
	}
	h.downMu.Lock()
	defer h.downMu.Unlock()
	return h.down[nid]
}

// wakePeer wakes every quiet group node nid is a voter of.
func (h *Host) wakePeer(nid uint64) {
	for _, g := range h.all() {
		woke := false
		g.withRaft(func(*raft.RawNode) {
			if !slices.Contains(g.voters, nid) {
				return
			}
			woke = g.quiesced
			g.wakeLocked()
		})
		if woke {
			h.enqueue(g)
		}
	}
}

// NodeDown tells the Host that node is down (its cluster lease
// expired): every quiet group it is a voter of wakes, so that a group it
// led elects another leader after an election timeout. The transport
// notices a broken connection by itself; this covers a node that died
// without closing its connections (a machine lost, a network cut).
func (h *Host) NodeDown(node string) {
	if h.ctx.Err() != nil || node == h.opts.Node {
		return
	}
	h.peerDown(NodeID(node))
}

// Quiesced returns how many of the Host's groups are quiet.
func (h *Host) Quiesced() int {
	h.mu.RLock()
	gs := make([]*group, 0, len(h.groups))
	for _, g := range h.groups {
		gs = append(gs, g)
	}
	h.mu.RUnlock()
	n := 0
	for _, g := range gs {
		g.withRaft(func(*raft.RawNode) {
			if g.quiesced {
				n++
			}
		})
	}
	return n
}

// tickLoop ticks every group each TickInterval, but the quiet ones.
//
// Quiescence (as CockroachDB quiesces its ranges): a group whose leader
// has had nothing to do for quiesceTicks ticks (no read index pending
// either), every entry committed,
// applied and acknowledged by every follower not marked down (each
// recently active and replicating; with the leader, a majority), stops
// ticking: no heartbeats, no elections. Its leader sends each of those
// followers a last heartbeat marked quiesce (term, commit);
// a follower that agrees stops ticking too (Host.step). The leader's
// CheckQuorum does not count while it does not tick, nor the followers'
// election timeouts. Anything wakes the group again: a proposal, a read
// index (ReadIndex), a
// message from another node (but heartbeat responses), a voter newly
// marked down (a broken connection, a failed message, a lease expired:
// peerDown). A
// woken follower whose leader is gone campaigns after its election
// timeout, as raft would; one still quiet refuses the pre-vote (the
// leader's lease), but the vote request woke it, so the next campaign
// wins it.
//
// Each tick also ends the proposals whose fate was not learnt in time
// (sweepFates) and steps the forwarded proposals held back (unpark).
func (h *Host) tickLoop() {
	defer h.wg.Done()
	t := time.NewTicker(h.opts.TickInterval)
	defer t.Stop()
	n := 0
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		steer := false
		if n++; n >= steerTicks {
			n, steer = 0, true
		}
		now := time.Now() // wall clock: network timing
		h.sweepFates(now)
		for _, g := range h.all() {
			ticked := false
			g.withRaft(func(rn *raft.RawNode) {
				if h.unpark(g, rn, now) {
					g.wakeLocked()
				}
				ticked = h.tick(g, rn)
				if steer && h.steer(g, rn) {
					g.wakeLocked()
					ticked = true
				}
			})
			if ticked {
				h.enqueue(g)
			}
		}
	}
}

// all returns the groups running.
func (h *Host) all() []*group {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return slices.Collect(maps.Values(h.groups))
}

// tick ticks g (g.mu held), or quiets it when its leader has been idle
// long enough (see tickLoop); it reports false for a quiet group.
func (h *Host) tick(g *group, rn *raft.RawNode) bool {
	if g.quiesced {
		return false
	}
	h.ageRead(g, rn)
	if h.opts.test.noQuiesce {
		rn.Tick()
		return true
	}
	st := rn.BasicStatus()
	if st.RaftState != raft.StateLeader || st.LeadTransferee != raft.None {
		g.idle = 0
		rn.Tick()
		return true
	}
	last, _ := g.ms.LastIndex()
	if last != g.last {
		g.last, g.idle = last, 0
	} else {
		g.idle++
	}
	if g.idle < quiesceTicks || last != st.GetCommit() || st.Applied != st.GetCommit() || rn.HasReady() ||
		g.reads.pending() || !h.caughtUp(rn, g, last) {
		rn.Tick()
		return true
	}
	g.quiesced = true
	for _, nid := range g.voters {
		if nid != h.self && !h.isDown(nid) {
			g.quiesceOut = append(g.quiesceOut, outMsg{g: g.id, quiesce: true, m: &pb.Message{
				Type: pb.MsgHeartbeat.Enum(), To: new(nid), From: new(h.self),
				Term: new(st.GetTerm()), Commit: new(st.GetCommit()),
			}})
		}
	}
	return true // the worker sends the quiesce heartbeats
}

// caughtUp reports whether every follower of a leader's group but those
// marked down acknowledged index last, is replicating and was recently
// active, and those with the leader are a majority of the voters (so a
// group goes quiet without a dead node, as CockroachDB's ranges do with
// a node its liveness says is dead; the node back, its campaign wakes
// the group).
func (h *Host) caughtUp(rn *raft.RawNode, g *group, last uint64) bool {
	ok, up := true, 1
	rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		switch {
		case id == h.self:
		case h.isDown(id):
		case pr.Match != last || pr.State != tracker.StateReplicate || !pr.RecentActive:
			ok = false
		default:
			up++
		}
	})
	return ok && up > len(g.voters)/2
}

// Close stops the Host: the ticker and worker stop (a round not yet
// committed is abandoned: nothing of it was sent or acknowledged), the
// transport closes, proposals still waiting fail with ErrClosed (their
// outcome unknown), the store closes. There is no clean-shutdown step:
// everything acknowledged was synced, so Close is as safe as a crash.
// It returns the error that stopped the worker, if one did.
func (h *Host) Close() error {
	var err error
	h.once.Do(func() {
		h.cancel()
		h.tr.close()
		h.wg.Wait()
		h.pendMu.Lock()
		for seq, w := range h.pending {
			w.ch <- outcome{err: ErrClosed}
			delete(h.pending, seq)
		}
		h.pendMu.Unlock()
		err = h.st.db.Close()
		if p := h.failed.Load(); p != nil {
			err = *p
		}
	})
	return err
}

// raftLogger sends raft's messages to slog: its info at debug (elections
// of 1024 groups would flood the log), warnings and errors as such.
type raftLogger struct{ log *slog.Logger }

func (l raftLogger) Debug(v ...any)                 { l.log.Debug(fmt.Sprint(v...)) }
func (l raftLogger) Debugf(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l raftLogger) Info(v ...any)                  { l.log.Debug(fmt.Sprint(v...)) }
func (l raftLogger) Infof(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l raftLogger) Warning(v ...any)               { l.log.Warn(fmt.Sprint(v...)) }
func (l raftLogger) Warningf(format string, v ...any) {
	l.log.Warn(fmt.Sprintf(format, v...))
}
func (l raftLogger) Error(v ...any)                 { l.log.Error(fmt.Sprint(v...)) }
func (l raftLogger) Errorf(format string, v ...any) { l.log.Error(fmt.Sprintf(format, v...)) }
func (l raftLogger) Fatal(v ...any)                 { l.log.Error(fmt.Sprint(v...)); panic(fmt.Sprint(v...)) }
func (l raftLogger) Fatalf(format string, v ...any) {
	l.log.Error(fmt.Sprintf(format, v...))
	panic(fmt.Sprintf(format, v...))
}
func (l raftLogger) Panic(v ...any) { panic(fmt.Sprint(v...)) }
func (l raftLogger) Panicf(format string, v ...any) {
	panic(fmt.Sprintf(format, v...))
}
