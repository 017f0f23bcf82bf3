package engine

import (
	"context"
	"fmt"
	"sync"
)

// A fullEviction bucket's warm-up loads no item (Couchbase's full eviction
// warms up keys only, into its filters): it reads the store's documents in
// key order, a chunk at a time (storage.docsAfter, nothing held open
// between chunks), and for each one adds its key to its partition's Bloom
// filter and counts it (curr_items or the tombstones, the partition's and
// the collection's counts, its expiry entry, the bucket's CAS) as an item
// out of memory whole, exactly as if it had been loaded and then evicted
// (evict.go): the partition's evictedMax and evictedCAS rise to it, so a
// feed reader backfills from the store. Memory then holds only the items
// that reads and writes bring back, and the heap does not grow with the
// keys on disk (the filters take about 1.2 bytes a key; a key with an
// expiration keeps its expiry entry).
//
// While the scan runs, a key that memory does not hold may or may not have
// been counted yet. The scan goes in key order and counts each key under
// its partition's lock, then moves its position (keyScan) past it, so a
// read or write of k (fetchMissLocked, under k's partition's lock) finds
// the store's version counted when k is at or before the position (it puts
// it back uncounted, restoreItemLocked) and not yet counted otherwise (it
// loads it counted, loadDocLocked, and the scan, reaching k, finds it in
// memory and counts nothing). A failed scan resumes after its position.

// warmChunk is how many documents the key-only warm-up reads at a time.
const warmChunk = 512

// keyScan is where a key-only warm-up has got to.
type keyScan struct {
	mu      sync.Mutex
	at      docKey   // the last key counted
	started bool     // at holds a key
	orphans []record // documents of dropped collections found so far
}

// passed reports whether the scan has counted k already (or found it in
// memory): k is at or before its position.
func (s *keyScan) passed(k docKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started && compareDocKeys(k, s.at) <= 0
}

// moveTo sets the scan's position to k.
func (s *keyScan) moveTo(k docKey) {
	s.mu.Lock()
	s.at, s.started = k, true
	s.mu.Unlock()
}

// position returns the scan's position (ok false before the first key).
func (s *keyScan) position() (docKey, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at, s.started
}

// loadKeys is a fullEviction bucket's warm-up load: every stored key into
// its partition's filter and the counts, no item into memory. It returns
// the documents of dropped collections it found (endLoad removes them).
func (b *Bucket) loadKeys(ctx context.Context, st storage) ([]record, error) {
	w := &b.warmup
	hook := b.eng.opts.WarmupHook
	after, from := w.scan.position()
	var buf []*Document
	for {
		var err error
		buf, err = st.docsAfter(after, from, warmChunk, buf[:0])
		if err != nil {
			return nil, err
		}
		for _, d := range buf {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if int(d.Partition) >= len(b.parts) {
				return nil, fmt.Errorf("document %q in partition %d of %d", d.Key, d.Partition, len(b.parts))
			}
			k := docKey{cid: d.Collection, key: d.Key}
			p := b.parts[d.Partition]
			// Only a dropped collection's document goes (as in the full
			// warm-up): one of a collection newer than the manifest stays.
			known := !b.collectionDropped(d.Collection) // (the bucket's lock, never inside a partition's)
			p.mu.Lock()
			if known {
				b.countStoredLocked(p, d)
			} else {
				r := record{purge: true, key: k, part: d.Partition}
				if !d.Deleted {
					r.oldExp = d.Expiration
				}
				w.scan.orphans = append(w.scan.orphans, r)
			}
			w.scan.moveTo(k)
			p.mu.Unlock()
			if n := w.keys.Load(); hook != nil {
				hook(b.name, n)
			}
		}
		if len(buf) < warmChunk {
			break
		}
		last := buf[len(buf)-1]
		after, from = docKey{cid: last.Collection, key: last.Key}, true
		clear(buf) // the chunk's documents go; the slice is read into again
	}
	b.bloom.ready.Store(true)
	orphans := w.scan.orphans
	w.scan.orphans = nil
	return orphans, nil
}

// countStoredLocked counts d, read from the store by the key-only warm-up,
// as an item out of memory whole, unless memory holds its key or a write
// of it is on its way (a read or write brought it in counted: the store
// held no older version of a key that is only pending).
//
// REQUIRES: p.mu held for writing, p d's partition.
func (b *Bucket) countStoredLocked(p *partition, d *Document) {
	k := docKey{cid: d.Collection, key: d.Key}
	if p.mu.bloom != nil {
		p.mu.bloom.add(k)
	}
	if _, ok := p.mu.pending[k]; ok || p.mu.docs.has(k) {
		return
	}
	v := versionOfDoc(d)
	b.countLive(p, version{}, v)
	p.countLocked(v, 1)
	raiseCAS(&b.cas, d.CAS)
	if d.Deleted {
		b.tombs.Add(1)
	} else {
		b.currItems.Add(1)
		b.mem.nonResident.Add(1)
		if d.Expiration != 0 {
			b.exps.update(k, 0, d.Expiration, d.valueSize())
		}
	}
	b.mem.out.Add(1)
	p.mu.evictedMax = max(p.mu.evictedMax, d.Seq)
	p.mu.evictedCAS = max(p.mu.evictedCAS, d.CAS)
	b.itemsOut.Store(true)
	b.warmup.keys.Add(1)
	b.warmup.keysOnly.Add(1)
}
