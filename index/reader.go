package index

import (
	"fmt"
	"slices"
)

// Reader reads one snapshot of an Index: the rows, reductions, row counts
// and sequence vector that one Apply published together. Every answer of a
// Reader comes from that snapshot, whatever is applied meanwhile, so that
// a view answer's total_rows, rows and reductions agree with one another
// and with its sequence numbers, as CouchDB and Couchbase answer them. A
// paged index keeps the pages of the snapshot until Close.
//
// A Reader's methods may be called concurrently. Close must be called
// once they are done; after it, and once the Index is closed, they fail
// with ErrClosed.
type Reader struct {
	ix   *Index
	snap *snapshot // nil once closed
}

// Reader returns a Reader of the index's latest snapshot. The caller must
// Close it. It fails with ErrClosed on a closed Index.
func (ix *Index) Reader() (*Reader, error) {
	if ix.closed.Load() {
		return nil, ErrClosed
	}
	return &Reader{ix: ix, snap: ix.acquire()}, nil
}

// Close ends the read: a paged index may free the snapshot's pages that
// later Applies replaced. Close may be called again and then does nothing.
func (rdr *Reader) Close() {
	if rdr.snap != nil {
		rdr.ix.release(rdr.snap)
		rdr.snap = nil
	}
}

// view returns the snapshot and the index of view, or ErrClosed once the
// Reader or its Index is closed.
func (rdr *Reader) view(view string) (*snapshot, int, error) {
	if rdr.snap == nil || rdr.ix.closed.Load() {
		return nil, 0, ErrClosed
	}
	vi, ok := rdr.ix.byName[view]
	if !ok {
		return nil, 0, fmt.Errorf("%w: %q", ErrUnknownView, view)
	}
	return rdr.snap, vi, nil
}

// Seqs returns a copy of the snapshot's sequence vector: for each
// partition, the highest sequence number its rows reflect (0 for none).
func (rdr *Reader) Seqs() []uint64 {
	if rdr.snap == nil {
		return nil
	}
	return slices.Clone(rdr.snap.seqs)
}

// TotalRows returns the number of rows of view in the snapshot, as
// total_rows reports it.
func (rdr *Reader) TotalRows(view string) (int, error) {
	s, vi, err := rdr.view(view)
	if err != nil {
		return 0, err
	}
	return s.roots[vi].count, nil
}
