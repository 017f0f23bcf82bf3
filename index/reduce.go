package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// Grouping selects how Reduce groups rows, as CouchDB's group and group_level.
type Grouping struct {
	// Exact groups rows whose keys collate equal (group=true).
	Exact bool
	// Level, when Exact is false, is group_level: 0 reduces the whole range to
	// one row with key null; N > 0 groups array keys by their first N elements
	// (a shorter array by all of its elements) and any other key by the whole
	// key.
	Level int
}

// Reduce calls fn with each group of the rows of view selected by r: the group
// key (raw JSON) and the reduction of the group's rows (raw JSON), in index
// order (reversed if r.Descending), from a snapshot taken when Reduce starts.
// With r.Keys, each key's rows are grouped on their own, in the order of Keys,
// so with g.Exact each given key that has rows gives one row. A range without
// rows gives no row at all, as CouchDB answers {"rows":[]}.
//
// Reductions of whole subtrees are cached in the tree, so a group costs a few
// Reducer calls whatever its number of rows. Errors from the Reducer are
// returned as they are; a reduction longer than MaxReductionSize gives an error
// wrapping ErrReductionTooLarge. fn returning ErrStop ends Reduce with nil.
func (ix *Index) Reduce(ctx context.Context, view string, r Range, g Grouping, fn func(key, value []byte) error) error {
	rd, err := ix.Reader()
	if err != nil {
		return err
	}
	defer rd.Close()
	return rd.Reduce(ctx, view, r, g, fn)
}

// Reduce calls fn with each group of the rows of view selected by r and its
// reduction, from the Reader's snapshot; as Index.Reduce otherwise.
func (rdr *Reader) Reduce(ctx context.Context, view string, r Range, g Grouping, fn func(key, value []byte) error) (err error) {
	snap, vi, err := rdr.view(view)
	if err != nil {
		return err
	}
	defer recoverPage(&err)
	red := rdr.ix.views[vi].Reducer
	if red == nil {
		return fmt.Errorf("%w: %q", ErrNoReducer, view)
	}
	spans, err := r.spans(nil)
	if err != nil {
		return err
	}
	rd := reduction{ctx: ctx, r: red, live: r.ExcludeExpired, now: r.Now, include: r.Include}
	if r.ExcludeExpired && r.Include == nil && r.Keys == nil && !g.Exact && g.Level <= 0 && len(spans) == 1 && spans[0].lo == nil && spans[0].hi == nil {
		// The whole view, live: from the rows that never expire and a
		// suffix of the expiry tree (see wholeLive).
		v, ok, err := rd.wholeLive(snap.roots[vi], snap.expRoots[vi])
		if err != nil || !ok {
			return err
		}
		if err := fn(jsonNull, v); err != nil && !errors.Is(err, ErrStop) {
			return err
		}
		return nil
	}
	for _, s := range spans {
		if s.empty() {
			continue
		}
		if err := rd.groups(ctx, snap.roots[vi], s, g, r.Descending, fn); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

// reduction computes reductions of rows with one Reducer, for one goroutine.
type reduction struct {
	ctx context.Context // passed to the Reducer
	r   Reducer         // nil: count live rows only (liveOf)
	// live leaves out the rows expired at now (Range.ExcludeExpired).
	live bool
	now  int64
	// include, when not nil, keeps only the rows of its documents
	// (Range.Include): whole subtrees answer from their share caches.
	include  *Subset
	included []row    // scratch: the included rows of a leaf
	vals     [][]byte // partial reductions of a range
	// scratch: the live rows of a leaf, and the reductions of its suffixes
	// in expiration order (buildSuffix)
	liveRows []row
	leafVals [][]byte
	pair     [2][]byte
	stack    [][]byte // scratch: the live reductions of inner nodes' children (liveOf)
	// scratch for Reduce
	keys, values [][]byte
	ids          []string
}

// groups calls fn with each group of the rows in s.
func (rd *reduction) groups(ctx context.Context, root *node, s span, g Grouping, desc bool, fn func(key, value []byte) error) error {
	if !g.Exact && g.Level <= 0 {
		v, ok, err := rd.rangeValue(root, s.lo, s.hi)
		if err != nil || !ok {
			return err
		}
		return fn(jsonNull, v)
	}
	var c cursor
	lo, hi := s.lo, s.hi
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Find the next group's first row, then reduce the group's rows in one
		// range, then skip past it.
		if desc {
			c.seekLT(root, hi)
		} else {
			c.seekGE(root, lo)
		}
		if !c.valid() {
			return nil
		}
		// Step over expired rows to the group's first live row.
		for rd.live && c.valid() && c.expired(rd.now) {
			if desc {
				c.prev()
			} else {
				c.next()
			}
		}
		if !c.valid() {
			return nil
		}
		row := c.row()
		if desc && lo != nil && bytes.Compare(row, lo) < 0 || !desc && hi != nil && bytes.Compare(row, hi) >= 0 {
			return nil
		}
		p := groupPrefix(row, g.Level, g.Exact)
		glo, ghi := lo, hi
		if desc {
			if glo == nil || bytes.Compare(glo, p) < 0 {
				glo = p
			}
		} else if end := prefixEnd(p); ghi == nil || bytes.Compare(end, ghi) < 0 {
			ghi = end
		}
		v, ok, err := rd.rangeValue(root, glo, ghi)
		if err != nil {
			return err
		}
		if ok { // not ok: none of the group's rows is included
			key, _, _ := row.fields()
			if err := fn(groupKey(key, g), v); err != nil {
				return err
			}
		}
		if desc {
			hi = glo
		} else {
			lo = ghi
		}
	}
}

// groupKey returns the key of the group of a row with key raw.
func groupKey(raw []byte, g Grouping) []byte {
	if g.Exact {
		return raw
	}
	s := scanner{b: raw}
	if s.peek() != '[' {
		return raw
	}
	s.i++
	first, last := -1, -1
	for n := 0; s.peek() != ']'; n++ {
		if n == g.Level {
			out := make([]byte, 0, last-first+2)
			out = append(out, '[')
			out = append(out, raw[first:last]...)
			return append(out, ']')
		}
		if first < 0 {
			first = s.i
		}
		s.skipValue()
		last = s.i
		skipComma(&s)
	}
	return raw
}

// rangeValue returns the reduction of the rows of the tree under root in
// [lo, hi); ok is false if there are none.
func (rd *reduction) rangeValue(root *node, lo, hi []byte) (v []byte, ok bool, err error) {
	rd.vals = rd.vals[:0]
	if err := rd.collect(root, lo, hi); err != nil || len(rd.vals) == 0 {
		return nil, false, err
	}
	v, err = rd.rereduce(rd.vals)
	return v, err == nil, err
}

// collect appends to rd.vals reductions that together cover the rows of n in
// [lo, hi): cached reductions of whole subtrees where it can, and reductions
// of the rows at the ends of the range.
func (rd *reduction) collect(n *node, lo, hi []byte) error {
	if n.count == 0 {
		return nil
	}
	lo, hi = trimBounds(n, lo, hi)
	if lo == nil && hi == nil && rd.include != nil && !rd.live {
		sc, err := rd.shareOf(n)
		if err == nil && sc.count > 0 {
			rd.vals = append(rd.vals, sc.red)
		}
		return err
	}
	if lo == nil && hi == nil && rd.include == nil {
		if rd.live && !n.allLive(rd.now) {
			lc, err := rd.liveOf(n)
			if err == nil && lc.count > 0 {
				rd.vals = append(rd.vals, lc.red)
			}
			return err
		}
		v, err := rd.node(n)
		if err != nil {
			return err
		}
		rd.vals = append(rd.vals, v)
		return nil
	}
	if n.leaf() {
		items := n.rows()
		i, j := 0, len(items)
		if lo != nil {
			i, _ = searchItems(items, lo)
		}
		if hi != nil {
			j, _ = searchItems(items, hi)
		}
		if i >= j {
			return nil
		}
		items = items[i:j]
		if rd.live && !n.allLive(rd.now) {
			items = rd.liveOnly(items)
			if len(items) == 0 {
				return nil
			}
		}
		if rd.include != nil {
			if items = rd.includedOnly(items); len(items) == 0 {
				return nil
			}
		}
		v, err := rd.rows(items)
		if err != nil {
			return err
		}
		rd.vals = append(rd.vals, v)
		return nil
	}
	return eachChildIn(n, lo, hi, rd.collect)
}

// includedOnly returns the rows of items that rd.include keeps, in
// rd.included (reused by the next call).
func (rd *reduction) includedOnly(items []row) []row {
	rd.included = rd.included[:0]
	for _, r := range items {
		if _, _, id := r.fields(); rd.include.in(id) {
			rd.included = append(rd.included, r)
		}
	}
	return rd.included
}

// shareOf returns the number and, if rd has a Reducer, the reduction of
// the rows of rd.include under n, caching them in n for that Subset (the
// last one asked). Concurrent callers may compute them twice; they store
// the same values.
func (rd *reduction) shareOf(n *node) (shareCache, error) {
	reduce := rd.r != nil
	if p := n.share.Load(); p != nil && p.set == rd.include && (p.hasRed || !reduce) {
		return *p, nil
	}
	sc := &shareCache{set: rd.include, hasRed: reduce}
	if n.leaf() {
		items := rd.includedOnly(n.rows())
		sc.count = len(items)
		if reduce && sc.count > 0 {
			v, err := rd.rows(items)
			if err != nil {
				return shareCache{}, err
			}
			sc.red = v
		}
	} else {
		var vals [][]byte
		for _, c := range n.children {
			if c.count == 0 {
				continue
			}
			cs, err := rd.shareOf(c)
			if err != nil {
				return shareCache{}, err
			}
			sc.count += cs.count
			if reduce && cs.count > 0 {
				vals = append(vals, cs.red)
			}
		}
		if len(vals) > 0 {
			v, err := rd.rereduce(vals)
			if err != nil {
				return shareCache{}, err
			}
			sc.red = v
		}
	}
	n.share.Store(sc)
	return *sc, nil
}

// CountRows returns the number of rows of view whose documents are in s,
// from the Reader's snapshot: cached per subtree for s, as Reduce's are.
func (rdr *Reader) CountRows(ctx context.Context, view string, s *Subset) (n int, err error) {
	snap, vi, err := rdr.view(view)
	if err != nil {
		return 0, err
	}
	defer recoverPage(&err)
	root := snap.roots[vi]
	if root.count == 0 {
		return 0, nil
	}
	rd := reduction{ctx: ctx, include: s}
	sc, err := rd.shareOf(root)
	return sc.count, err
}

// node returns the reduction of the subtree n (not empty), caching it in n.
// Concurrent callers may compute it twice; they store the same value.
func (rd *reduction) node(n *node) ([]byte, error) {
	if p := n.red.Load(); p != nil {
		return *p, nil
	}
	var v []byte
	var err error
	if n.leaf() {
		v, err = rd.rows(n.rows())
	} else {
		vals := make([][]byte, 0, len(n.children))
		for _, c := range n.children {
			if c.count == 0 {
				continue
			}
			cv, err := rd.node(c)
			if err != nil {
				return nil, err
			}
			vals = append(vals, cv)
		}
		v, err = rd.rereduce(vals)
	}
	if err != nil {
		return nil, err
	}
	n.red.Store(&v)
	return v, nil
}

// rows reduces rows with Reduce.
func (rd *reduction) rows(rows []row) ([]byte, error) {
	rd.keys, rd.ids, rd.values = rd.keys[:0], rd.ids[:0], rd.values[:0]
	for _, r := range rows {
		key, value, id := r.fields()
		rd.keys = append(rd.keys, key)
		rd.ids = append(rd.ids, id)
		rd.values = append(rd.values, value)
	}
	v, err := rd.r.Reduce(rd.ctx, rd.keys, rd.ids, rd.values)
	if err != nil {
		return nil, err
	}
	return checkSize(v)
}

// rereduce combines reductions with Rereduce (one needs no combining).
func (rd *reduction) rereduce(vals [][]byte) ([]byte, error) {
	if len(vals) == 1 {
		return vals[0], nil
	}
	v, err := rd.r.Rereduce(rd.ctx, vals)
	if err != nil {
		return nil, err
	}
	return checkSize(v)
}

func checkSize(v []byte) ([]byte, error) {
	if len(v) > MaxReductionSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrReductionTooLarge, len(v))
	}
	return v, nil
}
