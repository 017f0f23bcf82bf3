package engine

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
)

// Replicated writes (issue 22 step 2b). A bucket given a Replicator
// (SetReplicator) no longer writes its documents itself: a write computes
// its new version as it always does (mutate's fn, under the partition's
// lock, with the same rules: CAS, add-exists, expiry, maxTTL, locks, the
// quota), then hands the decided version to the Replicator as an entry
// for the partition's replication group, conditioned on the live version
// it built on (its sequence number, 0 for none: missing, deleted or
// expired at the proposer's time). Every replica applies the
// group's committed entries in log order through ApplyReplicated: an
// entry whose condition still holds becomes the key's next version, its
// sequence number the entry's log index (monotonic per group; gaps are
// fine, as Couchbase's are), its CAS the proposer's (raised above the
// key's last CAS), its revision and "now" the proposer's. The same entries in the same
// order therefore give every replica the same documents, CAS and
// sequence numbers. An entry whose condition no longer holds (another
// write of the key was committed in between) changes nothing anywhere,
// and its proposer computes the write again on the newer version: so a
// CAS mismatch or an add on an existing key is decided against the
// committed history, the same on every replica.
//
// An applied version is acknowledged from memory (readable at once, as a
// write at durability majority is) and reaches the bucket's store in its
// normal group commits: until then the group's Raft log is the durable
// copy. ReplicatedDurable tells the replication layer how far the store
// holds a partition's entries, so a restarted node replays the log from
// there.

// Replicator proposes a bucket's writes to its partitions' replication
// groups. The cluster wiring (cmd/mayfly) implements it on replica.Host.
type Replicator interface {
	// Replicate proposes entry to partition part's group and waits until
	// it is committed on a majority and applied here, returning what
	// ApplyReplicated returned for it. A node that does not lead the
	// partition answers an error wrapping ErrNotMyVBucket (a
	// *NotMyVBucketError when it knows the leader: only for an entry it
	// did not propose, since the front doors send the write there); other
	// replication failures wrap ErrTempFail (or the context's error), and
	// one whose outcome is unknown ErrAmbiguous.
	Replicate(ctx context.Context, part int, entry []byte) (ReplicatedResult, error)
	// Writable reports whether this node may propose writes to partition
	// part now: nil if it leads it, else the error Replicate would
	// return. A write checks it before it looks at the document, so that
	// a node that does not lead refuses every write alike (a delete of a
	// key it holds no more included) rather than deciding some on its
	// own copy.
	Writable(ctx context.Context, part int) error
}

// PartitionLeader is implemented by a Replicator that can tell cheaply
// whether this node leads a partition now. The expiry pager asks it for
// every partition that holds a due document, and a read of an expired
// document for its own; a Replicator without it is asked Writable, whose
// refusal may look up the leader's address.
type PartitionLeader interface {
	// Leads reports whether this node leads partition part.
	Leads(part int) bool
}

// leads reports whether this node may propose writes to partition part
// now, through r's Leads if it has one.
func leads(ctx context.Context, r Replicator, part int) bool {
	if l, ok := r.(PartitionLeader); ok {
		return l.Leads(part)
	}
	return r.Writable(ctx, part) == nil
}

// Serves reports whether this node answers requests for key itself: nil
// when the bucket writes locally or this node leads key's partition now,
// else an error wrapping ErrNotMyVBucket. The KV port asks it before a
// read (a node that does not lead answers NOT_MY_VBUCKET, as Couchbase
// does, rather than from a copy that may lag); writes check Writable
// themselves.
func (b *Bucket) Serves(ctx context.Context, key string) error {
	r := b.replicator()
	if r == nil {
		return nil
	}
	part := int(partitionOf(key, len(b.parts)))
	if leads(ctx, r, part) {
		return nil
	}
	return fmt.Errorf("%w: this node does not lead partition %d", ErrNotMyVBucket, part)
}

// ReadConfirmer is implemented by a Replicator that can confirm a read
// this node answers as a partition's leader (a read index): that it still
// leads the partition (a majority of its copies say so now) and has
// applied every write acknowledged before the call. A leader cut off
// from the others, or deposed without knowing it yet, never confirms, so
// its memory, possibly stale, is not read.
type ReadConfirmer interface {
	// ConfirmRead returns nil once a read of partition part may be
	// answered from this node's memory; else an error wrapping
	// ErrNotMyVBucket (this node does not lead it) or ErrTempFail
	// (leadership could not be confirmed in time).
	ConfirmRead(ctx context.Context, part int) error
}

// ConfirmRead confirms a read of partition part before this node answers
// it as the partition's leader (ReadConfirmer); nil at once for a bucket
// that writes locally or whose Replicator has no read index.
func (b *Bucket) ConfirmRead(ctx context.Context, part int) error {
	if rc, ok := b.replicator().(ReadConfirmer); ok {
		return rc.ConfirmRead(ctx, part)
	}
	return nil
}

// ConfirmKeyRead is ConfirmRead for key's partition (nil at once for a
// bucket that writes locally).
func (b *Bucket) ConfirmKeyRead(ctx context.Context, key string) error {
	if b.replicator() == nil {
		return nil
	}
	return b.ConfirmRead(ctx, int(partitionOf(key, len(b.parts))))
}

// CopyRefresher is implemented by a Replicator that can bring this
// node's copies of partitions up to their leaders' (a read barrier that
// works on a copy this node does not lead too): a view or search answered
// from this node's indexes after it reflects every write acknowledged
// before, whichever node acknowledged it.
type CopyRefresher interface {
	// MakeCurrent returns nil once this node has applied, for each
	// partition in parts, every write its leader had acknowledged when
	// the call began; else an error wrapping ErrNotCurrent (a partition
	// with no leader, or whose leader did not answer, before ctx ended).
	MakeCurrent(ctx context.Context, parts []int) error
}

// MakeCurrent brings this node's copies of partitions parts up to their
// leaders' (CopyRefresher) before something reads them as current, such
// as a view query with stale=false: nil once this node has applied every
// write acknowledged before the call to those partitions, else an error
// wrapping ErrNotCurrent. It is nil at once for a bucket that writes
// locally (its copy is the only one) or whose Replicator cannot.
func (b *Bucket) MakeCurrent(ctx context.Context, parts []int) error {
	if rc, ok := b.replicator().(CopyRefresher); ok && len(parts) > 0 {
		return rc.MakeCurrent(ctx, parts)
	}
	return nil
}

// ReplicatedResult is what applying one replicated entry gave.
type ReplicatedResult struct {
	// Doc is the version the entry made, nil when it made none.
	Doc *Document
	// Err is the entry's own failure, the same on every replica (nil
	// when it applied).
	Err error
}

// ErrReplicaLost is the error of ApplyReplicated once a failed commit
// dropped entries it had applied (see replState.lost): the node's copy can
// only be repaired by replaying the log from its durable position, at its
// next start.
var ErrReplicaLost = errors.New("engine: a failed commit lost replicated entries this node had applied; it replicates again after a restart")

// errReplConflict is an entry's result when the key changed since its
// proposer read it: the proposer computes the write again.
var errReplConflict = errors.New("engine: the document changed while the write was replicated")

// errReplApplied is the result of an entry at or below the partition's
// sequence number: applied before (a replay after a restart).
var errReplApplied = errors.New("engine: entry applied before")

// maxReplConflicts bounds a write's attempts against concurrent writers
// of the same key.
const maxReplConflicts = 64

// replicatorRef boxes a Replicator for an atomic.Pointer.
type replicatorRef struct{ r Replicator }

// replState is a bucket's replication wiring.
type replState struct {
	r atomic.Pointer[replicatorRef]
	// lost says that a failed commit dropped applied entries (dropPending):
	// the group counts them applied, so applying later ones would leave a
	// hole that no replay fills once they raise the durable position. Every
	// later ApplyReplicated fails (ErrReplicaLost), which stops the node's
	// replication; a restart replays from the durable position.
	lost atomic.Bool
	// applies says that ApplyReplicated has been called: the bucket's
	// pending versions may be replicated entries (a follower has no
	// Replicator of its own in tests).
	applies atomic.Bool
	// access holds the expirations reads proposed (replexpiry.go).
	access accessExpiries
	// ttl holds the re-evaluations applied manifests started (replttl.go).
	ttl ttlPasses
	// flush holds the pass of the cluster's latest flush (replflush.go).
	flush flushPasses
}

// SetReplicator makes the bucket's document writes go through r (nil: back
// to local writes). Set it before the bucket takes writes: a bucket that
// replicates must take no local write, whose sequence number would not be
// a log index. While it is set, expirations are replicated writes too,
// decided by the partition's leader (its expiry pager, or a read that
// found the document expired; replexpiry.go), and so are sliding
// extensions (replslide.go), and so is a TTL re-evaluation, each
// partition's by its leader (replttl.go), and so is a flush, asked of the
// cluster and done by each partition's leader (StartFlush, replflush.go);
// the bucket makes no other write of its own: Flush is refused.
func (b *Bucket) SetReplicator(r Replicator) {
	if r == nil {
		b.repl.r.Store(nil)
		return
	}
	b.repl.r.Store(&replicatorRef{r: r})
}

// Replicated reports whether the bucket's document writes go through a
// Replicator (SetReplicator): each then waits for its log entry's commit
// on a majority, whatever its durability level, and a write asked to be
// done from memory alone (WriteOptions.Resident) is ErrWouldBlock.
func (b *Bucket) Replicated() bool { return b.replicator() != nil }

// replicator returns the bucket's Replicator, nil when it writes locally.
func (b *Bucket) replicator() Replicator {
	if ref := b.repl.r.Load(); ref != nil {
		return ref.r
	}
	return nil
}

// localWritesOff reports whether the bucket refuses writes of its own
// (expirations by reads or the pager, sliding extensions, a local Flush):
// its writes are replicated.
func (b *Bucket) localWritesOff() bool { return b.repl.r.Load() != nil }

// mutateReplicated is mutateWith for a bucket whose writes are
// replicated: mutateOnce proposes the version it computes; a conflict
// (the key changed before the entry applied) computes it again.
func (b *Bucket) mutateReplicated(ctx context.Context, k docKey, req Durability, needValue, resident bool, fn func(old *Document, now int64) (*Document, error)) (*Document, error) {
	if err := validateKey(k.key); err != nil {
		return nil, err
	}
	if resident {
		// The write waits for its log entry's commit on a majority,
		// whatever its level: never where its caller must not wait.
		return nil, ErrWouldBlock
	}
	if r := b.replicator(); r != nil {
		if err := r.Writable(ctx, int(partitionOf(k.key, len(b.parts)))); err != nil {
			return nil, err
		}
	}
	// A write the document refuses (a CAS mismatch, an insert over a live
	// key, a delete of a missing one) is a read of the leader's copy: it
	// is answered only once a read index confirms that this node still
	// leads and has applied all that was committed before it, and then
	// decided again on that copy. Without it a deposed leader that does
	// not know it yet answered such a write from its stale copy (`make
	// chaos`'s partition case: a CAS refused against the value every
	// other node held).
	refused, confirmed := false, false
	decide := func(old *Document, now int64) (*Document, error) {
		d, err := fn(old, now)
		refused = err != nil
		return d, err
	}
	for range maxReplConflicts {
		refused = false
		d, err := b.mutateOnce(ctx, k, req, needValue, resident, decide)
		if err != nil && refused && !confirmed {
			if cerr := b.ConfirmRead(ctx, int(partitionOf(k.key, len(b.parts)))); cerr != nil {
				return nil, cerr
			}
			confirmed = true
			continue
		}
		if !errors.Is(err, errReplConflict) {
			return d, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: %q changed %d times while the write was replicated", ErrTempFail, k.key, maxReplConflicts)
}

// replicate proposes d, the version mutate computed for k on prev (the
// newest version, nil for none) at time now, and returns the version the
// entry made once it is applied here. It is called without the
// partition's lock.
func (b *Bucket) replicate(ctx context.Context, r Replicator, p *partition, k docKey, prev, d *Document, now int64) (*Document, error) {
	w := replWrite{prevSeq: liveSeq(prev, now), now: now}
	w.doc = *d
	w.doc.Key, w.doc.Collection = k.key, k.cid
	w.doc.CAS = b.nextCAS(now)
	w.doc.RevSeq = 1
	if prev != nil {
		w.doc.RevSeq = prev.RevSeq + 1
	}
	res, err := r.Replicate(ctx, int(p.id), w.encode())
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, res.Err
	}
	if res.Doc == nil {
		return nil, fmt.Errorf("%w: the replicated write made no version", ErrTempFail)
	}
	return res.Doc, nil
}

// liveSeq is the sequence number of d if it is live at now, else 0: what
// a write's entry is conditioned on. A write's new version depends only on
// the live version (mutate's fn sees nil for a tombstone or an expired
// document), and a tombstone is purged on each node on its own schedule
// (the metadata purger), so conditioning on it would not be deterministic.
func liveSeq(d *Document, now int64) uint64 {
	if d == nil || d.Deleted || d.ExpiredAt(now) {
		return 0
	}
	return d.Seq
}

// ApplyReplicated applies one committed entry of partition part's group,
// at log index index: the entry's version becomes the key's next one,
// with sequence number index, if the key is still at the version the
// entry was computed on. It is deterministic: the same entries in the
// same order give every replica the same documents, CAS and sequence
// numbers. An entry at or below the partition's sequence number was
// applied before (a replay after a restart) and changes nothing. An entry
// of a collection the bucket dropped (an ID below its manifest's next one
// that the manifest no longer has; IDs are never reused) keeps nothing,
// whether the drop was applied before it or after, and only moves the
// partition's sequence number (applyVoidLocked); one of an ID at or above
// the next one, a collection created after this node's manifest, is
// applied, readable once the manifest names it. A
// per-entry failure (a conflict, an undecodable entry) is the result's
// Err; an error is the bucket's (closed, or its store failed), after
// which this replica cannot apply the group's later entries.
func (b *Bucket) ApplyReplicated(part int, index uint64, entry []byte) (ReplicatedResult, error) {
	if part < 0 || part >= len(b.parts) {
		return ReplicatedResult{}, fmt.Errorf("%w: partition %d of %d", ErrInvalidOp, part, len(b.parts))
	}
	var w replWrite
	if err := w.decode(entry); err != nil {
		return ReplicatedResult{Err: err}, nil
	}
	k := docKey{cid: w.doc.Collection, key: w.doc.Key}
	p := b.parts[part]
	if int(partitionOf(k.key, len(b.parts))) != part {
		return ReplicatedResult{Err: fmt.Errorf("%w: key %q is not in partition %d", ErrInvalidOp, k.key, part)}, nil
	}
	if b.repl.lost.Load() {
		return ReplicatedResult{}, fmt.Errorf("bucket %s: %w", b.name, ErrReplicaLost)
	}
	if !b.repl.applies.Load() {
		b.repl.applies.Store(true)
	}
	p.mu.Lock()
	if index <= p.mu.seq {
		p.mu.Unlock()
		return ReplicatedResult{Err: errReplApplied}, nil
	}
	if b.isClosed() {
		p.mu.Unlock()
		return ReplicatedResult{}, ErrClosed
	}
	if b.collectionDropped(k.cid) {
		return b.applyVoidLocked(p, k, index, w.doc.CAS)
	}
	if _, err := b.fetchMissLocked(p, k, false); err != nil {
		p.mu.Unlock()
		return ReplicatedResult{}, err
	}
	prev := p.latestLocked(k)
	if !w.holds(prev) {
		p.mu.Unlock()
		return ReplicatedResult{Err: errReplConflict}, nil
	}
	d := new(Document)
	*d = w.doc
	b.stampLocked(p, k, prev, d, w.now)
	// The proposer's revision: a tombstone it built on may be purged here.
	d.Seq, d.CAS, d.RevSeq = index, w.doc.CAS, w.doc.RevSeq
	if w.keepCAS {
		d.CAS = prev.CAS // a sliding extension: holds says prev is the version it extends
	} else if w.prevSeq != 0 && d.CAS <= prev.CAS {
		d.CAS = prev.CAS + 1 // a new leader's clock behind the last one's
	}
	b.observeCAS(d.CAS)
	var cb *commitBatch
	var wait bool
	var err error
	if w.expiration() {
		cb, wait, err = b.queueExpirationLocked(p, k, prev, d, false)
	} else {
		cb, wait, err = b.queueAtLocked(p, k, prev, d, false)
	}
	p.mu.Unlock()
	if err != nil {
		return ReplicatedResult{}, err
	}
	if wait { // the store is behind: apply at its pace, readable once committed
		if err := cb.wait(context.Background()); err != nil {
			return ReplicatedResult{}, err
		}
	}
	return ReplicatedResult{Doc: d}, nil
}

// applyVoidLocked applies an entry of key k, at log index index with CAS
// cas, whose collection this bucket dropped (collectionDropped) as nothing:
// no version is kept, since a dropped collection's documents are deleted
// wherever its drop was applied, and a copy that applies the drop before
// the entry (a node that was down, or a follower behind) must end the same
// as one that applied the entry first. The partition's sequence number
// still reaches index, and the CAS clock cas, as on a copy that applied it
// and then the drop (queueVoidLocked). The result's Err wraps
// ErrCollectionNotFound. It unlocks p.mu.
//
// REQUIRES: p.mu held for writing, index above p's sequence number.
func (b *Bucket) applyVoidLocked(p *partition, k docKey, index, cas uint64) (ReplicatedResult, error) {
	cb, wait, err := b.queueVoidLocked(p, k, index, cas)
	p.mu.Unlock()
	if err != nil {
		return ReplicatedResult{}, err
	}
	if wait {
		if err := cb.wait(context.Background()); err != nil {
			return ReplicatedResult{}, err
		}
	}
	return ReplicatedResult{Err: fmt.Errorf("%w: collection %d was dropped", ErrCollectionNotFound, k.cid)}, nil
}

// queueVoidLocked moves p's sequence number to seq, and the CAS clock to
// cas, for a version of key k that is kept nowhere (its collection was
// dropped), and queues a void record that takes both to the store, so the
// durable position (and the feed's high sequence number) passes it too. It
// reports, as queueAtLocked does, whether the caller must wait for the
// batch.
//
// REQUIRES: p.mu held for writing, seq above p's sequence number.
func (b *Bucket) queueVoidLocked(p *partition, k docKey, seq, cas uint64) (*commitBatch, bool, error) {
	b.observeCAS(cas)
	r := record{purge: true, void: true, key: k, part: p.id, seq: seq, cas: cas}
	cb, wait, err := b.store.enqueueAt(r, false, false)
	if err != nil {
		return nil, true, err
	}
	p.setSeqLocked(seq)
	if cb.committed() {
		b.applyRecordLocked(p, &r) // removes nothing: only the durable position moves
		b.changed()
	}
	return cb, wait, nil
}

// observeCAS raises the bucket's CAS clock to cas, so this node's next CAS
// (should it lead) is above every CAS it applied.
func (b *Bucket) observeCAS(cas uint64) {
	for {
		last := b.cas.Load()
		if last >= cas || b.cas.CompareAndSwap(last, cas) {
			return
		}
	}
}

// ReplicatedDurable returns partition part's highest sequence number its
// store holds: with sequence numbers that are log indexes, the log
// position up to which the store holds every applied entry. A restarted
// node replays its group's log from there.
func (b *Bucket) ReplicatedDurable(part int) uint64 {
	p := b.parts[part]
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.mu.durable
}

// ReplicatedSnapshot returns partition part's whole state, in memory, for
// a replica too far behind its group's log: every key's newest version,
// tombstones included, and the partition's position, its highest sequence
// number (the log index of the last entry that changed it), which
// ReplicatedRestore needs to delete what the snapshot lacks. The caller
// syncs the bucket first.
//
// When items left memory whole (fullEviction), the partition's stored
// documents come back into memory first, and none of the bucket's leaves
// it until the snapshot is taken (keysIn, as a Flush's pass over every key
// does); the state is then read under the partition's lock, so it is the
// partition's exact state at its sequence number, memory's versions on
// their way to disk included. Memory holds the partition twice meanwhile
// (its table and the frame, which is in memory anyway); the key read costs
// one pass over the store's keys of every partition.
func (b *Bucket) ReplicatedSnapshot(part int) ([]byte, error) {
	if part < 0 || part >= len(b.parts) {
		return nil, fmt.Errorf("%w: partition %d of %d", ErrInvalidOp, part, len(b.parts))
	}
	p := b.parts[part]
	release, err := b.keysIn(context.Background(), b.collectionIDs(), p)
	if err != nil {
		return nil, err
	}
	defer release()
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.isClosed() {
		return nil, ErrClosed
	}
	keys := p.keysLocked(nil)
	docs := make([]*Document, 0, len(keys))
	for _, k := range keys {
		d, err := b.withValueLocked(p.latestLocked(k))
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	slices.SortFunc(docs, func(x, y *Document) int { return cmp.Compare(x.Seq, y.Seq) })
	buf := binary.AppendUvarint([]byte{replSnapshot}, p.mu.seq)
	buf = binary.AppendUvarint(buf, uint64(len(docs)))
	for _, d := range docs {
		buf = appendDoc(buf, d, true)
	}
	return buf, nil
}

// ReplicatedRestore brings partition part to a snapshot's state: each
// version in it newer than the partition's sequence number becomes its
// key's, with its sequence number, CAS and revision; every key the
// partition holds live and the snapshot lacks is deleted; and the bucket is
// synced before it returns, so the store holds the snapshot's position.
//
// A key live here and absent from the snapshot was deleted on the
// snapshot's node by an entry this replica has not applied (after the
// partition's sequence number, at most at the snapshot's position), whose
// tombstone was purged there since. Its deletion here is a write as any
// (feed consumers, views and _changes see it) with a sequence number of
// its own in that range: each such key's deletion took a distinct index
// there, which no version of the snapshot holds, so the indexes of the
// range that no snapshot version holds are enough (deletionSeqs); they are
// below every entry after the snapshot. Its CAS is the bucket's next, as
// a delete made here now would take: above the key's and every CAS this
// node gave out or applied. A key held as a tombstone only is left. An
// old snapshot, without its position, deletes nothing.
func (b *Bucket) ReplicatedRestore(ctx context.Context, part int, data []byte) error {
	snap, err := decodeSnapshot(data)
	if err != nil {
		return err
	}
	if part < 0 || part >= len(b.parts) {
		return fmt.Errorf("%w: partition %d of %d", ErrInvalidOp, part, len(b.parts))
	}
	p := b.parts[part]
	cids := b.collectionIDs()
	release, err := b.keysIn(ctx, cids, p)
	if err != nil {
		return err
	}
	defer release()
	steps, err := b.restoreSteps(p, snap, cids)
	if err != nil {
		return err
	}
	for _, st := range steps {
		if err := b.restoreStep(p, st); err != nil {
			return err
		}
	}
	return b.Sync(ctx)
}

// restoreStep is one version a restore writes: a snapshot's (doc), or the
// deletion of a key the snapshot lacks (del) at sequence number seq.
type restoreStep struct {
	doc *Document
	del docKey
	seq uint64
}

// restoreSteps returns, in sequence order, the versions a restore of snap
// writes into p: the snapshot's above p's sequence number, and the
// deletions of the keys of collections cids that p holds live and snap
// lacks (keysIn has put them all in memory).
func (b *Bucket) restoreSteps(p *partition, snap replSnapshotData, cids []CollectionID) ([]restoreStep, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	from := p.mu.seq
	var steps []restoreStep
	for _, d := range snap.docs {
		if d.Seq > from {
			steps = append(steps, restoreStep{doc: d, seq: d.Seq})
		}
	}
	if snap.pos == 0 {
		return steps, nil // an old snapshot: its position is not known
	}
	in := make(map[docKey]bool, len(snap.docs))
	for _, d := range snap.docs {
		in[docKey{cid: d.Collection, key: d.Key}] = true
	}
	var gone []docKey
	for _, k := range p.keysLocked(func(c CollectionID) bool { return slices.Contains(cids, c) }) {
		if d := p.latestLocked(k); d != nil && !d.Deleted && !in[k] {
			gone = append(gone, k)
		}
	}
	if len(gone) == 0 {
		return steps, nil
	}
	slices.SortFunc(gone, compareDocKeys)
	seqs, err := deletionSeqs(steps, from, snap.pos, len(gone))
	if err != nil {
		return nil, fmt.Errorf("partition %d: %w", p.id, err)
	}
	for i, k := range gone {
		steps = append(steps, restoreStep{del: k, seq: seqs[i]})
	}
	slices.SortFunc(steps, func(x, y restoreStep) int { return cmp.Compare(x.seq, y.seq) })
	return steps, nil
}

// deletionSeqs returns the n lowest sequence numbers in (from, pos] that
// none of steps (the snapshot's versions above from, in sequence order)
// holds, or an error when the range has fewer.
func deletionSeqs(steps []restoreStep, from, pos uint64, n int) ([]uint64, error) {
	seqs := make([]uint64, 0, n)
	next := from + 1 // the lowest sequence number not yet looked at
	for _, st := range steps {
		for ; next < st.seq && len(seqs) < n; next++ {
			seqs = append(seqs, next)
		}
		next = max(next, st.seq+1)
	}
	for ; next <= pos && len(seqs) < n; next++ {
		seqs = append(seqs, next)
	}
	if len(seqs) < n {
		return nil, fmt.Errorf("%w: %d keys absent from a snapshot at %d, and only %d free sequence numbers after %d to delete them at",
			ErrInvalidOp, n, pos, len(seqs), from)
	}
	return seqs, nil
}

// restoreStep writes one step of a restore into p, through the partition's
// write path (the change feed, the counts and the store see it as any
// write), unless p's sequence number is already past it. A version of a
// collection this bucket dropped only moves the sequence number
// (queueVoidLocked).
func (b *Bucket) restoreStep(p *partition, st restoreStep) error {
	k := st.del
	if st.doc != nil {
		k = docKey{cid: st.doc.Collection, key: st.doc.Key}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if st.seq <= p.mu.seq {
		return nil
	}
	if b.isClosed() {
		return ErrClosed
	}
	if _, err := b.fetchMissLocked(p, k, false); err != nil {
		return err
	}
	prev := p.latestLocked(k)
	if st.doc == nil {
		if prev == nil || prev.Deleted {
			return nil // nothing live to delete any more
		}
		now := b.clock.Now()
		d := &Document{Deleted: true, DeletedAt: now, Type: prev.Type}
		b.stampLocked(p, k, prev, d, now) // the next CAS, the next revision
		d.Seq = st.seq
		_, _, err := b.queueAtLocked(p, k, prev, d, false)
		return err
	}
	if b.collectionDropped(k.cid) {
		// A version of a collection dropped here (the snapshot's node
		// had not applied the drop yet): kept nowhere, as an entry of it
		// applied from the log is not.
		_, _, err := b.queueVoidLocked(p, k, st.seq, st.doc.CAS)
		return err
	}
	d := st.doc
	seq, cas, rev := d.Seq, d.CAS, d.RevSeq
	b.stampLocked(p, k, prev, d, d.DeletedAt)
	d.Seq, d.CAS, d.RevSeq = seq, cas, rev
	b.observeCAS(d.CAS)
	var err error
	if d.Deleted && d.Expired && prev != nil && !prev.Deleted {
		// An expiration of the version this replica holds: it
		// leaves the counts as one applied from the log does.
		_, _, err = b.queueExpirationLocked(p, k, prev, d, false)
	} else {
		_, _, err = b.queueAtLocked(p, k, prev, d, false)
	}
	return err
}

// replFormat is the first byte of an entry (and of an old snapshot, with
// no position); replSlide is the first byte of an entry that keeps its
// document's CAS (a sliding extension, replslide.go), in the same format;
// replSnapshot is the first byte of a snapshot with its position.
const (
	replFormat   = 1
	replSlide    = 2
	replSnapshot = 3
)

// replWrite is one replicated entry: the version decided by its proposer
// (key, collection, value, flags, type, absolute expiry, deletion, its
// CAS), the sequence number of the version it was computed on, and the
// proposer's time.
type replWrite struct {
	prevSeq uint64
	now     int64
	doc     Document
	// keepCAS says the version keeps the CAS of the one it was computed on
	// (a sliding extension: the value did not change, so a client's CAS
	// from a read still works), rather than taking a CAS above it.
	keepCAS bool
}

// expiration reports whether w expires a document (the pager's, or a
// read's on the partition's leader): a tombstone whose deletion reason is
// expiry. No client write makes one.
func (w *replWrite) expiration() bool { return w.doc.Deleted && w.doc.Expired }

// holds reports whether w's condition holds on prev, the key's newest
// version on this replica. A write holds if the live version it was
// computed on is still the live one at the proposer's time. An expiration
// holds only on the very version that expired: live (not a tombstone,
// which each node purges on its own schedule), with the sequence number
// and expiration it was decided on, and expired at the proposer's time; a
// key written, touched or deleted in between keeps what that write made.
func (w *replWrite) holds(prev *Document) bool {
	if !w.expiration() {
		return liveSeq(prev, w.now) == w.prevSeq
	}
	return prev != nil && !prev.Deleted && prev.Seq == w.prevSeq &&
		prev.Expiration == w.doc.Expiration && prev.ExpiredAt(w.now)
}

func (w *replWrite) encode() []byte {
	buf := make([]byte, 0, 64+len(w.doc.Key)+len(w.doc.Value))
	if w.keepCAS {
		buf = append(buf, replSlide)
	} else {
		buf = append(buf, replFormat)
	}
	buf = binary.AppendUvarint(buf, w.prevSeq)
	buf = binary.AppendVarint(buf, w.now)
	return appendDoc(buf, &w.doc, false)
}

func (w *replWrite) decode(data []byte) error {
	r := replReader{b: data}
	switch r.byte() {
	case replFormat:
	case replSlide:
		w.keepCAS = true
	default:
		return fmt.Errorf("%w: a replicated entry of an unknown format", ErrInvalidOp)
	}
	w.prevSeq = r.uvarint()
	w.now = r.varint()
	r.doc(&w.doc, false)
	if r.err != nil || len(r.b) != 0 || (w.keepCAS && (w.prevSeq == 0 || w.doc.Deleted)) {
		return fmt.Errorf("%w: a malformed replicated entry", ErrInvalidOp)
	}
	return nil
}

// replSnapshotData is a decoded partition snapshot: its versions in
// sequence order and its position (0 for an old snapshot, which did not
// record it).
type replSnapshotData struct {
	pos  uint64
	docs []*Document
}

func decodeSnapshot(data []byte) (replSnapshotData, error) {
	var snap replSnapshotData
	r := replReader{b: data}
	switch r.byte() {
	case replFormat:
	case replSnapshot:
		snap.pos = r.uvarint()
	default:
		return snap, fmt.Errorf("%w: a partition snapshot of an unknown format", ErrInvalidOp)
	}
	n := r.uvarint()
	if r.err != nil || n > uint64(len(data)) {
		return snap, fmt.Errorf("%w: a malformed partition snapshot", ErrInvalidOp)
	}
	snap.docs = make([]*Document, 0, n)
	var last uint64
	for range n {
		d := new(Document)
		r.doc(d, true)
		if r.err == nil && (d.Seq <= last || data[0] == replSnapshot && d.Seq > snap.pos) {
			r.err = errReplShort // out of order, or past the snapshot's position
		}
		last = d.Seq
		snap.docs = append(snap.docs, d)
	}
	if r.err != nil || len(r.b) != 0 {
		return snap, fmt.Errorf("%w: a malformed partition snapshot", ErrInvalidOp)
	}
	return snap, nil
}

const (
	replDeleted = 1 << iota
	replExpired
	replPinned
)

// appendDoc encodes the fields of d a write decides, its revision among
// them (and, with stamped, its sequence number).
func appendDoc(buf []byte, d *Document, stamped bool) []byte {
	if stamped {
		buf = binary.AppendUvarint(buf, d.Seq)
	}
	buf = binary.AppendUvarint(buf, d.RevSeq)
	buf = binary.AppendUvarint(buf, d.CAS)
	buf = binary.AppendUvarint(buf, uint64(d.Collection))
	buf = binary.AppendUvarint(buf, uint64(d.Flags))
	buf = binary.AppendVarint(buf, d.Expiration)
	buf = binary.AppendVarint(buf, d.DeletedAt)
	buf = binary.AppendVarint(buf, d.TS)
	buf = binary.AppendVarint(buf, d.CreatedAt)
	var bits byte
	if d.Deleted {
		bits |= replDeleted
	}
	if d.Expired {
		bits |= replExpired
	}
	if d.ExpiryPinned {
		bits |= replPinned
	}
	buf = append(buf, bits)
	buf = binary.AppendUvarint(buf, uint64(len(d.Type)))
	buf = append(buf, d.Type...)
	buf = binary.AppendUvarint(buf, uint64(len(d.Key)))
	buf = append(buf, d.Key...)
	if d.Value == nil {
		return append(buf, 0)
	}
	buf = binary.AppendUvarint(buf, uint64(len(d.Value))+1)
	return append(buf, d.Value...)
}

// replReader decodes entries and snapshots; the first failure sticks.
type replReader struct {
	b   []byte
	err error
}

var errReplShort = errors.New("short")

func (r *replReader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errReplShort
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *replReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errReplShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *replReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errReplShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *replReader) bytes(n uint64) []byte {
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errReplShort
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *replReader) doc(d *Document, stamped bool) {
	if stamped {
		d.Seq = r.uvarint()
	}
	d.RevSeq = r.uvarint()
	d.CAS = r.uvarint()
	d.Collection = CollectionID(r.uvarint())
	d.Flags = uint32(r.uvarint())
	d.Expiration = r.varint()
	d.DeletedAt = r.varint()
	d.TS = r.varint()
	d.CreatedAt = r.varint()
	bits := r.byte()
	d.Deleted, d.Expired, d.ExpiryPinned = bits&replDeleted != 0, bits&replExpired != 0, bits&replPinned != 0
	d.Type = DocType(r.bytes(r.uvarint()))
	d.Key = string(r.bytes(r.uvarint()))
	if n := r.uvarint(); n > 0 {
		d.Value = append([]byte(nil), r.bytes(n-1)...)
	}
}

// NotMyVBucketError is the refusal of a request by a node that does not
// lead its partition, naming the node that does, given before anything of
// the request was proposed or applied (errors.Is(err, ErrNotMyVBucket)
// holds). Nothing was written, so the request may be sent to Leader as it
// was, whatever it is (an insert, an increment, an append): the front doors
// follow it once (FollowableLeader). A refusal that names no leader (a
// partition electing one) is a plain ErrNotMyVBucket, and a write whose
// outcome is not known (ErrAmbiguous) is never a NotMyVBucketError.
type NotMyVBucketError struct {
	// Partition is the request's partition.
	Partition int
	// Leader is the name of the node that leads it, as the refusing node
	// knows it (its replication group's leader).
	Leader string
	// Where, if set, says where Leader is reached ("http://HOST:PORT"),
	// for the message.
	Where string
}

// Error says "not my vbucket: partition N is led by node NAME[ at
// WHERE]; send the request there": the wording the memcached port's
// forwarding reads the leader's name from (a refusal's SERVER_ERROR line).
func (e *NotMyVBucketError) Error() string {
	where := ""
	if e.Where != "" {
		where = " at " + e.Where
	}
	return fmt.Sprintf("%v: partition %d is led by node %s%s; send the request there", ErrNotMyVBucket, e.Partition, e.Leader, where)
}

// Unwrap returns ErrNotMyVBucket.
func (e *NotMyVBucketError) Unwrap() error { return ErrNotMyVBucket }

// FollowableLeader returns the node a refusal names when err may be sent
// there as it was: err holds a *NotMyVBucketError naming a leader, and it
// is not ErrAmbiguous (a write whose outcome is unknown is never sent
// again, whatever else its error says). "" for every other error.
func FollowableLeader(err error) string {
	var nmv *NotMyVBucketError
	if err == nil || !errors.As(err, &nmv) || nmv.Leader == "" || errors.Is(err, ErrAmbiguous) {
		return ""
	}
	return nmv.Leader
}

// The errors of replicated writes.
var (
	// ErrNotMyVBucket is returned by a write to a partition this node does
	// not lead (Couchbase's NOT_MY_VBUCKET): a temporary error (503 over
	// HTTP); nothing was written. One that names the leader is a
	// *NotMyVBucketError, which the front doors follow to it.
	ErrNotMyVBucket = errors.New("engine: not my vbucket")
	// ErrTempFail is returned by a replicated write that could not be
	// proposed or whose outcome is not known yet (the group is busy or
	// closing): a temporary error (503 over HTTP).
	ErrTempFail = errors.New("engine: temporary failure")
	// ErrAmbiguous is returned by a replicated write whose log entry was
	// proposed but whose commit was not seen in time (no answer, the
	// group's leader changed, the node closing): it may yet be committed,
	// or already be. A client must read the document before it repeats a
	// write that is not idempotent (an increment, an append, an insert);
	// the KV port answers it SYNC_WRITE_AMBIGUOUS, which SDKs raise
	// instead of retrying. It wraps ErrTempFail (503 over HTTP, with this
	// reason).
	ErrAmbiguous = fmt.Errorf("%w: the write's outcome is unknown: it may have been applied", ErrTempFail)
	// ErrNotCurrent is returned by MakeCurrent when this node's copy of a
	// partition could not be brought up to its leader's in time (the
	// partition has no leader, or its leader did not answer): an answer
	// read from the copy might miss an acknowledged write, so none is
	// given. It wraps ErrTempFail (503 over HTTP).
	ErrNotCurrent = fmt.Errorf("%w: this node's copy of a partition could not be made current", ErrTempFail)
)
