package replica

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// BucketGroup is the Raft group of a bucket's partition: the FNV-64a hash
// of the bucket's name and, when it has one, its definition's UUID
// (engine.BucketSettings.UUID), with its low 16 bits replaced by the
// partition number, the same on every node. A bucket created again under
// the same name has another UUID, so none of its groups is the deleted
// incarnation's. A bucket without a UUID (defined before buckets had
// one) keeps the name's hash alone.
func BucketGroup(bucket, uuid string, part int) GroupID {
	h := fnv.New64a()
	h.Write([]byte(bucket))
	if uuid != "" {
		h.Write([]byte{0})
		h.Write([]byte(uuid))
	}
	return GroupID(h.Sum64()&^0xffff | uint64(part)&0xffff)
}

// BucketGroups are the groups of every partition of a bucket (parts
// partitions): what RemoveGroups removes of a deleted bucket.
func BucketGroups(bucket, uuid string, parts int) []GroupID {
	ids := make([]GroupID, parts)
	for p := range ids {
		ids[p] = BucketGroup(bucket, uuid, p)
	}
	return ids
}

// BucketMachine is one partition of an engine bucket as a group's state
// machine (a DurableMachine): committed entries are applied through
// engine.Bucket.ApplyReplicated, sequence number = log index, and reach
// the bucket's store in its own group commits. It follows the bucket
// across a restart (a change of its evictionPolicy: engine.Bucket.Reopened).
type BucketMachine struct {
	b    atomic.Pointer[engine.Bucket]
	part int
	gone func() bool
}

// RestartWait bounds how long a BucketMachine waits for a closed bucket's
// replacement before it fails an entry.
const RestartWait = time.Minute

// NewBucketMachine returns partition part of b as a state machine. gone,
// if set, reports that the bucket is gone for good (deleted, or the node
// shutting down): a closed bucket's entries then fail at once rather than
// wait for a restarted bucket.
func NewBucketMachine(b *engine.Bucket, part int, gone func() bool) *BucketMachine {
	m := &BucketMachine{part: part, gone: gone}
	m.b.Store(b)
	return m
}

// bucket returns the current bucket: b's replacement once b restarted.
func (m *BucketMachine) bucket() *engine.Bucket {
	b := m.b.Load()
	if nb := b.Reopened(); nb != nil {
		m.b.Store(nb)
		return nb
	}
	return b
}

// Apply implements StateMachine: each entry's result is an
// engine.ReplicatedResult. Nothing is written through w: the bucket's
// store holds the applied versions. A bucket closed for a restart is
// waited for (up to RestartWait: the group's entries must reach its
// replacement); a bucket gone for good fails each entry, not the Host.
func (m *BucketMachine) Apply(_ Writer, ents []Entry) ([]any, error) {
	out := make([]any, len(ents))
	for i, e := range ents {
		res, err := m.bucket().ApplyReplicated(m.part, e.Index, e.Data)
		for deadline := time.Now().Add(RestartWait); errors.Is(err, engine.ErrClosed) && (m.gone == nil || !m.gone()) && time.Now().Before(deadline); { // wall clock: a restart's real time
			time.Sleep(10 * time.Millisecond)
			res, err = m.bucket().ApplyReplicated(m.part, e.Index, e.Data)
		}
		switch {
		case errors.Is(err, engine.ErrClosed):
			res = engine.ReplicatedResult{Err: err}
		case err != nil:
			return nil, fmt.Errorf("bucket %q partition %d: %w", m.bucket().Name(), m.part, err)
		}
		out[i] = res
	}
	return out, nil
}

// Durable implements DurableMachine: the partition's highest sequence
// number on disk, a log index.
func (m *BucketMachine) Durable() uint64 { return m.bucket().ReplicatedDurable(m.part) }

// Sync implements DurableMachine: the bucket's queued writes are
// committed.
func (m *BucketMachine) Sync(ctx context.Context) error { return m.bucket().Sync(ctx) }

// Snapshot implements StateMachine: the partition's whole state, in
// memory.
func (m *BucketMachine) Snapshot() ([]byte, error) { return m.bucket().ReplicatedSnapshot(m.part) }

// Restore implements StateMachine: the partition takes the snapshot's
// versions and is synced.
func (m *BucketMachine) Restore(_ Writer, data []byte) error {
	return m.bucket().ReplicatedRestore(context.Background(), m.part, data)
}

// MaxProposeWait bounds how long a replicated write waits for its entry to
// be committed and applied before it answers a temporary failure (its
// outcome then unknown).
const MaxProposeWait = 30 * time.Second

// BucketReplicator is a bucket's engine.Replicator on a Host: a write to a
// partition this node leads is proposed to the partition's group and
// answered once committed on a majority's disks and applied here; a write
// to one it does not lead answers engine.ErrNotMyVBucket, as an
// *engine.NotMyVBucketError naming the leader when this node knows it,
// which the front doors follow (the router's map may still say this node
// leads: leadership moved and the map has not caught up).
//
// Which refusals may be followed: only those given before the entry was
// proposed, so that nothing of the write was applied anywhere. Writable's
// (the leader is another node) is one, and is structured; Replicate's
// ErrNoLeader (not proposed) names no leader; a write proposed and then
// dropped by a new leader (ErrDropped: not applied anywhere) is tried
// again, and Writable's refusal then is as good; once proposed, any
// other failure (ErrTimeout, ErrLeaderChanged, ErrClosed) is
// engine.ErrAmbiguous, its outcome unknown, and is never structured,
// whatever leader this node knows by then. ConfirmRead's refusal (a read, or a write the document
// refused, checked against the leader's copy: nothing proposed) is
// structured too.
type BucketReplicator struct {
	// Host runs the partitions' groups.
	Host *Host
	// Bucket is the bucket's name and UUID its definition's UUID
	// (BucketGroup).
	Bucket, UUID string
	// Describe, if set, says where a node is reached (its HTTP address),
	// for the error of a write sent to a node that does not lead.
	Describe func(ctx context.Context, node string) string
}

// Writable implements engine.Replicator: nil when this node leads
// partition part's group, else engine.ErrNotMyVBucket: an
// *engine.NotMyVBucketError naming the leader when the group knows one
// (nothing was proposed: the write may be sent there). A group that knows
// no leader at the moment (an election, or a leadership transfer: the old
// leader's term ended, the new one is not heard of yet) is waited for, up
// to an election timeout within ctx, before the write is refused.
func (r *BucketReplicator) Writable(ctx context.Context, part int) error {
	id := BucketGroup(r.Bucket, r.UUID, part)
	leader, ok := r.Host.Leader(id)
	if !ok {
		if _, err := r.Host.group(id); err != nil {
			if !errors.Is(err, ErrClosed) {
				return fmt.Errorf("%w: partition %d: this node holds no copy of it (yet)", engine.ErrNotMyVBucket, part)
			}
		} else {
			leader, ok = r.awaitLeader(ctx, id, time.Now().Add(r.Host.ElectionTimeout())) // wall clock: network timing
		}
	}
	switch {
	case !ok:
		return fmt.Errorf("%w: partition %d has no leader at the moment; retry shortly", engine.ErrNotMyVBucket, part)
	case leader != r.Host.Node():
		return r.ledBy(ctx, part, leader)
	}
	return nil
}

// leaderPoll is how often a write waiting for its group's leader (or for
// its leader to take proposals again) looks.
const leaderPoll = 10 * time.Millisecond

// awaitLeader waits, within ctx and until until (wall clock: network
// timing), for group id to know a leader, and returns it; false when it
// still knows none.
func (r *BucketReplicator) awaitLeader(ctx context.Context, id GroupID, until time.Time) (string, bool) {
	for {
		if l, ok := r.Host.Leader(id); ok {
			return l, true
		}
		if !pause(ctx, until) {
			return "", false
		}
	}
}

// pause sleeps leaderPoll, and reports false instead when ctx ended or
// until passed (or would, during the sleep).
func pause(ctx context.Context, until time.Time) bool {
	if time.Until(until) < leaderPoll {
		return false
	}
	t := time.NewTimer(leaderPoll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ledBy is the refusal of a request for partition part, which node leader
// leads: followable (engine.NotMyVBucketError), so give it only where
// nothing of the request was proposed.
func (r *BucketReplicator) ledBy(ctx context.Context, part int, leader string) error {
	e := &engine.NotMyVBucketError{Partition: part, Leader: leader}
	if r.Describe != nil {
		e.Where = r.Describe(ctx, leader)
	}
	return e
}

// Leads implements engine.PartitionLeader: whether this node leads
// partition part's group now (Writable's nil, without the refusal's
// lookup of the leader's address).
func (r *BucketReplicator) Leads(part int) bool {
	leader, ok := r.Host.Leader(BucketGroup(r.Bucket, r.UUID, part))
	return ok && leader == r.Host.Node()
}

// maxDrops bounds how many times Replicate proposes again a write whose
// entry a new leader dropped (ErrDropped).
const maxDrops = 3

// Replicate implements engine.Replicator.
//
// A proposal its group drops before proposing it (ErrNoLeader, or ErrBusy:
// a leadership transfer under way, when raft's leader takes no proposal
// until its transferee took over, or too many entries uncommitted) is
// tried again, up to an election timeout: a hand-back of leadership (to a
// node that restarted, the map's preferred leader) is a pause for the
// write, then carried out here or refused naming the new leader
// (followed by the front doors), rather than a temporary failure. A
// write proposed when its group's leader changed waits for its fate
// (Host.Propose): applied under the new leader (a transfer's transferee
// holds all of its predecessor's log), its result; dropped by the new
// leader (ErrDropped: not applied), tried again the same way, so it too
// ends carried out here or refused naming the new leader (a temporary
// failure, not applied, when it keeps being dropped); neither within a
// few election timeouts (a leader cut off from its majority),
// engine.ErrAmbiguous.
func (r *BucketReplicator) Replicate(ctx context.Context, part int, entry []byte) (engine.ReplicatedResult, error) {
	id := BucketGroup(r.Bucket, r.UUID, part)
	until := time.Now().Add(r.Host.ElectionTimeout()) // wall clock: network timing
	res, err := r.propose(ctx, part, id, entry)
	for drops := 0; ; {
		if errors.Is(err, ErrDropped) && drops < maxDrops {
			// Not applied, learnt once the new leader's entries were:
			// the window starts again from here.
			drops++
			until = time.Now().Add(r.Host.ElectionTimeout()) // wall clock: network timing
		} else if !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrBusy) {
			break
		}
		if !pause(ctx, until) {
			break
		}
		res, err = r.propose(ctx, part, id, entry)
	}
	switch {
	case err == nil:
	case errors.Is(err, engine.ErrNotMyVBucket): // Writable's refusal: nothing proposed
		return engine.ReplicatedResult{}, err
	case errors.Is(err, ErrDropped):
		// Not applied anywhere, and it never will be: a client may retry
		// it as not done.
		return engine.ReplicatedResult{}, fmt.Errorf("%w: partition %d: %w; retry shortly", engine.ErrTempFail, part, err)
	case errors.Is(err, ErrNoLeader):
		// Not proposed, but no leader to name: a plain refusal.
		return engine.ReplicatedResult{}, fmt.Errorf("%w: partition %d has no leader at the moment; retry shortly", engine.ErrNotMyVBucket, part)
	case errors.Is(err, ErrTimeout), errors.Is(err, ErrLeaderChanged), errors.Is(err, ErrClosed):
		// Proposed and not seen committed: it may be yet. Not a
		// temporary failure, which a client retries as not done (an
		// increment counted twice), and never a refusal naming the new
		// leader, which the front doors would send the write to.
		return engine.ReplicatedResult{}, fmt.Errorf("%w: partition %d: %w", engine.ErrAmbiguous, part, err)
	case ctx.Err() != nil:
		return engine.ReplicatedResult{}, fmt.Errorf("partition %d: %w", part, ctx.Err())
	default: // busy, or refused before it was proposed
		return engine.ReplicatedResult{}, fmt.Errorf("%w: partition %d: %w", engine.ErrTempFail, part, err)
	}
	v, ok := res.Value.(engine.ReplicatedResult)
	if !ok {
		return engine.ReplicatedResult{}, fmt.Errorf("%w: partition %d: an entry's result of type %T", engine.ErrTempFail, part, res.Value)
	}
	return v, nil
}

// propose is one try of Replicate: Writable, then the proposal, within
// MaxProposeWait.
func (r *BucketReplicator) propose(ctx context.Context, part int, id GroupID, entry []byte) (Result, error) {
	if err := r.Writable(ctx, part); err != nil {
		return Result{}, err
	}
	pctx, cancel := context.WithTimeout(ctx, MaxProposeWait)
	defer cancel()
	return r.Host.Propose(pctx, id, entry)
}

// MaxReadWait bounds a read's read index (ConfirmRead): a leader cut off
// from its majority steps down within two election timeouts (the read is
// then refused, not my vbucket); a read index not confirmed by then
// answers a temporary failure.
const MaxReadWait = 10 * time.Second

// ConfirmRead implements engine.ReadConfirmer with the partition's read
// index (Host.ReadIndex).
func (r *BucketReplicator) ConfirmRead(ctx context.Context, part int) error {
	rctx, cancel := context.WithTimeout(ctx, MaxReadWait)
	defer cancel()
	err := r.Host.ReadIndex(rctx, BucketGroup(r.Bucket, r.UUID, part))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrNoGroup):
		// A read (or a refused write's check) proposes nothing: a leader
		// this node knows now is named, to be followed.
		if l, ok := r.Host.Leader(BucketGroup(r.Bucket, r.UUID, part)); ok && l != r.Host.Node() {
			return r.ledBy(ctx, part, l)
		}
		return fmt.Errorf("%w: partition %d: %w; retry shortly", engine.ErrNotMyVBucket, part, err)
	case ctx.Err() != nil:
		return fmt.Errorf("partition %d: %w", part, ctx.Err())
	}
	return fmt.Errorf("%w: partition %d: this node could not confirm that it still leads it: %w", engine.ErrTempFail, part, err)
}

// MakeCurrent implements engine.CopyRefresher with one ReadBarrier over
// the partitions' groups: nil once this node applied every write their
// leaders acknowledged before the call, else engine.ErrNotCurrent naming
// the partition (ctx's end, a partition with no leader, or one this node
// holds no copy of).
func (r *BucketReplicator) MakeCurrent(ctx context.Context, parts []int) error {
	ids := make([]GroupID, len(parts))
	for i, p := range parts {
		ids[i] = BucketGroup(r.Bucket, r.UUID, p)
	}
	err := r.Host.ReadBarrier(ctx, ids)
	if err == nil {
		return nil
	}
	var be *BarrierError
	if !errors.As(err, &be) || be.Index >= len(parts) {
		return fmt.Errorf("%w: %w", engine.ErrNotCurrent, err)
	}
	part := parts[be.Index]
	switch {
	case errors.Is(err, ErrNoGroup):
		return fmt.Errorf("%w: partition %d: this node holds no copy of it", engine.ErrNotCurrent, part)
	case errors.Is(err, ErrTimeout):
		why := "its leader did not confirm its position in time"
		if _, ok := r.Host.Leader(ids[be.Index]); !ok {
			why = "it has no leader at the moment"
		}
		return fmt.Errorf("%w: partition %d: %s (%w)", engine.ErrNotCurrent, part, why, ctx.Err())
	}
	return fmt.Errorf("%w: partition %d: %w", engine.ErrNotCurrent, part, err)
}
