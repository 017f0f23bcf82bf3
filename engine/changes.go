package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
)

// This file is what a public change feed (CouchDB's _changes, package changes)
// needs from the bucket: a bucket-wide order in which every position fits in
// one number. Sequence numbers are per partition; a position in them is a
// vector of one per partition, too large to put on every row of a feed. CAS
// is bucket-wide and is handed out (nextCAS) together with the sequence
// number, under the partition's lock: within a partition, a higher sequence
// number has a higher CAS. But CAS does not order publication: a writer can
// take a CAS and reach the commit queue after a writer that took a later
// one, and the two may land in different batches, so a change with a smaller
// CAS can become visible after one with a larger. StableCAS answers that: it
// is the highest CAS at or below which nothing remains on its way to disk,
// so "every change with CAS at or below c" is a position a consumer can hold
// once c <= StableCAS. A sliding-expiry extension keeps its document's CAS
// (ttl.go, extend): it changes neither the value nor the CAS, only the
// expiration, and a feed ordered by CAS shows it only to a consumer that has
// not yet passed that CAS.

// purgedCASKey is the system document holding the highest CAS of a
// tombstone the metadata purge removed, as 8 big-endian bytes.
const purgedCASKey = "_mayfly/changes/purged"

// StableCAS returns the highest CAS c such that every change with a CAS at
// or below c is committed and visible in the change feed (or will never be:
// its commit failed). A change published after this call has a larger CAS,
// so a consumer that has read every change with CAS at or below c can hold c
// as its position.
func (b *Bucket) StableCAS() uint64 {
	// Read the last CAS handed out first: a CAS at or below it was taken
	// under its partition's lock, which the writer holds until its version
	// is queued (pending) or, on a memory store, committed inline. Taking each
	// partition's lock below therefore sees every such version either
	// pending or committed.
	stable := b.cas.Load()
	for _, p := range b.parts {
		p.mu.RLock()
		for k, d := range p.mu.pending {
			if i, ok := p.mu.docs.find(k); ok && p.mu.docs.recs[i].cas == d.CAS {
				continue // a sliding extension: its CAS is already committed
			}
			if d.CAS <= stable {
				stable = d.CAS - 1
			}
		}
		p.mu.RUnlock()
	}
	return stable
}

// MaxCAS returns the highest CAS handed out so far.
func (b *Bucket) MaxCAS() uint64 { return b.cas.Load() }

// ChangeScan is one read of a partition's change feed by ScanChanges: its
// arguments, and its results, which a caller reads on from by scanning again
// with the same value.
type ChangeScan struct {
	// Part is the partition to read.
	Part int
	// After is the sequence number to read after; ScanChanges moves it to
	// where the next read goes on.
	After uint64
	// Lo and Hi bound the CAS of the versions returned: Lo < CAS <= Hi.
	Lo, Hi uint64
	// Limit caps how many versions one read appends.
	Limit int
	// Keep, when set, filters the versions returned. It runs under the
	// partition's read lock: it must be quick and not call the bucket.
	Keep func(*Document) bool
	// Docs receives the versions read, appended in sequence order (but
	// see Backfill).
	Docs []*Document
	// Backfill reports that this read's Docs came from a backfill (a
	// fullEviction bucket's documents out of memory whole: the partition's
	// change log no longer leads to them): stored versions with a sequence
	// number after After and at most a snapshot of the partition's
	// committed sequence number, in key order, not sequence order (with
	// ReadAhead, of later partitions too: see Ahead). After stays where
	// the backfill began until the read that ends it, which
	// moves After to the snapshot's end (reads go on from the log there);
	// a reader's position inside a backfill is therefore After, and one
	// that starts again from it reads the backfill again (a document comes
	// once or more, never not at all). A scan value carries its backfill
	// from read to read: a new value starts it again.
	Backfill bool
	// ReadAhead, when above 0, says the caller reads the partitions after
	// Part next, in order, each from 0, in the same CAS range (a _changes
	// window), and takes at most ReadAhead more versions (its limit left;
	// math.MaxInt without one): a backfill this read starts then reads,
	// in the same pass over the store, the later partitions that need one
	// too, in order, as long as the documents the partitions it reads hold
	// (live and deleted: more than it yields) number less than ReadAhead,
	// so that the caller can take the whole backfill and a version after it
	// (a position inside one is where it began), and the read that ends it
	// sets Ahead. Without it, a reader backfilling its partitions one at a
	// time over a bucket whose every partition has items out passes over
	// the whole store once per partition.
	ReadAhead int
	// Ahead, set by the read that ends a backfill with ReadAhead (nil
	// otherwise), holds per partition after Part where the caller's read
	// of it goes on (its After): every stored version of it up to that
	// sequence number in the CAS range came in the backfill (Docs of that
	// partition among them); 0 for a partition it did not read.
	Ahead []uint64
	// More reports that the partition's feed holds more after After.
	More bool
	// MetaOnly says the caller reads no value (a change feed without
	// include_docs, a count): versions whose value was ejected from memory
	// come without it (Value nil) instead of being read back from the
	// store.
	MetaOnly bool
	// Err is why a read stopped early: a value that could not be read back
	// from the store. The read stops before that version (After is before
	// it, More is set).
	Err error
	// Snapshot, set by a read that returned a backfill's documents
	// (Backfill), is where that backfill ends in partition Part: the
	// snapshot of its committed sequence number it reads up to.
	Snapshot uint64
	// Resume, when its End is set on a scan that has no backfill under way,
	// goes on with a backfill of partition Part begun earlier (by another
	// scan, perhaps in another request) from After, up to End, after the
	// document Resume names (in key order), instead of starting one again
	// from its first document: a reader that keeps Snapshot and the last
	// document it took from a backfill can leave and come back without
	// reading that backfill's documents again. It is used by the next read
	// and then cleared. End is clamped to what the partition has committed.
	Resume BackfillPoint

	bf *backfill // the backfill under way, nil if none
}

// BackfillPoint is a place inside a partition's backfill (ChangeScan.Resume):
// the backfill's end and the last document taken from it.
type BackfillPoint struct {
	// End is the backfill's snapshot end (ChangeScan.Snapshot); 0 names no
	// backfill.
	End uint64
	// Collection and Key name the last document taken.
	Collection CollectionID
	Key        string
}

// ScanChanges reads part of one partition's change feed, as s describes: the
// committed version of every document changed after s.After, in sequence
// order, with s.Lo < CAS <= s.Hi, that s.Keep accepts, at most s.Limit of
// them. A document changed twice appears once, at its latest version; a
// version whose CAS is out of range is skipped, not waited for. It starts
// where the versions above s.Lo start (a binary search), so a read costs
// what changed after s.Lo, not the partition's size; the first read of a
// partition after the bucket opens indexes its log once. A version whose
// value was ejected is returned with its value read back from the store
// (unless s.MetaOnly; the read's ejected values together, in key order:
// Bucket.withValues), and one replaced meanwhile is stepped over, as its
// newer version comes later. It reads nothing while the bucket warms up (a
// feed opens only on a warm bucket: CheckCASPosition).
func (b *Bucket) ScanChanges(s *ChangeScan) {
	s.More, s.Err, s.Backfill, s.Ahead, s.Snapshot = false, nil, false, nil, 0
	if s.Part < 0 || s.Part >= len(b.parts) || s.Limit <= 0 || !b.warm() {
		return
	}
	from := len(s.Docs)
	if b.scanBackfill(s) {
		return
	}
	b.scanChanges(s)
	if s.MetaOnly {
		return
	}
	read := s.Docs[from:]
	full, done, err := b.withValues(context.Background(), read)
	kept := s.Docs[:from]
	for _, d := range full[:done] {
		if d != nil { // nil: superseded, its newer version has a higher seq and CAS
			kept = append(kept, d)
		}
	}
	if err != nil {
		s.After, s.More, s.Err = read[done].Seq-1, true, err
	}
	clear(s.Docs[len(kept):])
	s.Docs = kept
}

// scanChanges is ScanChanges under the partition's lock.
func (b *Bucket) scanChanges(s *ChangeScan) {
	p := b.parts[s.Part]
	p.mu.RLock()
	if !p.mu.logIndexed {
		p.mu.RUnlock()
		p.mu.Lock()
		if !p.mu.logIndexed {
			p.indexLogLocked()
		}
		p.mu.Unlock()
		p.mu.RLock()
	}
	defer p.mu.RUnlock()
	if p.mu.evictedMax > s.After && p.mu.evictedCAS > s.Lo {
		// A version left memory whole after scanBackfill looked: the
		// next read backfills rather than skip it.
		s.More = true
		return
	}
	log, top := &p.mu.log, p.mu.logTop
	i := log.after(s.After)
	// Every version logged before j has a CAS at or below Lo.
	if j := sort.Search(len(top), func(j int) bool { return top[j] > s.Lo }); j > i {
		i = j
		s.After = log.seq(j - 1)
	}
	n := 0
	for ; i < log.len(); i++ {
		seq := log.seq(i)
		if !p.currentLocked(i) {
			s.After = seq
			continue
		}
		slot := log.slot(i)
		r := &p.mu.docs.recs[slot]
		if r.cas <= s.Lo || r.cas > s.Hi {
			s.After = seq
			continue
		}
		d := p.mu.docs.doc(slot)
		if s.Keep != nil && !s.Keep(d) {
			s.After = seq
			continue
		}
		if n == s.Limit {
			s.More = true
			return
		}
		s.Docs = append(s.Docs, d)
		n++
		s.After = seq
	}
}

// scanBackfill reads on, or starts, s's backfill when the partition's
// change log no longer leads to every version after s.After with a CAS
// above s.Lo (evict.go), appending up to s.Limit of its documents in
// s.Lo < CAS <= s.Hi that s.Keep accepts. It reports whether it read one
// (false: the partition needs none, read its log).
func (b *Bucket) scanBackfill(s *ChangeScan) bool {
	if s.bf == nil && s.Resume.End > s.After {
		p := b.parts[s.Part]
		p.mu.RLock()
		end := min(s.Resume.End, p.mu.durable)
		p.mu.RUnlock()
		if end > s.After {
			pos := make([]uint64, len(b.parts))
			pos[s.Part] = s.After
			s.bf = newBackfill(pos)
			s.bf.upTo[s.Part] = end
			s.bf.after, s.bf.began = docKey{cid: s.Resume.Collection, key: s.Resume.Key}, true
		}
	}
	s.Resume = BackfillPoint{}
	if s.bf == nil {
		if !b.itemsOut.Load() {
			return false
		}
		behind, end := b.parts[s.Part].backfillNeed(s.After, s.Lo)
		if !behind {
			return false
		}
		pos := make([]uint64, len(b.parts))
		pos[s.Part] = s.After
		s.bf = newBackfill(pos)
		s.bf.upTo[s.Part] = end
		if s.ReadAhead > 0 {
			// One version short of ReadAhead: the caller's position
			// moves past a backfill only with the version after it.
			budget := int64(s.ReadAhead) - 1 - b.parts[s.Part].held()
			for _, p := range b.parts[s.Part+1:] {
				behind, end := p.backfillNeed(0, s.Lo)
				if !behind {
					continue
				}
				if budget -= p.held(); budget < 0 {
					break
				}
				s.bf.upTo[p.id] = end
			}
		}
	}
	s.Backfill, s.More, s.Snapshot = true, true, s.bf.upTo[s.Part]
	from, n := len(s.Docs), 0
	done, err := s.bf.read(b, func(d *Document) bool {
		if d.CAS <= s.Lo || d.CAS > s.Hi || (s.Keep != nil && !s.Keep(d)) {
			return true
		}
		s.Docs = append(s.Docs, d)
		n++
		return n < s.Limit
	})
	switch {
	case err != nil:
		// Start the backfill again next time rather than skip what this
		// read took.
		clear(s.Docs[from:])
		s.Docs, s.bf, s.Err = s.Docs[:from], nil, err
	case done:
		s.After = max(s.After, s.bf.upTo[s.Part])
		if s.ReadAhead > 0 {
			s.Ahead = make([]uint64, len(b.parts))
			copy(s.Ahead[s.Part+1:], s.bf.upTo[s.Part+1:])
		}
		s.bf = nil
	}
	return true
}

// held returns how many documents, live and deleted, p holds (in memory or
// out of it).
func (p *partition) held() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.mu.items + p.mu.tombs
}

// backfillNeed reports whether a reader of p's change feed after sequence
// number after, in a CAS range above lo, needs a backfill (a version it
// must read left memory whole: evict.go), and the partition's committed
// sequence number, where such a backfill ends.
func (p *partition) backfillNeed(after, lo uint64) (behind bool, end uint64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.mu.evictedMax > after && p.mu.evictedCAS > lo, p.mu.durable
}

// indexLogLocked sets logTop from the committed versions; a stale entry
// adds nothing of its own.
//
// REQUIRES: p.mu held for writing.
func (p *partition) indexLogLocked() {
	var top uint64
	p.mu.logTop = slices.Grow(p.mu.logTop[:0], p.mu.log.len())
	for i := range p.mu.log.len() {
		if p.currentLocked(i) {
			top = max(top, p.mu.docs.recs[p.mu.log.slot(i)].cas)
		}
		p.mu.logTop = append(p.mu.logTop, top)
	}
	p.mu.logIndexed = true
}

// CheckCASPosition reports whether a change-feed consumer that has seen
// every change with a CAS at or below cas, in the history named uuid, can go
// on from there: nil when it can, an error wrapping ErrRollback when it
// cannot (an unknown history; a position past what the bucket holds; an older
// history whose end the consumer may have read past, so that changes it saw
// were lost and their CAS values may be handed out again). A consumer that
// has seen nothing (cas 0) can always go on. While the bucket warms up it
// answers ErrWarmup.
//
// For an older history the bound is the CAS every later history recorded
// when it began (FailoverEntry.CAS: what the store had committed when the
// bucket opened after a shutdown that was not clean), the least of them:
// it needs no document in memory, so a fullEviction bucket, whose warm-up
// loads none, answers as a valueOnly one. A failover log written before
// entries recorded it falls back to the highest CAS among the documents
// memory holds that were written before every later history began (a
// scan of the bucket).
func (b *Bucket) CheckCASPosition(uuid, cas uint64) error {
	if !b.warm() {
		return ErrWarmup
	}
	if cas == 0 {
		return nil
	}
	hist := b.FailoverLog()
	i := slices.IndexFunc(hist, func(e FailoverEntry) bool { return e.UUID == uuid })
	switch {
	case i < 0:
		return fmt.Errorf("%w: history %d is not in the failover log", ErrRollback, uuid)
	case i == 0:
		if m := b.cas.Load(); cas > m {
			return fmt.Errorf("%w: position %d is past the bucket's last change %d", ErrRollback, cas, m)
		}
		return nil
	}
	held := ^uint64(0)
	for _, e := range hist[:i] {
		if e.CAS == 0 && e.Seqs != nil {
			held = b.heldBefore(hist[:i]) // an entry from before CAS was recorded
			break
		}
		held = min(held, e.CAS)
	}
	if cas > held {
		return fmt.Errorf("%w: history %d ended before position %d could be shown to be kept", ErrRollback, uuid, cas)
	}
	return nil
}

// heldBefore returns the highest CAS among the documents memory holds that
// were written before every history of later began (a failover log that
// does not record FailoverEntry.CAS).
func (b *Bucket) heldBefore(later []FailoverEntry) uint64 {
	// Every later history began at some sequence number per partition; what
	// is at or below the lowest of them was written before all of them.
	limit := make([]uint64, len(b.parts))
	for p := range limit {
		limit[p] = ^uint64(0)
		for _, e := range later {
			var s uint64
			if e.Seqs != nil && p < len(e.Seqs) {
				s = e.Seqs[p]
			}
			limit[p] = min(limit[p], s)
		}
	}
	var held uint64
	for _, p := range b.parts {
		p.mu.RLock()
		for i := range p.mu.docs.recs {
			if r := &p.mu.docs.recs[i]; r.bits()&recUsed != 0 && r.seq <= limit[p.id] {
				held = max(held, r.cas)
			}
		}
		p.mu.RUnlock()
	}
	return held
}

// PurgedCAS returns the highest CAS of a tombstone the metadata purge has
// removed (0 if none): a consumer whose position is below it may have missed
// a deletion for good.
func (b *Bucket) PurgedCAS() uint64 {
	v, err := b.SystemDoc(purgedCASKey)
	if err != nil || len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// raisePurgedCAS makes PurgedCAS, durably, at least the CAS of every
// tombstone that PurgeTombstones(olderThan) with consumers at low may purge
// now, and returns the value it holds: the purge removes only tombstones at
// or below it, so no removal is ever on disk before the mark that says so.
func (b *Bucket) raisePurgedCAS(ctx context.Context, olderThan int64, low []uint64) (uint64, error) {
	cur := b.PurgedCAS()
	want := cur
	for _, p := range b.parts {
		p.mu.RLock()
		p.mu.docs.each(func(i uint32) bool {
			if v := p.mu.docs.version(i); v.deleted && v.seq <= low[p.id] && p.mu.docs.deletedAt(i) <= olderThan {
				want = max(want, v.cas)
			}
			return true
		})
		p.mu.RUnlock()
	}
	if want == cur {
		return cur, nil
	}
	if err := b.PutSystemDoc(ctx, purgedCASKey, binary.BigEndian.AppendUint64(nil, want)); err != nil {
		return cur, fmt.Errorf("engine: record the metadata purge's position: %w", err)
	}
	return want, nil
}
