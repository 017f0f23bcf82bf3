package engine

import "fmt"

// A backfill is a read of the store, in key order, for the partitions whose
// change log no longer leads to every document after a reader's position (a
// fullEviction bucket's documents out of memory whole, evict.go), as a DCP
// stream's disk snapshot. It keeps the stored documents of those partitions
// with a sequence number after the reader's position and at most a snapshot
// of the partition's committed sequence number taken when it began: the
// store holds each key's newest committed version, so a version newer than
// the snapshot is skipped here and comes from the log after it, and a key
// changed while the backfill runs may come twice (its older version from
// the store, its newer one from the log), never not at all. It holds no
// read of the store open between its reads of backfillChunk documents, and
// at most one such chunk. The consumer Cursor, Bucket.Changes and
// ScanChanges all read through it, each in one pass over the store for
// every partition it needs (ScanChanges, which reads one partition, takes
// the later ones too when its caller reads them next: ChangeScan.ReadAhead).
type backfill struct {
	from  []uint64 // per partition: the reader's position when it began
	upTo  []uint64 // per partition: the snapshot's end; 0 for a partition not read
	after docKey   // the last document read from the store
	began bool     // after is set
	end   bool     // the store is read to its end: buf holds what is left
	buf   []*Document
	bi    int // buf[bi:] are read from the store and not yet looked at
}

// backfillChunk is how many stored documents a backfill reads at a time,
// in one read of the store that ends before any is yielded.
const backfillChunk = 512

// newBackfill returns a backfill from pos that reads no partition yet: the
// caller sets upTo of those it needs.
func newBackfill(pos []uint64) *backfill {
	return &backfill{from: append([]uint64(nil), pos...), upTo: make([]uint64, len(pos))}
}

// read yields, in key order, every stored document (tombstones included,
// with its value) of the backfill's partitions with from < Seq <= upTo, of
// a collection that still exists, reading the store backfillChunk documents
// at a time. It stops when yield returns false (a later read goes on after
// the document yielded last: the rest of the chunk waits in buf, so that a
// reader that takes a few documents a read does not read the store again
// for each) and reports whether it read the store to its end.
func (bf *backfill) read(b *Bucket, yield func(*Document) bool) (done bool, err error) {
	for {
		for bf.bi < len(bf.buf) {
			d := bf.buf[bf.bi]
			bf.buf[bf.bi] = nil
			bf.bi++
			p := int(d.Partition)
			if p >= len(bf.upTo) || bf.upTo[p] == 0 || d.Seq <= bf.from[p] || d.Seq > bf.upTo[p] || !b.hasCollection(d.Collection) {
				continue
			}
			if !yield(d) {
				return false, nil
			}
		}
		if bf.end {
			return true, nil
		}
		docs, err := b.store.st.docsAfter(bf.after, bf.began, backfillChunk, bf.buf[:0])
		if err != nil {
			if b.isClosed() {
				err = ErrClosed
			}
			return false, fmt.Errorf("%w: change feed backfill: %w", ErrStorage, err)
		}
		bf.buf, bf.bi, bf.end = docs, 0, len(docs) < backfillChunk
		if len(docs) > 0 {
			last := docs[len(docs)-1]
			bf.after, bf.began = docKey{cid: last.Collection, key: last.Key}, true
		}
	}
}

// finish moves pos, for every partition the backfill read, to the
// snapshot's end: the reader goes on from the log there.
func (bf *backfill) finish(pos []uint64) {
	for p, end := range bf.upTo {
		if end > 0 {
			pos[p] = max(pos[p], end)
		}
	}
}
