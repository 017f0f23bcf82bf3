package engine

import (
	"hash/crc32"
	"sort"
	"sync"
)

// docKey identifies a document inside a bucket.
type docKey struct {
	cid CollectionID
	key string
}

// logEntry records that key changed at seq. A later change of the same key
// leaves the older entry stale; readers skip stale entries.
type logEntry struct {
	seq uint64
	key docKey
	// topCAS is the highest CAS of the versions logged up to this one, once
	// the log is indexed (partition.mu.logIndexed): it never falls along
	// the log, so a reader of the changes above a CAS finds where they
	// start by binary search (ScanChanges), although a sliding extension
	// logs an older CAS after newer ones.
	topCAS uint64
}

// partition is one vBucket: its documents and its change log.
// One writer at a time (mu held for writing); many readers.
type partition struct {
	id uint16

	mu struct {
		sync.RWMutex
		docs    map[docKey]*Document // committed: live documents and tombstones
		pending map[docKey]*Document // newest version of keys with a write on its way to disk
		// acked holds, for keys whose newest acknowledged version is on
		// its way to disk (a write at durability none or majority), that
		// version: reads see it before the committed one, the change feed
		// does not. It goes once a version at least as new is committed.
		acked   map[docKey]*Document
		seq     uint64     // highest sequence number given out
		durable uint64     // highest sequence number committed: the feed's end
		log     []logEntry // committed changes, ordered by seq; may hold stale entries
		// locks are the documents' pessimistic locks (lock.go), in memory
		// only; nil until the first.
		locks map[docKey]docLock
		// logIndexed says the log's entries carry topCAS; it is set by
		// the first reader that needs it (indexLogLocked).
		logIndexed bool
	}
}

func newPartition(id uint16) *partition {
	p := &partition{id: id}
	p.mu.docs = make(map[docKey]*Document)
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
	if d, ok := p.mu.pending[k]; ok {
		return d
	}
	return p.mu.docs[k]
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
	return p.mu.docs[k]
}

// appendLogLocked records a change and compacts the log when stale entries
// dominate it.
//
// REQUIRES: p.mu held for writing.
func (p *partition) appendLogLocked(seq uint64, k docKey) {
	e := logEntry{seq: seq, key: k}
	if p.mu.logIndexed {
		if d := p.mu.docs[k]; d != nil {
			e.topCAS = d.CAS
		}
		if n := len(p.mu.log); n > 0 {
			e.topCAS = max(e.topCAS, p.mu.log[n-1].topCAS)
		}
	}
	p.mu.log = append(p.mu.log, e)
	if n := len(p.mu.log); n > 1024 && n > 2*len(p.mu.docs) {
		p.rebuildLogLocked()
	}
}

// rebuildLogLocked rebuilds the change log from the documents, one entry each.
//
// REQUIRES: p.mu held for writing.
func (p *partition) rebuildLogLocked() {
	log := make([]logEntry, 0, len(p.mu.docs))
	for k, d := range p.mu.docs {
		log = append(log, logEntry{seq: d.Seq, key: k})
	}
	sort.Slice(log, func(i, j int) bool { return log[i].seq < log[j].seq })
	p.mu.log = log
	if p.mu.logIndexed {
		p.indexLogLocked()
	}
}

// changesAfter appends to out the current version of every document changed
// after since, in sequence order, up to limit documents, and returns the
// sequence number the caller has now seen up to.
func (p *partition) changesAfter(since uint64, limit int, out []*Document) ([]*Document, uint64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.mu.durable <= since {
		return out, since
	}
	log := p.mu.log
	i := sort.Search(len(log), func(i int) bool { return log[i].seq > since })
	seen := since
	for n := 0; i < len(log); i++ {
		e := log[i]
		if d, ok := p.mu.docs[e.key]; ok && d.Seq == e.seq {
			if n == limit {
				return out, seen
			}
			out = append(out, d)
			n++
		}
		seen = e.seq
	}
	return out, p.mu.durable
}
