package engine

import (
	"context"
	"errors"
	"fmt"
)

// Whole items out of memory, as Couchbase's fullEviction takes them: a
// live document's record (key, metadata and value) leaves its partition's
// table once its version is on disk, while its counts (curr_items, the
// partition's and the collection's), its expiry entry and its key in the
// partition's Bloom filter stay. What needs the record then reads the
// store:
//
//   - a read, a write, a lock of a key memory does not hold asks the
//     partition's filter, and reads the store only if the filter says the
//     key may be there (fetchMissLocked); the version read goes back into
//     the table (restoreItemLocked), uncounted: it was counted all along;
//   - the expiry pager finds due documents in the expiry index, which
//     keeps the evicted ones' entries, and reads them back to expire them;
//   - the change feed's log entries of an evicted record lead nowhere, so
//     a cursor before the partition's evictedMax reads the partition's
//     documents from the store first (a backfill: feedBackfill), up to a
//     snapshot of its committed sequence number, then goes on from the log.
//
// Tombstones leave too, once every change-feed consumer has read them
// (the consumers' positions when the eviction pass began: tombsLow), as the
// metadata purge's rule is; the filter keeps their keys, so a delete's or
// a write's CAS check, _changes and the feeds' backfill find them in the
// store, and the metadata purge puts the ones it removes back first
// (tombstonesIn).

// itemsResident reports whether memory holds every key the bucket stores:
// the warm-up is done and no item has left memory whole.
func (b *Bucket) itemsResident() bool {
	return b.warm() && !b.itemsOut.Load()
}

// evictItemLocked takes record i of p out of memory whole, if it is a
// live document, or a tombstone every change-feed consumer has read
// (tombsLow), whose version is on disk, with nothing on its way to disk
// or acknowledged from memory, not locked, in a bucket whose warm-up is
// done and which keeps Bloom filters (a miss must find it again). It
// reports whether it did.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) evictItemLocked(p *partition, i uint32) bool {
	t := &p.mu.docs
	r := &t.recs[i]
	m := r.bits()
	if m&recUsed == 0 || r.seq > p.mu.durable || p.mu.bloom == nil ||
		!b.store.st.durable() || b.isClosed() || !b.warm() || b.passes.Load() > 0 {
		return false
	}
	if m&recDeleted != 0 {
		low := b.mem.tombsLow.Load()
		if low == nil || int(p.id) >= len(*low) || r.seq > (*low)[p.id] {
			return false // a consumer has yet to read it: it would backfill
		}
	}
	k := t.key(i)
	if len(p.mu.pending) > 0 && p.mu.pending[k] != nil {
		return false
	}
	if len(p.mu.acked) > 0 && p.mu.acked[k] != nil {
		return false
	}
	if _, locked := p.mu.locks[k]; locked {
		return false
	}
	old, queued := t.remove(k)
	b.held(p, 0, old, version{})
	if !old.deleted {
		b.mem.nonResident.Add(1) // still a live document: now without its value in memory
	}
	b.mem.out.Add(1)
	if queued {
		b.mem.limbo.Add(1)
	}
	p.mu.evictedMax = max(p.mu.evictedMax, old.seq)
	p.mu.evictedCAS = max(p.mu.evictedCAS, old.cas)
	b.itemsOut.Store(true)
	return true
}

// restoreItemLocked puts d, k's version read from the store after it left
// memory whole, back into p's table, with its value while the bucket is
// below its high-water mark, without counting it again.
//
// REQUIRES: p.mu held for writing, memory holding no version of d's key.
func (b *Bucket) restoreItemLocked(p *partition, d *Document) {
	k := docKey{cid: d.Collection, key: d.Key}
	in := d
	if !d.Deleted && len(d.Value) > 0 && b.memUsed()+docFootprint(d)+itemOverhead > b.mem.high() {
		in = d.withoutValue()
	}
	slot, old := p.mu.docs.put(k, in)
	cur := p.mu.docs.version(slot)
	b.held(p, slot, old, cur)
	b.mem.out.Add(-1)
	if cur.live() {
		b.mem.nonResident.Add(-1) // counted non-resident while out of memory
	}
}

// allKeysIn puts back into memory every stored document of the collections
// cids that left memory whole, and keeps items from leaving until release
// is called, so that a pass over memory's keys (a collection drop, Flush,
// a TTL re-evaluation) sees every document. It does nothing while memory
// holds every key. Memory may pass the quota until the pass ends and the
// eviction catches up.
func (b *Bucket) allKeysIn(ctx context.Context, cids []CollectionID) (release func(), err error) {
	return b.keysIn(ctx, cids, nil)
}

// keysIn is allKeysIn for the keys of partition only (of every partition
// when only is nil): a pass over one partition's keys (a replication
// snapshot, or its restore) puts back that partition's stored documents
// only, although it reads every key of the collections from the store.
func (b *Bucket) keysIn(ctx context.Context, cids []CollectionID, only *partition) (release func(), err error) {
	b.passes.Add(1)
	release = func() { b.passes.Add(-1) }
	// An eviction that saw no pass yet ends under its partition's lock
	// (evictItemLocked): once it is taken, itemsResident counts it.
	for _, p := range b.parts {
		if only == nil || p == only {
			p.mu.Lock()
			p.mu.Unlock() // nothing to do under it: taking it is the wait
		}
	}
	if b.itemsResident() {
		return release, nil
	}
	for _, cid := range cids {
		for key, err := range b.store.st.keys(cid, keyRange{}) {
			if err == nil {
				err = ctx.Err()
			}
			if err == nil {
				p := b.partitionFor(key)
				if only != nil && p != only {
					continue
				}
				p.mu.Lock()
				_, err = b.fetchMissLocked(p, docKey{cid: cid, key: key}, false)
				p.mu.Unlock()
			}
			if err != nil {
				release()
				if !errors.Is(err, ErrStorage) && !errors.Is(err, ErrClosed) && ctx.Err() == nil {
					err = fmt.Errorf("%w: read keys: %w", ErrStorage, err)
				}
				return func() {}, err
			}
		}
	}
	return release, nil
}

// fetchMissLocked is the read of a key that memory does not hold while
// memory may not hold every key (the warm-up runs, or items left memory
// whole): it reads the key's stored version, unless the partition's Bloom
// filter rules the key out, and puts it into memory (loadDocLocked during
// the warm-up, restoreItemLocked after), so that reads and writes see what
// the store holds rather than nothing. It returns the committed version of
// k (nil when neither memory nor the store holds one, and always nil while
// memory holds every key: it reads nothing then).
//
// A read is counted as Couchbase counts its background fetches: in
// ep_bg_fetched when the caller wants the document with its value (a get,
// a touch, a lock), in ep_bg_meta_fetched when it needs the metadata only
// (a write or a delete that replaces the value, an unlock, the expiry
// pager, an administrative pass). The store reads the whole record either
// way; the counts say what the caller asked for.
//
// REQUIRES: p.mu held for writing, p k's partition.
func (b *Bucket) fetchMissLocked(p *partition, k docKey, value bool) (*Document, error) {
	warm := b.warm()
	d, stored := b.missLocked(p, k)
	if !stored {
		return d, nil
	}
	d, err := b.fetchStored(k)
	switch {
	case err == nil:
		b.countFetch(value)
		if warm || b.warmup.scan.passed(k) { // counted already (warmkeys.go)
			b.restoreItemLocked(p, d)
		} else {
			b.loadDocLocked(p, d)
		}
		return d, nil
	case errors.Is(err, ErrNotFound):
		return nil, nil
	default:
		return nil, err
	}
}

// missLocked is fetchMissLocked's look in memory: the version of k memory
// holds, or stored, when fetchMissLocked would read the store for k (the
// key is not in memory, memory may not hold every key, and the Bloom
// filter does not rule it out). A miss the filter rules out is counted
// here.
//
// REQUIRES: p.mu held for writing, p k's partition.
func (b *Bucket) missLocked(p *partition, k docKey) (d *Document, stored bool) {
	if b.warm() && !b.itemsOut.Load() {
		return nil, false
	}
	if d := p.mu.docs.get(k); d != nil {
		return d, false
	}
	if _, ok := p.mu.pending[k]; ok {
		return nil, false // a new key on its way to disk: the store holds no older version
	}
	if f := p.mu.bloom; f != nil && b.bloom.ready.Load() && !f.mayHave(k) {
		b.bloom.negatives.Add(1)
		return nil, false // the store holds no version of k: a miss costs no read
	}
	return nil, true
}

// mayBeStored reports whether the store may hold k, which memory did not
// hold when the caller looked, by p's Bloom filter, under p's read lock:
// false is a miss that reads nothing (a version published since the caller
// looked is in the filter; one acknowledged from memory and not yet
// published is in acked).
func (b *Bucket) mayBeStored(p *partition, k docKey) bool {
	p.mu.RLock()
	f := p.mu.bloom
	out := f != nil && b.bloom.ready.Load() && (len(p.mu.acked) == 0 || p.mu.acked[k] == nil) && !f.mayHave(k)
	p.mu.RUnlock()
	return !out
}

// readMiss is fetchMissLocked for a reader that found nothing under p's
// read lock: nil at once if memory held every key before the reader looked
// (resident, itemsResident read before the look). Otherwise memory is looked
// in again: the warm-up may have loaded k, and finished, since the look.
func (b *Bucket) readMiss(ctx context.Context, p *partition, k docKey, touch, resident bool) (*Document, error) {
	if resident {
		return nil, nil
	}
	if !b.mayBeStored(p, k) {
		b.bloom.negatives.Add(1)
		return nil, nil
	}
	p.mu.Lock()
	d := p.mu.docs.get(k)
	var err error
	if d == nil {
		if d, err = b.fetchMissLocked(p, k, true); d != nil {
			// The item came back into memory: a pass of reads alone
			// would otherwise take the bucket past its quota, as no
			// write comes to evict (run once the reader has its
			// version, which the pass may take out again).
			defer b.maybeEvict(ctx)
		}
	}
	p.mu.Unlock()
	if err != nil || d == nil || !d.ejected {
		return d, err
	}
	// Memory held the key since the caller looked, without its value:
	// read it as any committed version, its value read back (a reader
	// must never get an ejected version).
	return b.readCommitted(ctx, p, k, touch)
}

// countFetch counts a record read from the store because memory did not
// hold it: in ep_bg_fetched when the reader wanted its value, else in
// ep_bg_meta_fetched (fetchMissLocked).
func (b *Bucket) countFetch(value bool) {
	if value {
		b.mem.bgFetched.Add(1)
	} else {
		b.bloom.metaFetched.Add(1)
	}
}

// shrinkTables compacts the tables of the partitions whose records are
// mostly free once items left memory whole (docTable.sparse): their
// records are renumbered into a slice of their size and their index
// rebuilt for them (compactRecs), their change logs rebuilt, and the LRU
// queue's entries of their records mapped to the new numbers in one pass
// over the queue for all of them (the records removed while queued are
// freed, their entries dropped). It reports how many tables it compacted.
//
// Between a table's compaction and the queue's pass, the queue's entries
// of that table that were there before it (below mark) hold old numbers;
// nothing reads them meanwhile, as only an eviction pass takes entries
// from the queue and the caller is one, and writers only append.
//
// REQUIRES: b.mem.evicting held.
func (b *Bucket) shrinkTables() int {
	m := &b.mem
	type shrunk struct {
		remap []uint32
		mark  int // the queue's length when the table was compacted
	}
	var done map[int]shrunk
	for _, p := range b.parts {
		p.mu.Lock()
		if !p.mu.docs.sparse() {
			p.mu.Unlock()
			continue
		}
		remap, limbo := p.mu.docs.compactRecs()
		m.limbo.Add(-int64(limbo))
		p.rebuildLogLocked()
		m.lru.Lock()
		mark := len(m.lru.q)
		m.lru.Unlock()
		p.mu.Unlock()
		if done == nil {
			done = make(map[int]shrunk)
		}
		done[int(p.id)] = shrunk{remap, mark}
	}
	if len(done) == 0 {
		return 0
	}
	m.lru.Lock()
	q := m.lru.q
	w := m.lru.head
	for i := m.lru.head; i < len(q); i++ {
		e := q[i]
		part, slot := m.splitEntry(e)
		if s, ok := done[part]; ok && i < s.mark && int(slot) < len(s.remap) {
			n := s.remap[slot]
			if n == 0 {
				continue // a record removed while queued: freed
			}
			e, _ = m.queueEntry(uint16(part), n-1) // (a lower number: it fits)
		}
		q[w] = e
		w++
	}
	m.lru.q = q[:w]
	m.queued.Store(int64(w - m.lru.head))
	m.lru.Unlock()
	m.shrinks.Add(int64(len(done)))
	return len(done)
}
