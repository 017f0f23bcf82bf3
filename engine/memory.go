package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// The memory owner of a bucket accounts the bytes its documents hold in
// memory and enforces its ramQuota, as Couchbase's ep-engine does with its
// high- and low-water marks:
//
//   - memcached buckets evict whole items, least recently used first, once
//     mem_used passes the high-water mark, down to the low-water mark (an
//     evicted item is simply gone, as in memcached);
//   - ephemeral buckets with evictionPolicy noEviction refuse a write that
//     would take mem_used past the quota (ErrTempOOM); with nruEviction they
//     delete the documents not recently used, as memcached buckets evict
//     (a deletion, so view indexes and the change feed see it);
//   - couchbase buckets (valueOnly) eject the values of documents already
//     on disk, least recently used first, past the high-water mark and
//     down to the low-water mark: keys and metadata stay, the key's record
//     becomes metadata-only (recEjected; a Document made from it is
//     ejected), and a read of the value fetches it from the store
//     (fetch.go).
//
// The accounting is counters updated where versions are published,
// replaced, purged, dropped and evicted, never a walk: ep_kv_size sums each
// committed version's footprint (version.footprint: its record, key and
// resident value), and mem_used adds what the bucket keeps per item beside
// it (itemOverhead: its index slot and change-log entry), per expiry-index
// entry, and per LRU-queue entry.
//
// Least recently used is approximated with second chance (CLOCK): a key of
// an evicting bucket whose committed version is published joins the back of
// one FIFO queue per bucket, unless it is queued already (recQueued; a write
// of a queued key sets its referenced bit, recRef, as a read does);
// eviction takes keys from the front, gives a referenced one a second
// chance (clears its bit, puts it at the back) and evicts the others. The
// bits live in the key's record (table.go), the queue holds record
// numbers: no pointer. A read costs one atomic load (and an atomic or the
// first time), a write of a new key one append under the queue's own lock.
type memOwner struct {
	kv        atomic.Int64 // ep_kv_size: footprints of the committed versions
	tombKV    atomic.Int64 // the part of kv that tombstones hold
	quota     atomic.Int64 // ramQuota in bytes
	highWat   atomic.Int64 // high-water mark in bytes (BucketSettings.WaterMarks)
	lowWat    atomic.Int64 // low-water mark in bytes
	mode      atomic.Int32 // a memMode, from the bucket's type and evictionPolicy
	evictions atomic.Int64 // items evicted (evictions)
	ejects    atomic.Int64 // values ejected (ep_num_value_ejects)
	bgFetched atomic.Int64 // values read back from the store (ep_bg_fetched; fetchMissLocked too)
	// nonResident counts the live versions whose value is ejected, for
	// vb_active_perc_mem_resident.
	nonResident atomic.Int64
	tmpOOM      atomic.Int64 // writes refused by the quota (ep_tmp_oom_errors)
	// out counts the live documents out of memory whole (evict.go): they
	// count in curr_items, not in what memory holds per item.
	out atomic.Int64
	// tombsLow is, per partition, the lowest sequence number every
	// change-feed consumer had read when the last eviction pass began
	// (fullEviction): a tombstone at or below it may leave memory whole
	// (evictItemLocked). nil until the first pass.
	tombsLow atomic.Pointer[[]uint64]
	// shrinks counts the tables compacted once items left memory whole
	// (shrinkTables).
	shrinks atomic.Int64

	evicting sync.Mutex // one eviction pass at a time

	lru struct {
		sync.Mutex
		on bool // the bucket keeps the queue (see configure)
		// q is the second-chance FIFO, oldest at q[head]: each entry a
		// key's record (queueEntry). A key is queued once at most
		// (recQueued).
		q    []uint32
		head int
	}
	// limbo counts the records removed while queued: they wait for the
	// queue to let them go (reclaimLimbo) before they are reused.
	limbo atomic.Int64
	// slotBits is how many low bits of a queue entry hold the record
	// number; the partition's number is above them.
	slotBits int
	// queued is len(lru.q) - lru.head, kept for mem_used, which every write
	// of an evicting bucket reads, without taking lru's lock.
	queued atomic.Int64
}

// queueEntry returns the queue's entry for record slot of partition part:
// 4 bytes, the partition's number above the record's, which has the bits
// the bucket's partitions leave (22 with 1,024: four million records a
// partition). A record beyond them is not queued (ok false): a partition
// would hold that many keys only with more memory than a key's record and
// bytes take, many times over.
func (m *memOwner) queueEntry(part uint16, slot uint32) (uint32, bool) {
	if uint64(slot) >= 1<<m.slotBits {
		return 0, false
	}
	return uint32(uint64(part)<<m.slotBits) | slot, true
}

// splitEntry returns the partition and record number of queue entry e.
func (m *memOwner) splitEntry(e uint32) (int, uint32) {
	return int(uint64(e) >> m.slotBits), uint32(uint64(e) & (1<<m.slotBits - 1))
}

// memMode is what a bucket does when its memory passes the quota.
type memMode int32

const (
	memAccount memMode = iota // account only
	memEvict                  // remove least-recently-used items (memcached)
	memEject                  // eject least-recently-used values (couchbase valueOnly)
	memFull                   // take least-recently-used items out whole (couchbase fullEviction, evict.go)
	memDelete                 // delete least-recently-used documents (ephemeral nruEviction)
	memRefuse                 // refuse writes past the quota (ephemeral noEviction)
)

// Estimated heap bytes, beside a version's footprint (its record, key and
// resident value: version.footprint), per item (its hash-index slot,
// change-log entry and the arena's unfilled chunk tails: itemOverhead), per
// expiry-index entry (expOverhead) and per LRU-queue entry (lruOverhead).
// Arena bytes that replaced versions left behind are not counted: they are
// at most as many as the live ones, and go when a chunk is compacted, or
// as soon as no record uses their chunk (ejected values leave theirs so,
// in about the order they were written: table.go).
// BenchmarkHeapPerDoc measures the live heap against mem_used.
const (
	itemOverhead = 32
	expOverhead  = 96
	lruOverhead  = 4
)

// docFootprint is what version d counts in ep_kv_size: its record, key and
// resident value.
func docFootprint(d *Document) int64 { return versionOfDoc(d).footprint() }

// modeFor returns the memory mode of a bucket with settings s.
func modeFor(s BucketSettings) memMode {
	switch s.Type {
	case Memcached:
		return memEvict
	case Ephemeral:
		if s.EvictionPolicy == NRUEviction {
			return memDelete
		}
		return memRefuse
	case Couchbase:
		if s.EvictionPolicy == FullEviction {
			return memFull
		}
		return memEject
	}
	return memAccount
}

// evicts reports whether a bucket in mode m frees memory past the
// high-water mark (by eviction or ejection): it keeps the LRU queue and
// marks reads.
func (m memMode) evicts() bool { return m == memEvict || m == memDelete || m.ejects() }

// ejects reports whether a bucket in mode m keeps on disk what it takes
// out of memory (a couchbase bucket): values, or whole items with memFull;
// its tombstones stay in memory.
func (m memMode) ejects() bool { return m == memEject || m == memFull }

// configure applies a bucket's settings to the owner. It reports whether
// the queue was turned on or off (the bucket then queues, or unqueues,
// its keys: requeueAll).
func (m *memOwner) configure(s BucketSettings) bool {
	m.quota.Store(s.RAMQuotaMB << 20)
	high, low := s.WaterMarks()
	m.highWat.Store(high)
	m.lowWat.Store(low)
	m.mode.Store(int32(modeFor(s)))
	m.lru.Lock()
	defer m.lru.Unlock()
	// Only a bucket that evicts keeps the queue: 8 bytes a key that
	// nothing would read.
	on := modeFor(s).evicts()
	changed := on != m.lru.on
	m.lru.on = on
	return changed
}

// requeueAll makes the queue agree with lru.on after configure turned it
// on (every key with something to evict joins, oldest write first: in CAS
// order, which follows the writes across partitions) or off (the queue is
// dropped, the keys' bits cleared, and the records removed while queued
// freed).
func (b *Bucket) requeueAll() {
	m := &b.mem
	m.evicting.Lock()
	defer m.evicting.Unlock()
	m.lru.Lock()
	on := m.lru.on
	if !on {
		m.lru.q, m.lru.head = nil, 0
		m.queued.Store(0)
	}
	m.lru.Unlock()
	eject := memMode(m.mode.Load()).ejects()
	full := memMode(m.mode.Load()) == memFull // an ejected value's item can still leave whole
	type aged struct {
		cas uint64
		e   uint32
	}
	var add []aged
	for _, p := range b.parts {
		p.mu.Lock()
		t := &p.mu.docs
		for i := range t.recs {
			r := &t.recs[i]
			switch {
			case !on && t.freeQueued(uint32(i)):
				m.limbo.Add(-1)
			case !on:
				r.meta &^= recQueued | recRef
			case r.meta&recUsed == 0 || r.meta&recQueued != 0 || (r.meta&recEjected != 0 && !full) || (eject && !full && r.meta&recDeleted != 0):
			default:
				if e, ok := m.queueEntry(p.id, uint32(i)); ok {
					r.meta |= recQueued
					add = append(add, aged{r.cas, e})
				}
			}
		}
		p.mu.Unlock()
	}
	if len(add) == 0 {
		return
	}
	slices.SortFunc(add, func(a, b aged) int { return cmp.Compare(a.cas, b.cas) })
	m.lru.Lock()
	// Keys published since their partition was visited queued themselves
	// already: the older ones go before them.
	q := make([]uint32, 0, len(add)+len(m.lru.q)-m.lru.head)
	for _, a := range add {
		q = append(q, a.e)
	}
	m.lru.q, m.lru.head = append(q, m.lru.q[m.lru.head:]...), 0
	m.queued.Store(int64(len(m.lru.q)))
	m.lru.Unlock()
}

func (m *memOwner) high() int64 { return m.highWat.Load() }
func (m *memOwner) low() int64  { return m.lowWat.Load() }

// memUsed returns the bucket's mem_used: ep_kv_size plus the estimated
// overheads of its items, expiry entries and LRU queue.
func (b *Bucket) memUsed() int64 {
	items := b.currItems.Load() + b.tombs.Load() - b.mem.out.Load()
	return b.mem.kv.Load() + items*itemOverhead + int64(b.exps.len())*expOverhead + b.mem.queued.Load()*lruOverhead
}

// evictable returns the part of mem_used that eviction can free: all of it
// for a memcached bucket, whose tombstones are evicted too; for an ephemeral
// one with nruEviction, all but its tombstones', which eviction makes and
// only the metadata purge removes (else, with small documents, deleting
// every document would not bring mem_used down to the low-water mark).
func (b *Bucket) evictable() int64 {
	used := b.memUsed()
	if memMode(b.mem.mode.Load()) == memDelete {
		used -= b.mem.tombKV.Load() + b.tombs.Load()*itemOverhead
	}
	return used
}

// published accounts for cur replacing old as the committed version of a
// key (either may be absent: ok false), cur held by record slot of p, and
// queues the key for eviction.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) published(p *partition, slot uint32, old, cur version) {
	b.countLive(p, old, cur)
	b.replaced(p, slot, old, cur)
}

// replaced is published without the live counts (curr_items, the
// collections'): the partition's counts of documents and tombstones and
// what memory holds. A commit (applyLocked) moves the live counts by what
// reads see instead (countedLiveLocked).
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) replaced(p *partition, slot uint32, old, cur version) {
	p.countLocked(old, -1)
	p.countLocked(cur, 1)
	b.held(p, slot, old, cur)
}

// held is published's account of memory alone: cur, in record slot of p,
// takes old's place in memory (either may be absent), and the key joins
// the eviction queue. The counts of documents are published's: a whole
// item leaving memory or coming back (evict.go) changes no count.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) held(p *partition, slot uint32, old, cur version) {
	if cur.ok && p.mu.bloom != nil {
		p.mu.bloom.add(p.mu.docs.key(slot))
	}
	m := &b.mem
	m.kv.Add(cur.footprint() - old.footprint())
	if old.ok && old.deleted {
		m.tombKV.Add(-old.footprint())
	}
	if cur.ok && cur.deleted {
		m.tombKV.Add(cur.footprint())
	}
	if old.ok && old.ejected && !old.deleted {
		m.nonResident.Add(-1)
	}
	if !cur.ok {
		return
	}
	if cur.ejected {
		m.nonResident.Add(1)
		if memMode(m.mode.Load()) != memFull {
			return // nothing left to eject (fullEviction: the item can still leave)
		}
	}
	if memMode(m.mode.Load()) == memEject && cur.deleted {
		return // a tombstone has no value to eject (fullEviction: it can leave whole)
	}
	r := &p.mu.docs.recs[slot]
	if r.meta&recQueued != 0 {
		if cur.deleted && memMode(m.mode.Load()) == memEvict {
			// A memcached bucket's delete: nothing to keep, so no second
			// chance (evictTombstones takes its tombstone first anyway).
			r.meta &^= recRef
			return
		}
		r.meta |= recRef // rewritten: recently used
		return
	}
	e, ok := m.queueEntry(p.id, slot)
	if !ok {
		return
	}
	m.lru.Lock()
	if m.lru.on {
		r.meta |= recQueued
		m.lru.q = append(m.lru.q, e)
		m.queued.Store(int64(len(m.lru.q) - m.lru.head))
	}
	m.lru.Unlock()
}

// removed accounts for the removal of a key's committed version old from
// memory; queued says its record was queued (it now waits in limbo).
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) removed(p *partition, old version, queued bool) {
	b.published(p, 0, old, version{})
	if queued {
		b.mem.limbo.Add(1)
	}
}

// pop takes up to n keys from the front of the queue.
func (m *memOwner) pop(n int, out []uint32) []uint32 {
	m.lru.Lock()
	defer m.lru.Unlock()
	end := min(m.lru.head+n, len(m.lru.q))
	out = append(out, m.lru.q[m.lru.head:end]...)
	m.lru.head = end
	if m.lru.head == len(m.lru.q) {
		m.lru.q = m.lru.q[:0]
		m.lru.head = 0
	} else if m.lru.head >= 1024 && m.lru.head > len(m.lru.q)/2 {
		m.lru.q = m.lru.q[:copy(m.lru.q, m.lru.q[m.lru.head:])]
		m.lru.head = 0
	}
	m.queued.Store(int64(len(m.lru.q) - m.lru.head))
	return out
}

// requeue puts keys given a second chance at the back of the queue.
func (m *memOwner) requeue(es []uint32) {
	if len(es) == 0 {
		return
	}
	m.lru.Lock()
	m.lru.q = append(m.lru.q, es...)
	m.queued.Store(int64(len(m.lru.q) - m.lru.head))
	m.lru.Unlock()
}

// touch marks k's committed version of p as recently used.
func (b *Bucket) touch(p *partition, k docKey) {
	if !memMode(b.mem.mode.Load()).evicts() {
		return
	}
	p.mu.RLock()
	if i, ok := p.mu.docs.find(k); ok {
		p.mu.docs.touch(i)
	}
	p.mu.RUnlock()
}

// checkQuota refuses a write of an ephemeral noEviction bucket that would
// grow mem_used past the quota: growth is the new version's footprint less
// the one it replaces, so deletes, and writes that shrink, always pass.
//
// A bucket that evicts items (memcached, ephemeral nruEviction) refuses a
// write of an item that alone needs more memory than the low-water mark:
// eviction runs down to that mark, so it would take the item out with
// every other one, the write acknowledged and then gone and the cache
// emptied. It is refused as too large (ErrValueTooLarge), as memcached
// refuses an item it cannot hold ("object too large for cache").
func (b *Bucket) checkQuota(old, d *Document) error {
	switch mode := memMode(b.mem.mode.Load()); {
	case (mode == memEvict || mode == memDelete) && !d.Deleted:
		if need := docFootprint(d) + itemOverhead + lruOverhead; need > b.mem.low() {
			return fmt.Errorf("%w: the document needs %d bytes of memory, more than bucket %s keeps after an eviction (its low-water mark, %d bytes of its %d MiB quota); raise ramQuotaMB or mem_low_wat", ErrValueTooLarge, need, b.name, b.mem.low(), b.mem.quota.Load()>>20)
		}
		return nil
	case mode != memRefuse:
		return nil
	}
	growth := docFootprint(d) - docFootprint(old)
	if old == nil {
		growth += itemOverhead // (a refusing bucket keeps no queue)
	}
	// An expiration adds an entry to the expiry index (a touch, a write
	// that sets one), and taking it away frees one.
	growth += (expEntry(d) - expEntry(old)) * expOverhead
	if growth <= 0 || b.memUsed()+growth <= b.mem.quota.Load() {
		return nil
	}
	b.mem.tmpOOM.Add(1)
	return errTempOOM(b.name, b.mem.quota.Load())
}

// expEntry is 1 when d, a key's newest version, holds an entry in the
// expiry index (a live version with an expiration), else 0.
func expEntry(d *Document) int64 {
	if d == nil || d.Deleted || d.Expiration == 0 {
		return 0
	}
	return 1
}

// maybeEvict runs an eviction pass when the bucket evicts and mem_used is
// past the high-water mark, and lets go of the records removed while
// queued once they are many. Writers call it after publishing, holding no
// lock; a writer that finds a pass running leaves the work to it.
func (b *Bucket) maybeEvict(ctx context.Context) {
	mode := memMode(b.mem.mode.Load())
	limbo := b.mem.limbo.Load()
	reclaim := limbo >= 1024 && limbo > (b.currItems.Load()+b.tombs.Load())/2
	if !reclaim && (!mode.evicts() || b.evictable() <= b.mem.high()) {
		return
	}
	if !b.mem.evicting.TryLock() {
		return
	}
	defer b.mem.evicting.Unlock()
	if reclaim {
		b.reclaimLimbo()
	}
	if mode.evicts() && b.evictable() > b.mem.high() {
		b.evictTo(ctx, b.mem.low())
		if mode == memFull {
			b.shrinkTables() // give back the records and index slots of items gone
		}
	}
}

// reclaimLimbo takes out of the queue the records removed while queued,
// and frees them for reuse, keeping the others' order.
//
// REQUIRES: b.mem.evicting held.
func (b *Bucket) reclaimLimbo() {
	m := &b.mem
	m.lru.Lock()
	q := m.lru.q[m.lru.head:]
	m.lru.q, m.lru.head = nil, 0
	m.lru.Unlock()
	kept := q[:0]
	for _, e := range q {
		part, slot := m.splitEntry(e)
		p := b.parts[part]
		p.mu.Lock()
		freed := p.mu.docs.freeQueued(slot)
		p.mu.Unlock()
		if freed {
			m.limbo.Add(-1)
		} else {
			kept = append(kept, e)
		}
	}
	m.lru.Lock()
	m.lru.q = append(kept, m.lru.q...)
	m.queued.Store(int64(len(m.lru.q)))
	m.lru.Unlock()
}

// evictTo evicts least-recently-used items until what eviction can free
// (evictable) is at most target, or nothing more can go (every queued
// key was visited twice).
//
// REQUIRES: b.mem.evicting held.
func (b *Bucket) evictTo(ctx context.Context, target int64) {
	b.mem.lru.Lock()
	budget := 2*(len(b.mem.lru.q)-b.mem.lru.head) + 64
	b.mem.lru.Unlock()
	if memMode(b.mem.mode.Load()) == memFull {
		low := b.consumedUpTo()
		b.mem.tombsLow.Store(&low)
	}
	if memMode(b.mem.mode.Load()) == memEvict {
		b.evictTombstones(ctx, target)
	}
	var batch, again []uint32
	for b.evictable() > target && budget > 0 && ctx.Err() == nil {
		batch = b.mem.pop(64, batch[:0])
		if len(batch) == 0 {
			return
		}
		again = again[:0]
		for _, e := range batch {
			budget--
			if part, slot := b.mem.splitEntry(e); b.evictEntry(b.parts[part], slot) {
				again = append(again, e)
			}
		}
		b.mem.requeue(again)
	}
}

// evictTombstones frees a memcached bucket's tombstones (of its deletes,
// its flushes, its expirations) before any live item is evicted, as
// memcached frees a deleted item's memory at once: a bucket emptied by
// deletes then keeps every new item that fits, rather than evicting the new
// items queued behind the tombstones. It stops once what eviction can free
// is at most target. A tombstone so freed is not an eviction.
//
// REQUIRES: b.mem.evicting held.
func (b *Bucket) evictTombstones(ctx context.Context, target int64) {
	for _, p := range b.parts {
		if b.tombs.Load() <= 0 || b.evictable() <= target || ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		t := &p.mu.docs
		for i := 0; i < len(t.recs) && p.mu.tombs > 0; i++ {
			if t.recs[i].bits()&(recUsed|recDeleted) == recUsed|recDeleted {
				b.evictLocked(p, uint32(i))
			}
		}
		p.mu.Unlock()
	}
}

// evictEntry visits record i of p, just taken from the front of the queue:
// a record removed while queued is freed; a referenced one gets its second
// chance (it reports true: put it back); the others are evicted, or have
// their value ejected.
func (b *Bucket) evictEntry(p *partition, i uint32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := &p.mu.docs
	if t.freeQueued(i) {
		b.mem.limbo.Add(-1)
		return false
	}
	if int(i) >= len(t.recs) {
		return false // (no entry names a record past the table: shrinkTables maps them)
	}
	r := &t.recs[i]
	if r.meta&recQueued == 0 {
		return false
	}
	if r.meta&recRef != 0 {
		r.meta &^= recRef
		return true
	}
	r.meta &^= recQueued
	switch memMode(b.mem.mode.Load()) {
	case memFull:
		// The item leaves whole; one that cannot yet (the warm-up runs,
		// a pass over the keys, a write on its way, a tombstone a
		// consumer has yet to read) gives up its value, and stays queued
		// to leave later.
		switch {
		case b.evictItemLocked(p, i) || b.ejectLocked(p, i):
			b.mem.ejects.Add(1)
		case r.meta&recUsed != 0:
			r.meta |= recQueued
			return true
		}
	case memEject:
		if b.ejectLocked(p, i) {
			b.mem.ejects.Add(1)
		}
	default:
		// A tombstone freed is no eviction: memcached counts only the
		// live items it takes (a memcached bucket's tombstones).
		tomb := r.meta&recDeleted != 0
		if b.evictLocked(p, i) && !tomb {
			b.mem.evictions.Add(1)
		}
	}
	return false
}

// evictLocked evicts the version of record i of p if nothing newer is on
// its way to the store: a memcached bucket's item leaves memory outright;
// an ephemeral bucket's live document is deleted (a tombstone, so views
// and the change feed see it go). It reports whether it evicted.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) evictLocked(p *partition, i uint32) bool {
	k := p.mu.docs.key(i)
	if p.mu.pending[k] != nil || b.isClosed() {
		return false
	}
	if memMode(b.mem.mode.Load()) == memDelete {
		if b.localWritesOff() {
			return false // a replicated ephemeral bucket's deletion is not replicated yet
		}
		d := p.mu.docs.doc(i)
		if d.Deleted {
			return false // a tombstone waits for the metadata purge
		}
		now := b.clock.Now()
		_, err := b.publishLocked(p, k, d, &Document{Deleted: true, DeletedAt: now, Type: d.Type}, now)
		return err == nil
	}
	old, queued := p.mu.docs.remove(k)
	if old.deleted {
		b.tombs.Add(-1)
	} else {
		b.currItems.Add(-1)
		b.exps.update(k, old.exp, 0, 0)
	}
	b.removed(p, old, queued)
	return true
}

// ejectLocked ejects the value of record i of p if it is live, resident,
// with nothing newer on its way to the store, and on disk: the record keeps
// its metadata and key (a version that readers hold keeps its value). It
// reports whether it ejected.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) ejectLocked(p *partition, i uint32) bool {
	t := &p.mu.docs
	r := &t.recs[i]
	if r.meta&(recDeleted|recEjected|recNilValue) != 0 || r.valueLen == 0 || b.isClosed() ||
		!b.store.st.durable() || r.seq > p.mu.durable {
		return false // an empty value frees nothing
	}
	if len(p.mu.pending) > 0 && p.mu.pending[t.key(i)] != nil {
		return false
	}
	old := t.version(i)
	t.eject(i)
	b.published(p, i, old, t.version(i))
	return true
}

// ejectAtWarmup reports whether live version d, loaded from the store at
// warm-up, joins memory without its value: once a bucket that ejects
// values has loaded values up to its low-water mark, as Couchbase's
// warm-up stops loading values there. A valueOnly bucket keeps every key
// and its metadata, so room is kept for those of the keys still to load
// (the store's estimate of its keys less those loaded, each about d's
// metadata): Couchbase loads the keys first and the values after, while
// under the low-water mark, so a bucket whose metadata alone passes that
// mark loads no value it would eject when the load ends.
func (b *Bucket) ejectAtWarmup(d *Document) bool {
	mode := memMode(b.mem.mode.Load())
	if !mode.ejects() || d.Deleted || len(d.Value) == 0 {
		return false
	}
	need := b.memUsed() + docFootprint(d) + itemOverhead
	if mode == memEject {
		w := &b.warmup
		if rest := w.estimated.Load() - w.keys.Load() - 1; rest > 0 {
			need += rest * (docFootprint(d.withoutValue()) + itemOverhead)
		}
	}
	return need > b.mem.low()
}

// residentPct is vb_active_perc_mem_resident: the percentage of live
// documents whose value is in memory (100 for an empty bucket).
func (b *Bucket) residentPct() int64 {
	items := b.currItems.Load()
	if items <= 0 {
		return 100
	}
	return (items - min(b.mem.nonResident.Load(), items)) * 100 / items
}
