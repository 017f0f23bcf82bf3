package engine

import (
	"cmp"
	"hash/crc32"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// docKey identifies a document inside a bucket.
type docKey struct {
	cid CollectionID
	key string
}

// changeLog is a partition's committed changes in sequence order: each
// entry says that the key of a record changed at a sequence number. A
// later change of the same key leaves the older entry stale (the record's
// sequence number is another, or the record is free or another key's);
// readers skip stale entries. An entry is 8 bytes with no pointer: the
// record number and the sequence number's low half; the high halves,
// which change once in 2^32 changes, are kept apart (his), each with the
// first entry that has it.
type changeLog struct {
	ents []logEntry
	his  []logHi
}

type logEntry struct{ lo, slot uint32 }

type logHi struct {
	start int // the first entry with this high half
	hi    uint32
}

func (l *changeLog) len() int { return len(l.ents) }

// slot returns entry i's record number.
func (l *changeLog) slot(i int) uint32 { return l.ents[i].slot }

// seq returns entry i's sequence number.
func (l *changeLog) seq(i int) uint64 {
	h := len(l.his) - 1
	for h > 0 && l.his[h].start > i {
		h--
	}
	return uint64(l.his[h].hi)<<32 | uint64(l.ents[i].lo)
}

// add appends a change, seq above every logged one.
func (l *changeLog) add(seq uint64, slot uint32) {
	if hi := uint32(seq >> 32); len(l.his) == 0 || l.his[len(l.his)-1].hi != hi {
		l.his = append(l.his, logHi{start: len(l.ents), hi: hi})
	}
	l.ents = appendSlim(l.ents, logEntry{lo: uint32(seq), slot: slot})
}

// after returns the index of the first entry whose sequence number is
// above seq.
func (l *changeLog) after(seq uint64) int {
	return sort.Search(len(l.ents), func(i int) bool { return l.seq(i) > seq })
}

// partition is one vBucket: its documents and its change log.
// One writer at a time (mu held for writing); many readers.
type partition struct {
	// mu comes first, and in it what every read uses (the lock, acked and
	// docs' first fields), so that a read touches the partition's first
	// two cache lines only.
	mu struct {
		sync.RWMutex
		// acked holds, for keys whose newest acknowledged version is on
		// its way to disk (a write at durability none or majority), that
		// version: reads see it before the committed one, the change feed
		// does not. It goes once a version at least as new is committed.
		acked   map[docKey]*Document
		docs    docTable             // committed: live documents and tombstones
		pending map[docKey]*Document // newest version of keys with a write on its way to disk
		// npending is len(pending), kept beside seq, which every write
		// reads, so that a write to a partition with nothing pending (the
		// usual case at durability none: a few hundred keys pending of
		// 1,000 over 1,024 partitions) does not touch the map's own memory,
		// a cache miss a write (latestLocked, latestViewLocked). Set
		// wherever pending changes.
		npending int
		seq      uint64    // highest sequence number given out
		durable  uint64    // highest sequence number committed: the feed's end
		log      changeLog // committed changes, ordered by seq; may hold stale entries
		// logTop is, once the log is indexed (logIndexed), the highest CAS
		// of the versions logged up to each entry of log: it never falls
		// along the log, so a reader of the changes above a CAS finds where
		// they start by binary search (ScanChanges), although a sliding
		// extension logs an older CAS after newer ones.
		logTop []uint64
		// locks are the documents' pessimistic locks (lock.go), in memory
		// only; nil until the first.
		locks map[docKey]docLock
		// logIndexed says logTop is kept; it is set by
		// the first reader that needs it (indexLogLocked).
		logIndexed bool
		// expiring holds, by key, the sequence number of each expiration
		// queued and not yet committed: it has left the counts already
		// (expireQueued, countedLiveLocked), and goes back in if its
		// commit fails (dropPending). nil until the first.
		expiring map[docKey]uint64
		// items and tombs count the partition's live documents and
		// tombstones (vb_active_curr_items): kept by published, from the
		// versions it is given, so they need no record.
		items, tombs int64
		// live counts the partition's live documents by collection, as
		// the bucket's Collection.Count does for all (countLive,
		// countedLiveLocked): Collection.CountIn sums them over a set of
		// partitions. nil until the first.
		live map[CollectionID]int64
		// bloom is the filter of the keys the store holds (bloom.go), nil
		// when the bucket keeps none.
		bloom *bloomFilter
		// evictedMax is the highest sequence number of a version that
		// left memory whole (evict.go): the change log no longer leads to
		// it, so a feed reader before it reads the store (backfill).
		evictedMax uint64
		// evictedCAS is the highest CAS of a version that left memory
		// whole: a CAS-bounded read (ScanChanges) whose window starts at
		// or above it needs no backfill (within a partition a higher
		// sequence number has a higher CAS).
		evictedCAS uint64
		// view is where mutate reads a key's committed version from the
		// table (latestViewLocked): a Document it fills in again at every
		// write rather than one allocated per write. nil until the first.
		view *Document
	}

	// seqNow is mu.seq for readers that take no lock (HighSeqnos, asked
	// by every view answer for all 1,024 partitions: a read lock each
	// was a sixth of a range query's server CPU). It is stored with
	// mu held for writing, after mu.seq (setSeqLocked), so it is never
	// ahead of a version's queueing.
	seqNow atomic.Uint64

	id uint16
}

// setSeqLocked sets the highest sequence number given out, and its
// lock-free copy; p.mu is held for writing.
func (p *partition) setSeqLocked(seq uint64) {
	p.mu.seq = seq
	p.seqNow.Store(seq)
}

func newPartition(id uint16) *partition {
	p := &partition{id: id}
	p.mu.docs = newDocTable(id)
	p.mu.pending = make(map[docKey]*Document)
	p.mu.acked = make(map[docKey]*Document)
	return p
}

// partitionOf hashes a key to its partition, as Couchbase does (CRC32, upper bits).
func partitionOf(key string, n int) uint16 {
	return uint16((crc32IEEE(key) >> 16) % uint32(n))
}

// crc32IEEE is crc32.ChecksumIEEE of key, computed on the string itself:
// converting a key to []byte for crc32 cost an allocation on every read and
// write. Keys are short, so a byte at a time through the package's table is
// enough.
func crc32IEEE(key string) uint32 {
	t := crc32.IEEETable
	crc := ^uint32(0)
	for i := 0; i < len(key); i++ {
		crc = t[byte(crc)^key[i]] ^ (crc >> 8)
	}
	return ^crc
}

// latestLocked returns the newest version of k: the one on its way to disk if
// any, else the committed one (nil if none). Writers build on it; readers see
// only committed versions.
//
// REQUIRES: p.mu held.
func (p *partition) latestLocked(k docKey) *Document {
	if p.mu.npending > 0 {
		if d, ok := p.mu.pending[k]; ok {
			return d
		}
	}
	return p.mu.docs.get(k)
}

// latestViewLocked is latestLocked for mutate: a committed version comes
// back in the partition's view Document, which the next call overwrites,
// so the caller must not keep it past its hold of p.mu (or copy it).
//
// REQUIRES: p.mu held for writing.
func (p *partition) latestViewLocked(k docKey) *Document {
	if p.mu.npending > 0 {
		if d, ok := p.mu.pending[k]; ok {
			return d
		}
	}
	i, ok := p.mu.docs.find(k)
	if !ok {
		return nil
	}
	if p.mu.view == nil {
		p.mu.view = new(Document)
	}
	return p.mu.docs.docInto(i, p.mu.view)
}

// countedLiveLocked reports whether k counts as a live document in
// curr_items and its collection's counts (Bucket.currItems, addLive): as
// reads see it (readLocked: its newest version acknowledged from memory,
// else its committed one), except that an expiration queued and not yet
// committed has taken it out already (expireQueued). A version whose writer
// waits for its commit counts from that commit, as it is read from then.
// The counts follow it: each change of it changes them (countedChange), so
// that a write acknowledged from memory is counted when it is acknowledged,
// not when its commit comes.
//
// REQUIRES: p.mu held, k's committed version in memory if it has one (a
// key with a write on its way to disk is).
func (p *partition) countedLiveLocked(k docKey) bool {
	var a *Document
	if len(p.mu.acked) > 0 {
		a = p.mu.acked[k]
	}
	e, expiring := p.mu.expiring[k]
	switch {
	case a != nil && (!expiring || a.Seq > e):
		return !a.Deleted
	case expiring:
		return false
	}
	i, ok := p.mu.docs.find(k)
	return ok && p.mu.docs.recs[i].bits()&recDeleted == 0
}

// readLocked returns the version of k that reads see: the newest one
// acknowledged from memory and not yet on disk, if any, else the committed
// one (nil if none).
//
// REQUIRES: p.mu held.
func (p *partition) readLocked(k docKey) *Document {
	if len(p.mu.acked) > 0 {
		if d, ok := p.mu.acked[k]; ok {
			return d
		}
	}
	return p.mu.docs.get(k)
}

// readTouchLocked is readLocked that, with touch, marks the committed
// version it returns recently used (its recRef bit, for eviction).
//
// REQUIRES: p.mu held.
func (p *partition) readTouchLocked(k docKey, touch bool) *Document {
	if len(p.mu.acked) > 0 {
		if d, ok := p.mu.acked[k]; ok {
			return d
		}
	}
	i, ok := p.mu.docs.find(k)
	if !ok {
		return nil
	}
	if touch {
		p.mu.docs.touch(i)
	}
	return p.mu.docs.doc(i)
}

// logRebuildMin is the fewest entries a partition's change log is rebuilt
// from (appendLogLocked) and so about the most a small partition keeps: a
// bucket has 1,024 partitions, and 1,024 entries each held 2.5 MB of logs
// for 1,000 keys overwritten 300 times (the memcached benchmark). A rebuild
// costs the partition's keys, fewer than half the entries it drops.
const logRebuildMin = 64

// appendLogLocked records a change of record slot and compacts the log
// when stale entries dominate it.
//
// REQUIRES: p.mu held for writing.
func (p *partition) appendLogLocked(seq uint64, slot uint32) {
	p.mu.log.add(seq, slot)
	if p.mu.logIndexed {
		top := p.mu.docs.recs[slot].cas
		if n := len(p.mu.logTop); n > 0 {
			top = max(top, p.mu.logTop[n-1])
		}
		p.mu.logTop = appendSlim(p.mu.logTop, top)
	}
	if n := p.mu.log.len(); n > logRebuildMin && n > 2*p.mu.docs.n {
		p.rebuildLogLocked()
	}
}

// currentLocked reports whether log entry i is its key's latest change:
// its record holds the version the entry logged.
//
// REQUIRES: p.mu held.
func (p *partition) currentLocked(i int) bool {
	r := &p.mu.docs.recs[p.mu.log.slot(i)]
	return r.bits()&recUsed != 0 && r.seq == p.mu.log.seq(i)
}

// rebuildLogLocked rebuilds the change log from the documents, one entry each.
//
// REQUIRES: p.mu held for writing.
func (p *partition) rebuildLogLocked() {
	slots := make([]uint32, 0, p.mu.docs.n)
	p.mu.docs.each(func(i uint32) bool {
		slots = append(slots, i)
		return true
	})
	recs := p.mu.docs.recs
	slices.SortFunc(slots, func(a, b uint32) int { return cmp.Compare(recs[a].seq, recs[b].seq) })
	log := changeLog{ents: make([]logEntry, 0, len(slots))}
	for _, i := range slots {
		log.add(recs[i].seq, i)
	}
	p.mu.log = log
	if p.mu.logIndexed {
		p.indexLogLocked()
	}
}

// changesAfter appends to out the current version of every document changed
// after since, in sequence order, up to limit documents, and returns the
// sequence number the caller has now seen up to. It reads nothing, and
// reports behind, when a version after since left memory whole (evict.go):
// the log no longer leads to it, and the caller reads the store first.
func (p *partition) changesAfter(since uint64, limit int, out []*Document) (_ []*Document, seen uint64, behind bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.mu.evictedMax > since {
		return out, since, true
	}
	if p.mu.durable <= since {
		return out, since, false
	}
	log := &p.mu.log
	seen = since
	for i, n := log.after(since), 0; i < log.len(); i++ {
		if p.currentLocked(i) {
			if n == limit {
				return out, seen, false
			}
			out = append(out, p.mu.docs.doc(log.slot(i)))
			n++
		}
		seen = log.seq(i)
	}
	return out, p.mu.durable, false
}

// keysLocked returns the keys that have a committed or a pending version,
// of the collections keep accepts (all with keep nil).
//
// REQUIRES: p.mu held.
func (p *partition) keysLocked(keep func(CollectionID) bool) []docKey {
	keys := make([]docKey, 0, p.mu.docs.n+len(p.mu.pending))
	p.mu.docs.each(func(i uint32) bool {
		if keep == nil || keep(CollectionID(p.mu.docs.recs[i].cid)) {
			keys = append(keys, p.mu.docs.key(i))
		}
		return true
	})
	for k := range p.mu.pending {
		if (keep == nil || keep(k.cid)) && !p.mu.docs.has(k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// countLocked adds delta to the partition's count of v's kind (live
// document or tombstone); no version counts nothing.
//
// REQUIRES: p.mu held for writing.
func (p *partition) countLocked(v version, delta int64) {
	switch {
	case !v.ok:
	case v.deleted:
		p.mu.tombs += delta
	default:
		p.mu.items += delta
	}
}
