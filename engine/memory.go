package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"unsafe"
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
//     down to the low-water mark: keys and metadata stay, a metadata-only
//     copy (Document.ejected) replaces the version in memory, and a read of
//     the value fetches it from the store (fetch.go).
//
// The accounting is counters updated where versions are published,
// replaced, purged, dropped and evicted, never a walk: ep_kv_size sums each
// committed version's footprint (docFootprint), and mem_used adds what the
// bucket keeps per item beside it (itemOverhead: its map slot and change-log
// entry), per expiry-index entry, and per LRU-queue entry.
//
// Least recently used is approximated with second chance (CLOCK): every
// published version of an evicting bucket joins the back of one FIFO queue
// per bucket; a read sets the version's referenced bit; eviction takes
// versions from the front, skips those no longer current, gives a referenced
// one a second chance (clears its bit, puts it at the back) and evicts the
// others. A read costs one atomic load (and a store the first time), a
// write one append under the queue's own lock.
type memOwner struct {
	kv        atomic.Int64 // ep_kv_size: footprints of the committed versions
	tombKV    atomic.Int64 // the part of kv that tombstones hold
	quota     atomic.Int64 // ramQuota in bytes
	mode      atomic.Int32 // a memMode, from the bucket's type and evictionPolicy
	evictions atomic.Int64 // items evicted (evictions)
	ejects    atomic.Int64 // values ejected (ep_num_value_ejects)
	bgFetched atomic.Int64 // values read back from the store (ep_bg_fetched)
	// nonResident counts the live versions whose value is ejected, for
	// vb_active_perc_mem_resident.
	nonResident atomic.Int64
	tmpOOM      atomic.Int64 // writes refused by the quota (ep_tmp_oom_errors)

	evicting sync.Mutex // one eviction pass at a time

	lru struct {
		sync.Mutex
		on   bool        // the bucket keeps the queue (see configure)
		q    []*Document // second-chance FIFO: oldest at q[head]
		head int
	}
	// queued is len(lru.q) - lru.head, kept for mem_used, which every write
	// of an evicting bucket reads, without taking lru's lock.
	queued atomic.Int64
}

// memMode is what a bucket does when its memory passes the quota.
type memMode int32

const (
	memAccount memMode = iota // account only
	memEvict                  // remove least-recently-used items (memcached)
	memEject                  // eject least-recently-used values (couchbase valueOnly)
	memDelete                 // delete least-recently-used documents (ephemeral nruEviction)
	memRefuse                 // refuse writes past the quota (ephemeral noEviction)
)

// Water marks, as fractions of the quota (Couchbase's defaults).
const (
	highWaterPct = 85
	lowWaterPct  = 75
)

// Estimated heap bytes, beside a version's footprint, per item (its map
// slot, change-log entry and allocation rounding: itemOverhead), per
// expiry-index entry (expOverhead) and per LRU-queue entry (lruOverhead).
// BenchmarkHeapPerDoc measures the live heap against mem_used: for 100,000
// small documents, 328 of 331 bytes a document (ephemeral) and 328 of 335
// (couchbase, whose versions join the LRU queue since value eviction).
const (
	itemOverhead = 128
	expOverhead  = 64
	lruOverhead  = 8
)

// docSize is the size of a Document's fixed part.
const docSize = int64(unsafe.Sizeof(Document{}))

// docFootprint is what a version counts in ep_kv_size: its metadata, key and
// value.
func docFootprint(d *Document) int64 {
	if d == nil {
		return 0
	}
	return docSize + int64(len(d.Key)) + int64(cap(d.Value))
}

// Bits of Document.lru.
const (
	lruRef  = 1 // read since it last joined the queue
	lruGone = 2 // no longer the committed version of its key
)

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
		// fullEviction is refused for new settings (Validate); a bucket
		// stored with it before ejects values as valueOnly does.
		return memEject
	}
	return memAccount
}

// evicts reports whether a bucket in mode m frees memory past the
// high-water mark (by eviction or ejection): it keeps the LRU queue and
// marks reads.
func (m memMode) evicts() bool { return m == memEvict || m == memDelete || m == memEject }

// configure applies a bucket's settings to the owner.
func (m *memOwner) configure(s BucketSettings) {
	m.quota.Store(s.RAMQuotaMB << 20)
	m.mode.Store(int32(modeFor(s)))
	m.lru.Lock()
	// Ephemeral and memcached buckets keep it whatever their policy
	// (noEviction's mem_used counts its entries); a couchbase bucket keeps
	// it to eject values.
	m.lru.on = s.Type != Couchbase || modeFor(s) == memEject
	m.lru.Unlock()
}

func (m *memOwner) high() int64 { return m.quota.Load() * highWaterPct / 100 }
func (m *memOwner) low() int64  { return m.quota.Load() * lowWaterPct / 100 }

// memUsed returns the bucket's mem_used: ep_kv_size plus the estimated
// overheads of its items, expiry entries and LRU queue.
func (b *Bucket) memUsed() int64 {
	items := b.currItems.Load() + b.tombs.Load()
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

// published accounts for d replacing old as the committed version of its
// key (either may be nil) and queues d for eviction.
//
// REQUIRES: the key's partition lock held for writing.
func (b *Bucket) published(old, d *Document) {
	b.countLive(old, d)
	m := &b.mem
	m.kv.Add(docFootprint(d) - docFootprint(old))
	if old != nil {
		old.lru.Or(lruGone)
		if old.Deleted {
			m.tombKV.Add(-docFootprint(old))
		}
	}
	if d != nil && d.Deleted {
		m.tombKV.Add(docFootprint(d))
	}
	if old != nil && old.ejected && !old.Deleted {
		m.nonResident.Add(-1)
	}
	if d == nil {
		return
	}
	if d.ejected {
		m.nonResident.Add(1)
		return // nothing left to eject
	}
	if memMode(m.mode.Load()) == memEject && d.Deleted {
		return // a tombstone has no value to eject
	}
	m.lru.Lock()
	if m.lru.on {
		m.lru.q = append(m.lru.q, d)
		m.compactLocked(b.currItems.Load() + b.tombs.Load())
		m.queued.Store(int64(len(m.lru.q) - m.lru.head))
	}
	m.lru.Unlock()
}

// compactLocked drops the queue's versions that are no longer current once
// they must outnumber the current ones — the queue holds at most one current
// version a key, so more than twice the bucket's items means over half are
// replaced — and the popped front when it outgrows the rest. Replaced
// versions thus neither pile up behind the queue (it stays under twice the
// items) nor stay alive because of it, and the whole-queue pass runs only
// after the queue doubled: amortized, a constant cost per write.
//
// REQUIRES: m.lru held.
func (m *memOwner) compactLocked(items int64) {
	n := len(m.lru.q) - m.lru.head
	if n < 1024 || (int64(n) <= 2*items && m.lru.head < n) {
		return
	}
	kept := m.lru.q[:0]
	for _, d := range m.lru.q[m.lru.head:] {
		if d.lru.Load()&lruGone == 0 {
			kept = append(kept, d)
		}
	}
	clear(m.lru.q[len(kept):])
	m.lru.q = kept
	m.lru.head = 0
}

// pop takes up to n versions from the front of the queue.
func (m *memOwner) pop(n int, out []*Document) []*Document {
	m.lru.Lock()
	defer m.lru.Unlock()
	end := min(m.lru.head+n, len(m.lru.q))
	out = append(out, m.lru.q[m.lru.head:end]...)
	clear(m.lru.q[m.lru.head:end])
	m.lru.head = end
	if m.lru.head == len(m.lru.q) {
		m.lru.q = m.lru.q[:0]
		m.lru.head = 0
	}
	m.queued.Store(int64(len(m.lru.q) - m.lru.head))
	return out
}

// requeue puts versions given a second chance at the back of the queue.
func (m *memOwner) requeue(ds []*Document) {
	if len(ds) == 0 {
		return
	}
	m.lru.Lock()
	m.lru.q = append(m.lru.q, ds...)
	m.queued.Store(int64(len(m.lru.q) - m.lru.head))
	m.lru.Unlock()
}

// touched marks d as recently used, for eviction's second chance.
func (m *memOwner) touched(d *Document) {
	if !memMode(m.mode.Load()).evicts() {
		return
	}
	if d.lru.Load()&lruRef == 0 {
		d.lru.Or(lruRef)
	}
}

// checkQuota refuses a write of an ephemeral noEviction bucket that would
// grow mem_used past the quota: growth is the new version's footprint less
// the one it replaces, so deletes, and writes that shrink, always pass.
func (b *Bucket) checkQuota(old, d *Document) error {
	if memMode(b.mem.mode.Load()) != memRefuse {
		return nil
	}
	growth := docFootprint(d) - docFootprint(old)
	if old == nil {
		growth += itemOverhead + lruOverhead
	}
	if growth <= 0 || b.memUsed()+growth <= b.mem.quota.Load() {
		return nil
	}
	b.mem.tmpOOM.Add(1)
	return errTempOOM(b.name, b.mem.quota.Load())
}

// maybeEvict runs an eviction pass when the bucket evicts and mem_used is
// past the high-water mark. Writers call it after publishing, holding no
// lock; a writer that finds a pass running leaves the work to it.
func (b *Bucket) maybeEvict(ctx context.Context) {
	mode := memMode(b.mem.mode.Load())
	if !mode.evicts() || b.evictable() <= b.mem.high() {
		return
	}
	if !b.mem.evicting.TryLock() {
		return
	}
	defer b.mem.evicting.Unlock()
	b.evictTo(ctx, b.mem.low())
}

// evictTo evicts least-recently-used items until what eviction can free
// (evictable) is at most target, or nothing more can go (every queued
// version was visited twice).
//
// REQUIRES: b.mem.evicting held.
func (b *Bucket) evictTo(ctx context.Context, target int64) {
	b.mem.lru.Lock()
	budget := 2*(len(b.mem.lru.q)-b.mem.lru.head) + 64
	b.mem.lru.Unlock()
	var batch, again []*Document
	for b.evictable() > target && budget > 0 && ctx.Err() == nil {
		batch = b.mem.pop(64, batch[:0])
		if len(batch) == 0 {
			return
		}
		again = again[:0]
		for _, d := range batch {
			budget--
			bits := d.lru.Load()
			if bits&lruGone != 0 {
				continue
			}
			if bits&lruRef != 0 {
				d.lru.And(^uint32(lruRef))
				again = append(again, d)
				continue
			}
			if memMode(b.mem.mode.Load()) == memEject {
				if b.ejectOne(d) {
					b.mem.ejects.Add(1)
				}
			} else if b.evictOne(d) {
				b.mem.evictions.Add(1)
			}
		}
		b.mem.requeue(again)
	}
}

// evictOne evicts d if it is still its key's committed version with nothing
// on its way to the store: a memcached bucket's item leaves memory
// outright; an ephemeral bucket's live document is deleted (a tombstone, so
// views and the change feed see it go). It reports whether it evicted.
func (b *Bucket) evictOne(d *Document) bool {
	k := docKey{cid: d.Collection, key: d.Key}
	p := b.parts[d.Partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.docs[k] != d || p.mu.pending[k] != nil || b.isClosed() {
		return false
	}
	if memMode(b.mem.mode.Load()) == memDelete {
		if d.Deleted {
			return false // a tombstone waits for the metadata purge
		}
		now := b.clock.Now()
		_, err := b.publishLocked(p, k, d, &Document{Deleted: true, DeletedAt: now, Type: d.Type}, now)
		return err == nil
	}
	delete(p.mu.docs, k)
	if d.Deleted {
		b.tombs.Add(-1)
	} else {
		b.currItems.Add(-1)
		b.exps.update(k, d.Expiration, 0, 0)
	}
	b.published(d, nil)
	return true
}

// ejectOne ejects d's value if d is still its key's committed version, live,
// resident, with nothing newer on its way to the store, and on disk: a
// metadata-only copy takes its place (d itself is left as it is, for the
// goroutines that hold it). It reports whether it ejected.
func (b *Bucket) ejectOne(d *Document) bool {
	k := docKey{cid: d.Collection, key: d.Key}
	p := b.parts[d.Partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.docs[k] != d || p.mu.pending[k] != nil || d.Deleted || d.ejected || len(d.Value) == 0 || b.isClosed() || !b.onDiskLocked(p, d) {
		return false // an empty value frees nothing
	}
	e := d.withoutValue()
	p.mu.docs[k] = e
	b.published(d, e)
	return true
}

// onDiskLocked reports whether committed version d of partition p is in
// the bucket's store, so that its value may leave memory: a durable store
// holds every committed version up to the partition's durable sequence
// number.
//
// REQUIRES: p.mu held.
func (b *Bucket) onDiskLocked(p *partition, d *Document) bool {
	return b.store.st.durable() && d.Seq <= p.mu.durable
}

// ejectAtWarmup reports whether live version d, loaded from the store at
// warm-up, joins memory without its value: once a bucket that ejects
// values has loaded values up to its low-water mark, as Couchbase's
// warm-up stops loading values there.
func (b *Bucket) ejectAtWarmup(d *Document) bool {
	return memMode(b.mem.mode.Load()) == memEject && !d.Deleted && len(d.Value) > 0 &&
		b.memUsed()+docFootprint(d)+itemOverhead > b.mem.low()
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
