package index

import (
	"bytes"
	"context"
	"errors"
	"slices"
)

// Row is one view row. Key and Value are raw JSON; they are owned by the index
// and stay valid, but must not be modified.
type Row struct {
	Key   []byte
	DocID string
	Value []byte
}

// Range selects rows, with the meaning of CouchDB's view query parameters.
// The zero Range selects every row, ascending.
type Range struct {
	// Keys, when not nil, selects every row of each key (raw JSON), in the order
	// of Keys; a key given twice is answered twice. The other fields but
	// Descending are then ignored.
	Keys [][]byte
	// StartKey and EndKey (raw JSON) bound the range; nil leaves that end open.
	StartKey, EndKey []byte
	// StartDocID and EndDocID narrow the rows of StartKey and EndKey (or of
	// each of Keys) to the document ids from / up to them, as startkey_docid
	// and endkey_docid; "" is none, unless StartDocIDSet (EndDocIDSet) says
	// it was given: then it is the empty id, below every other.
	StartDocID, EndDocID string
	// StartDocIDSet and EndDocIDSet say that StartDocID and EndDocID were
	// given, even empty.
	StartDocIDSet, EndDocIDSet bool
	// InclusiveEnd includes the rows of EndKey (up to EndDocID). Note that its
	// zero value excludes them, while CouchDB's inclusive_end defaults to true.
	InclusiveEnd bool
	// Descending iterates from high to low keys. StartKey (with StartDocID) is
	// then the upper bound and EndKey (with EndDocID) the lower, as in CouchDB.
	Descending bool
	// ExcludeExpired leaves out the rows of documents whose expiration has
	// passed at Now (expiration != 0 && expiration <= Now), as if they were
	// purged already: from Query's rows and from every reduction and group
	// of Reduce. The answer is exact at Now without rescanning anything:
	// each node of a tree knows the earliest expiration beneath it and
	// caches the reduction of its live rows for as long as it holds, so
	// the cost follows the expired rows still in the index, not its size.
	// A reduce of the whole view (no keys or key bounds, group level 0)
	// costs O(log n) whatever has expired (see live.go).
	ExcludeExpired bool
	// Now is the instant of an ExcludeExpired query, in Unix seconds.
	Now int64
	// Include, when not nil, keeps only the rows of the documents of a
	// subset (a cluster node's share of a view: the documents of the
	// partitions it covers). Query filters rows as it walks them; Reduce
	// reduces the included rows of whole subtrees once per Subset and
	// caches that in the tree beside the reductions of all their rows, so
	// a caller that keeps asking with the same Subset pays what an
	// unfiltered query does once the caches are warm (with ExcludeExpired
	// too, it reduces the included live rows leaf by leaf, uncached).
	Include *Subset
}

// Subset selects documents by id, for Range.Include. Its identity keys
// the reductions cached for it: a caller asking again for the same set
// of documents should pass the same *Subset, and what its function
// returns for an id must never change.
type Subset struct {
	in func(docID string) bool
}

// NewSubset returns the subset of the documents in returns true for.
func NewSubset(in func(docID string) bool) *Subset { return &Subset{in: in} }

// Has reports whether the document with id docID is in s.
func (s *Subset) Has(docID string) bool { return s.in(docID) }

// span is a half-open interval [lo, hi) of tree keys; nil leaves an end open.
type span struct{ lo, hi []byte }

func (s span) empty() bool {
	return s.lo != nil && s.hi != nil && bytes.Compare(s.lo, s.hi) >= 0
}

// spans turns r into the intervals of tree keys to visit, in order,
// appended to dst (a caller's array holds the one span of a key range).
func (r *Range) spans(dst []span) ([]span, error) {
	// below(k, id) is the tree key just below the rows of key k (from document
	// id); above(k, id) the one just above them (up to document id).
	below := func(enc []byte, id string, set bool) []byte {
		if id == "" && !set {
			return enc
		}
		return append(appendEscaped(bytes.Clone(enc), id), terminator)
	}
	above := func(enc []byte, id string, set bool) []byte {
		if id == "" && !set {
			return prefixEnd(enc)
		}
		return append(appendEscaped(bytes.Clone(enc), id), terminator+1)
	}
	if r.Keys != nil {
		// Each key is a range of its own, with the document id bounds
		// applied, as Couchbase folds keys into start and end keys.
		out := slices.Grow(dst, len(r.Keys))
		for _, k := range r.Keys {
			enc, err := EncodeKey(k)
			if err != nil {
				return nil, err
			}
			if !r.Descending {
				out = append(out, span{below(enc, r.StartDocID, r.StartDocIDSet), above(enc, r.EndDocID, r.EndDocIDSet)})
			} else {
				out = append(out, span{below(enc, r.EndDocID, r.EndDocIDSet), above(enc, r.StartDocID, r.StartDocIDSet)})
			}
		}
		return out, nil
	}
	var s span
	var start, end []byte
	var err error
	if r.StartKey != nil {
		if start, err = EncodeKey(r.StartKey); err != nil {
			return nil, err
		}
	}
	if r.EndKey != nil {
		if end, err = EncodeKey(r.EndKey); err != nil {
			return nil, err
		}
	}
	if !r.Descending {
		if start != nil {
			s.lo = below(start, r.StartDocID, r.StartDocIDSet)
		}
		if end != nil {
			if r.InclusiveEnd {
				s.hi = above(end, r.EndDocID, r.EndDocIDSet)
			} else {
				s.hi = below(end, r.EndDocID, r.EndDocIDSet)
			}
		}
	} else {
		if start != nil {
			s.hi = above(start, r.StartDocID, r.StartDocIDSet)
		}
		if end != nil {
			if r.InclusiveEnd {
				s.lo = below(end, r.EndDocID, r.EndDocIDSet)
			} else {
				s.lo = above(end, r.EndDocID, r.EndDocIDSet)
			}
		}
	}
	return append(dst, s), nil
}

// Query calls fn with each row of view selected by r, in index order (reversed
// if r.Descending), from a snapshot taken when Query starts. If fn returns
// ErrStop, Query stops and returns nil; any other error stops it and is
// returned. An invalid key in r gives an error wrapping ErrInvalidKey.
func (ix *Index) Query(ctx context.Context, view string, r Range, fn func(Row) error) error {
	rd, err := ix.Reader()
	if err != nil {
		return err
	}
	defer rd.Close()
	return rd.Query(ctx, view, r, fn)
}

// Query calls fn with each row of view selected by r, in index order
// (reversed if r.Descending), from the Reader's snapshot; ErrStop and errors
// as Index.Query.
func (rdr *Reader) Query(ctx context.Context, view string, r Range, fn func(Row) error) (err error) {
	snap, vi, err := rdr.view(view)
	if err != nil {
		return err
	}
	defer recoverPage(&err)
	var one [1]span
	spans, err := r.spans(one[:0])
	if err != nil {
		return err
	}
	root := snap.roots[vi]
	live, now, include := r.ExcludeExpired, r.Now, r.Include
	c := rdr.ix.getCursor()
	defer rdr.ix.putCursor(c)
	n := 0
	for _, s := range spans {
		if s.empty() {
			continue
		}
		if r.Descending {
			c.seekLT(root, s.hi)
		} else {
			c.seekGE(root, s.lo)
		}
		for c.valid() {
			row := c.row()
			if r.Descending && s.lo != nil && bytes.Compare(row, s.lo) < 0 ||
				!r.Descending && s.hi != nil && bytes.Compare(row, s.hi) >= 0 {
				break
			}
			if n++; n&1023 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if live && c.expired(now) {
				if r.Descending {
					c.prev()
				} else {
					c.next()
				}
				continue
			}
			key, value, id := row.fields()
			if include != nil && !include.in(id) {
				if r.Descending {
					c.prev()
				} else {
					c.next()
				}
				continue
			}
			if err := fn(Row{Key: key, DocID: id, Value: value}); err != nil {
				if errors.Is(err, ErrStop) {
					return nil
				}
				return err
			}
			if r.Descending {
				c.prev()
			} else {
				c.next()
			}
		}
	}
	return nil
}
