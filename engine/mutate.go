package engine

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
)

// mutate applies one mutation to key at durability level req (raised to the
// bucket's minimum). fn sees the current live document (nil if missing,
// deleted or expired) and the time, and returns the new version with Value,
// Type, Flags, Expiration and Deleted/DeletedAt set, and CAS set to the CAS
// the write was made with (0 for none); mutate fills in the rest and queues
// it for disk. While a lock holds on key (lock.go), fn sees the lock CAS as
// the live version's, and only a write fn makes with it goes ahead. At a
// level that persists it waits until the version is durable and published;
// at none or majority it returns at once, the version readable (see
// ackedLocked) and on its way to disk. The old document fn sees may have its
// value ejected (nil): fn must not read it; mutateValue gives fn the value.
// With resident, a mutation that would read the store first (the metadata
// of a key memory does not hold, an ejected value mutateValue needs), or
// that would be acknowledged from memory but has to wait for its commit
// (store.enqueueAt), returns ErrWouldBlock, having changed nothing
// (WriteOptions.Resident).
func (b *Bucket) mutate(ctx context.Context, k docKey, req Durability, resident bool, fn func(old *Document, now int64) (*Document, error)) (*Document, error) {
	return b.mutateWith(ctx, k, req, false, resident, fn)
}

// mutateValue is mutate for an fn that builds on the old document's value
// (a touch): an ejected value is read back from the store first, before
// the partition's lock is taken (under it only if the document changed
// meanwhile).
func (b *Bucket) mutateValue(ctx context.Context, k docKey, req Durability, resident bool, fn func(old *Document, now int64) (*Document, error)) (*Document, error) {
	return b.mutateWith(ctx, k, req, true, resident, fn)
}

func (b *Bucket) mutateWith(ctx context.Context, k docKey, req Durability, needValue, resident bool, fn func(old *Document, now int64) (*Document, error)) (*Document, error) {
	if err := b.checkDurability(req); err != nil {
		return nil, err
	}
	if b.replicator() != nil {
		return b.mutateReplicated(ctx, k, req, needValue, resident, fn) // replicated.go
	}
	return b.mutateOnce(ctx, k, req, needValue, resident, fn)
}

// mutateOnce is one attempt of mutateWith: the version is computed under
// the partition's lock and queued, or proposed when the bucket's writes
// are replicated (replicated.go).
func (b *Bucket) mutateOnce(ctx context.Context, k docKey, req Durability, needValue, resident bool, fn func(old *Document, now int64) (*Document, error)) (*Document, error) {
	if err := validateKey(k.key); err != nil {
		return nil, err
	}
	p := b.partitionFor(k.key)
	var read *Document // the committed version with its value, read without the lock
	if needValue && !resident {
		var err error
		if read, err = b.readCommitted(ctx, p, k, false); err != nil {
			return nil, err
		}
	}
	p.mu.Lock()
	if err := b.writable(k.cid); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	if resident {
		if _, stored := b.missLocked(p, k); stored {
			p.mu.Unlock()
			return nil, ErrWouldBlock
		}
	} else if _, err := b.fetchMissLocked(p, k, needValue); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	now := b.clock.Now()
	// prev, and live, may be the partition's view (latestViewLocked):
	// read under the lock only. fn does not keep the Document it is
	// given (the engine's own, in collection.go).
	prev := p.latestViewLocked(k)
	live := prev
	if live != nil && (live.Deleted || live.ExpiredAt(now)) {
		live = nil
	}
	if live != nil && live.ejected && needValue {
		switch {
		case read != nil && read.Seq == live.Seq:
			live = read
		case resident:
			p.mu.Unlock()
			return nil, ErrWouldBlock
		default: // changed since: read it under the lock
			var err error
			if live, err = b.withValueLocked(live); err != nil {
				p.mu.Unlock()
				return nil, err
			}
		}
	}
	d, err := fn(b.lockViewLocked(p, k, live, now), now)
	err = b.checkLockLocked(p, k, live, now, d, err) // lock.go
	if err == nil && live == nil && !d.Deleted {
		err = checkNewKey(k)
	}
	if err == nil {
		err = b.checkQuota(prev, d)
	}
	if err != nil {
		p.mu.Unlock()
		// A refused write (an add of a key that exists, a wrong CAS) may
		// have brought its item back into memory (fetchMissLocked): it
		// evicts as a write that succeeds does.
		b.maybeEvict(ctx)
		return nil, err
	}
	if r := b.replicator(); r != nil {
		if prev != nil && prev == p.mu.view {
			c := *prev // replicate reads it after the lock
			prev = &c
		}
		p.mu.Unlock()
		return b.replicate(ctx, r, p, k, prev, d, now)
	}
	b.stampLocked(p, k, prev, d, now)
	persist := b.durability(req).Persists()
	cb, wait, err := b.queueWriteLocked(p, k, prev, d, persist, resident && !persist)
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if wait {
		if err := cb.wait(ctx); err != nil {
			return nil, err
		}
	}
	b.maybeEvict(ctx)
	return d, nil
}

// publishLocked stamps d as the next version of k after prev (the newest
// version, committed or not) and queues it for disk. Readers, the expiry
// index, the counters and the change feed see it only once its batch is
// committed (applyLocked): nothing a failed commit loses was ever visible. A
// bucket that keeps nothing on disk commits inline and publishes at once.
//
// An expiration (a tombstone with Expired set) is written like a delete: its
// tombstone record replaces the document's and its expiry entry goes, so a
// restart finds it purged, with the same sequence number, CAS and revision.
// The pager does not wait for its expirations (ExpireBatch), so group commit
// gathers a run into few transactions.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) publishLocked(p *partition, k docKey, prev, d *Document, now int64) (*commitBatch, error) {
	b.stampLocked(p, k, prev, d, now)
	return b.queueLocked(p, k, prev, d)
}

// stampLocked fills in d's key, CAS, sequence and revision numbers as the
// next version of k after prev.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) stampLocked(p *partition, k docKey, prev, d *Document, now int64) {
	d.Key, d.Collection, d.Partition = k.key, k.cid, p.id
	d.CAS = b.nextCAS(now)
	d.Seq = p.mu.seq + 1
	if prev != nil {
		d.RevSeq = prev.RevSeq + 1
	} else {
		d.RevSeq = 1
	}
	if d.Deleted {
		d.Value = nil
		if !d.Expired {
			d.Expiration = 0
		}
	}
	wasLive := prev != nil && !prev.Deleted
	d.Created = !d.Deleted && (!wasLive || prev.ExpiredAt(now))
}

// queueLocked queues stamped version d of k (after prev) for the store. A
// store that commits inline has committed it on return, and d is published
// at once.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) queueLocked(p *partition, k docKey, prev, d *Document) (*commitBatch, error) {
	cb, _, err := b.queueAtLocked(p, k, prev, d, true)
	return cb, err
}

// queueAtLocked is queueLocked for a write whose writer waits for disk
// (persist) or is acknowledged from memory. It reports whether the writer
// must wait for the batch (see store.enqueueAt); one that need not has its
// version readable at once, as acknowledged (partition.mu.acked).
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) queueAtLocked(p *partition, k docKey, prev, d *Document, persist bool) (*commitBatch, bool, error) {
	return b.queueWriteLocked(p, k, prev, d, persist, false)
}

// queueWriteLocked is queueAtLocked for a writer that may refuse to wait:
// with refuseWait, a write acknowledged from memory that would have to wait
// for its commit (store.enqueueAt) is not queued, and nothing changes:
// ErrWouldBlock (WriteOptions.Resident).
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) queueWriteLocked(p *partition, k docKey, prev, d *Document, persist, refuseWait bool) (*commitBatch, bool, error) {
	r := record{doc: d, key: k, part: p.id, seq: d.Seq, cas: d.CAS}
	if prev != nil && !prev.Deleted {
		// On disk, a live document holds an expiry entry; a tombstone
		// (a delete's or an expiration's) holds none.
		r.oldExp = prev.Expiration
	}
	cb, wait, err := b.store.enqueueAt(r, persist, refuseWait)
	if err != nil {
		return nil, true, err
	}
	p.setSeqLocked(d.Seq)
	if cb.committed() {
		b.applyRecordLocked(p, &r)
		b.changed()
		return cb, false, nil
	}
	p.mu.pending[k] = d
	p.mu.npending = len(p.mu.pending)
	if !wait {
		was := p.countedLiveLocked(k)
		p.mu.acked[k] = d
		b.countedChange(p, k, was)
	}
	return cb, wait, nil
}

// countedChange moves curr_items and k's collection's counts by the change
// of p.countedLiveLocked(k) from was, its answer before the caller changed
// what it depends on.
//
// REQUIRES: p.mu held for writing, p k's partition.
func (b *Bucket) countedChange(p *partition, k docKey, was bool) {
	now := p.countedLiveLocked(k)
	if was == now {
		return
	}
	delta := int64(1)
	if was {
		delta = -1
	}
	b.currItems.Add(delta)
	b.addLive(p, k.cid, delta)
}

// applyLocked makes d, a version whose record is on disk (or that needs no
// disk), the committed version of its key: what reads, the expiry index, the
// counters and the change feed see.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) applyLocked(p *partition, d *Document) {
	k := docKey{cid: d.Collection, key: d.Key}
	// curr_items and the collections' counts follow what counts as live
	// (countedLiveLocked), which a version acknowledged from memory, or an
	// expiration, changed when it was queued: the commit changes them only
	// as far as it changes that. The partition's own counts of documents
	// and tombstones (replaced) follow the committed versions.
	was := p.countedLiveLocked(k)
	slot, old := p.mu.docs.put(k, d)
	wasLive := old.live()
	b.replaced(p, slot, old, p.mu.docs.version(slot))
	if len(p.mu.pending) > 0 && p.mu.pending[k] == d {
		delete(p.mu.pending, k)
		p.mu.npending = len(p.mu.pending)
	}
	if len(p.mu.acked) > 0 {
		if a := p.mu.acked[k]; a != nil && a.Seq <= d.Seq {
			delete(p.mu.acked, k) // committed, or overtaken by a committed version
		}
	}
	if e, ok := p.mu.expiring[k]; ok && e <= d.Seq {
		delete(p.mu.expiring, k) // committed, or overtaken by a committed version
	}
	b.countedChange(p, k, was)
	p.appendLogLocked(d.Seq, slot)
	p.mu.durable = max(p.mu.durable, d.Seq)
	var oldExp, newExp int64
	if old.live() {
		oldExp = old.exp
	}
	if !d.Deleted {
		newExp = d.Expiration
	}
	if oldExp != 0 || newExp != 0 {
		b.exps.update(k, oldExp, newExp, int64(len(d.Value)))
	}
	switch {
	case wasLive && d.Deleted:
		b.tombs.Add(1)
	case !wasLive && !d.Deleted:
		if old.ok {
			b.tombs.Add(-1)
		}
	case !old.ok && d.Deleted:
		b.tombs.Add(1)
	}
}

// applyCommitted publishes a committed batch: each record's version becomes
// the committed one, in order, and feed waiters wake. The store's flusher
// calls it after each successful commit, before the batch's writers return.
func (b *Bucket) applyCommitted(recs []record) {
	for i := range recs {
		r := &recs[i]
		p := b.parts[r.part]
		p.mu.Lock()
		b.applyRecordLocked(p, r)
		p.mu.Unlock()
	}
	b.changed()
	// Writes acknowledged from memory returned before their versions
	// joined the LRU queue here: their writers' maybeEvict could not
	// eject them, so a burst of them would stay past the quota.
	b.maybeEvict(context.Background())
}

// applyRecordLocked publishes one committed record.
//
// REQUIRES: p.mu held for writing, p the record's partition.
func (b *Bucket) applyRecordLocked(p *partition, r *record) {
	if r.purge {
		if i, ok := p.mu.docs.find(r.key); ok && p.mu.docs.recs[i].bits()&recDeleted != 0 && p.mu.docs.recs[i].seq == r.seq {
			old, queued := p.mu.docs.remove(r.key)
			b.removed(p, old, queued)
			b.tombs.Add(-1)
			b.stats.metaPurged.Add(1)
		}
	} else {
		b.applyLocked(p, r.doc)
	}
	p.mu.durable = max(p.mu.durable, r.seq)
}

// dropPending forgets every version that was queued but will never reach
// disk (its commit failed): the committed versions stand, and sequence
// numbers go on from the last committed one. The flusher calls it when a
// commit fails, after failing every queued batch.
func (b *Bucket) dropPending() {
	lost := 0
	var counted []countedKey
	for _, p := range b.parts {
		p.mu.Lock()
		if len(p.mu.pending) > 0 && b.repl.applies.Load() {
			b.repl.lost.Store(true) // applied entries dropped: see replState.lost
		}
		lost += len(p.mu.acked)
		// What counted as live before (countedLiveLocked), to move the
		// counts back to the committed versions once the acknowledged
		// versions and queued expirations are forgotten.
		counted = counted[:0]
		for k := range p.mu.acked {
			counted = append(counted, countedKey{k, p.countedLiveLocked(k)})
		}
		for k := range p.mu.expiring {
			if p.mu.acked[k] == nil {
				counted = append(counted, countedKey{k, p.countedLiveLocked(k)})
			}
		}
		for k := range p.mu.acked {
			// A lock holds only until its holder's write, and a write
			// acknowledged was answered: its loss does not bring the
			// lock back on the version it replaced (lock.go).
			delete(p.mu.locks, k)
		}
		clear(p.mu.acked)
		// A queued expiration took the committed version's expiry entry
		// out at once (expireQueued), and a later write of the same key
		// may since have replaced it as the pending version: whatever is
		// pending now, a live committed version with an expiration gets
		// its entry back. Putting back an entry still there replaces it
		// in place, changing nothing.
		for k := range p.mu.pending {
			if i, ok := p.mu.docs.find(k); ok {
				if c := p.mu.docs.version(i); !c.deleted && c.exp != 0 {
					b.exps.update(k, 0, c.exp, c.size) // see expireQueued
				}
			}
		}
		clear(p.mu.pending)
		p.mu.npending = 0
		p.mu.expiring = nil
		for _, c := range counted {
			b.countedChange(p, c.k, c.was)
		}
		p.setSeqLocked(p.mu.durable)
		p.mu.Unlock()
	}
	b.changed() // a catch-up waiting for the lost writes (WaitCommitted) ends
	if lost > 0 {
		b.eng.log.Error("writes acknowledged from memory (durability none or majority) were lost: their commit failed", "bucket", b.name, "documents", lost)
	}
}

// countedKey is a key and whether it counted as live (countedLiveLocked)
// before a change.
type countedKey struct {
	k   docKey
	was bool
}

// expireQueued deletes k as an expiration if it is still live with the
// given expiration and has expired, and counts it in counter, without
// waiting for disk. It reports whether it expired the document. A document
// with a newer version on its way to disk is left alone: that version
// decides.
//
// The expiration leaves curr_items and its collection's count at once, not
// when its commit publishes it (applyLocked), so that a read that found the
// document expired answers with the counts already without it; its
// tombstone reaches the feed with its commit, and a query that must see
// every write made so far (stale=false, Consumer.HighSeqnos and WaitCommitted) waits for
// that commit. dropPending counts it back if the commit fails
// (countedLiveLocked).
func (b *Bucket) expireQueued(k docKey, expiration int64, counter *atomic.Int64) (*commitBatch, bool, error) {
	if r := b.replicator(); r != nil {
		b.expireOnAccess(r, k, expiration) // replexpiry.go
		return nil, false, nil
	}
	p := b.partitionFor(k.key)
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.isClosed() {
		return nil, false, ErrClosed
	}
	now := b.clock.Now()
	prev, err := b.expirableLocked(p, k, expiration, now)
	if prev == nil || err != nil {
		return nil, false, err
	}
	d := expirationOf(prev, now)
	b.stampLocked(p, k, prev, d, now)
	cb, _, err := b.queueExpirationLocked(p, k, prev, d, true)
	if err != nil {
		return nil, false, err
	}
	counter.Add(1)
	return cb, true, nil
}

// expirableLocked returns k's committed version if it is live with the
// given expiration and has expired at now, with no newer version on its
// way to disk (that version decides); else nil. An expiry entry that no
// longer matches the document is dropped.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) expirableLocked(p *partition, k docKey, expiration, now int64) (*Document, error) {
	prev := p.mu.docs.get(k)
	if prev == nil { // out of memory whole (evict.go): read it back
		var err error
		if prev, err = b.fetchMissLocked(p, k, false); err != nil {
			return nil, err
		}
	}
	if prev == nil || prev.Deleted || prev.Expiration != expiration {
		b.exps.update(k, expiration, 0, 0) // a stale entry: drop it
		return nil, nil
	}
	if !prev.ExpiredAt(now) || p.mu.pending[k] != nil {
		return nil, nil
	}
	return prev, nil
}

// expirationOf returns the tombstone that expires prev, a live document,
// at now.
func expirationOf(prev *Document, now int64) *Document {
	return &Document{Deleted: true, Expired: true, Expiration: prev.Expiration, DeletedAt: now, Type: prev.Type}
}

// queueExpirationLocked queues d, a stamped expiration of prev (the live
// version of k), as queueAtLocked does, with the accounting an expiration
// takes at once: it leaves curr_items and its collection's count (which
// applyLocked expects of an expiration) and its expiry entry goes, so that
// the pager's next batch does not step over it again while it waits for
// disk; dropPending puts both back if the commit fails.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) queueExpirationLocked(p *partition, k docKey, prev, d *Document, persist bool) (*commitBatch, bool, error) {
	cb, wait, err := b.queueAtLocked(p, k, prev, d, persist)
	if err != nil {
		return nil, false, err
	}
	b.exps.update(k, prev.Expiration, 0, 0)
	if p.mu.pending[k] == d { // committed inline, it is counted (applyLocked)
		was := p.countedLiveLocked(k)
		if p.mu.expiring == nil {
			p.mu.expiring = make(map[docKey]uint64)
		}
		p.mu.expiring[k] = d.Seq // until applyLocked publishes it
		b.countedChange(p, k, was)
	}
	return cb, wait, nil
}

// ExpireBatch purges up to limit documents that have expired by now, in
// expiry order, each as an expiration (a tombstone and a change-feed entry),
// counted as ExpiredPager. It returns how many it purged and whether more are
// due. Each document is one short critical section, so readers and writers
// are never held up for long. It does not wait for disk, so that group
// commit gathers the batch's tombstones into few transactions. Its purges
// are visible, and durable, once committed: call Sync to wait for that. A document whose expiration (or any
// other write) is still on its way to disk is stepped over, not counted.
// On a bucket whose writes are replicated it expires only the partitions
// this node leads, proposing the expirations and waiting until they are
// applied (replexpiry.go).
func (b *Bucket) ExpireBatch(ctx context.Context, limit int) (purged int, more bool, err error) {
	if err := b.WaitWarm(ctx); err != nil {
		return 0, false, err
	}
	if r := b.replicator(); r != nil {
		return b.expireBatchReplicated(ctx, r, limit) // replexpiry.go
	}
	return b.walkDue(ctx, b.clock.Now(), limit, func(it expItem) (bool, error) {
		_, ok, err := b.expireQueued(it.key, it.exp, &b.stats.expiredPager)
		return ok, err
	})
}

// walkDue calls take on the documents due by now, in expiry order, until
// take has counted limit of them (take says whether it counted one); it
// returns how many it counted and whether more are due. An error of take
// or ctx stops it.
func (b *Bucket) walkDue(ctx context.Context, now int64, limit int, take func(expItem) (bool, error)) (n int, more bool, err error) {
	var cursor *expItem
	for n < limit {
		want := limit - n + 1
		due := b.exps.dueAfter(now, cursor, want)
		for i := range due {
			if n == limit {
				return n, true, nil
			}
			if err := ctx.Err(); err != nil {
				return n, true, err
			}
			cursor = &due[i]
			ok, err := take(due[i])
			if err != nil {
				return n, true, err
			}
			if ok {
				n++
			}
		}
		if len(due) < want {
			return n, false, nil
		}
	}
	return n, b.exps.dueAfter(now, cursor, 1) != nil, nil
}

// Sync waits until every mutation made so far is on disk (at once for a
// bucket that keeps nothing on disk).
//
// Writes acknowledged from memory (durability none or majority) that wait
// for the flush interval are committed at once.
func (b *Bucket) Sync(ctx context.Context) error {
	return b.store.flushNow().wait(ctx)
}

// checkNewKey refuses a key no new document may have: one holding a NUL
// byte, which cuts the key short in C-based tools, logs and terminals, and
// in a collection other than the default one a key over
// MaxCollectionKeyLen bytes. It applies when a document is created, so a
// document stored with such a key before the rule can still be read,
// changed and deleted.
func checkNewKey(k docKey) error {
	if strings.IndexByte(k.key, 0) >= 0 {
		return fmt.Errorf("%w: key holds a NUL byte", ErrInvalidKey)
	}
	if k.cid != DefaultCollectionID && len(k.key) > MaxCollectionKeyLen {
		return fmt.Errorf("%w: key is %d bytes, the limit is %d outside the default collection", ErrInvalidKey, len(k.key), MaxCollectionKeyLen)
	}
	return nil
}
