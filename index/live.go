package index

import "math"

// Exact answers at an instant (Range.ExcludeExpired).
//
// Every row carries its document's expiration, and every node the earliest
// non-zero expiration beneath it (minExp, kept by the writer as it keeps
// count). At an instant now, a node with minExp 0 or above now holds live
// rows only: its stored count and cached reduction answer as they are.
// Below a node that holds expired rows, a query descends; what it finds — the
// number of live rows, their reduction, and the interval of instants over
// which they stay the same (from the latest expiration passed to the next to
// come) — it caches in the node (live), as red is cached: atomically, in a
// node that may be shared by snapshots, never written by the writer. A later
// query inside that interval takes the cached value; one after the next
// expiration descends again, but only into the children where something
// expired since. So an exact answer costs about the expired rows the index
// still holds (until the pager purges them), and a query with nothing newly
// expired costs what an ordinary one does.

// expired reports whether the row at c has expired at now. It reads the
// row's expiration only when its leaf holds an expired row.
func (c *cursor) expired(now int64) bool {
	f := c.stack[len(c.stack)-1]
	return !f.n.allLive(now) && isExpired(f.n.items[f.i].exp(), now)
}

// liveOnly returns the rows of items not expired at rd.now, in rd's scratch.
func (rd *reduction) liveOnly(items []row) []row {
	rd.liveRows = rd.liveRows[:0]
	for _, r := range items {
		if !isExpired(r.exp(), rd.now) {
			rd.liveRows = append(rd.liveRows, r)
		}
	}
	return rd.liveRows
}

// liveOf returns the live rows of the subtree n at rd.now: their number,
// their reduction if rd has a Reducer (nil when there are none), and the
// instants [lo, hi) over which that holds. It caches what it computes in the
// nodes whose rows it had to look at. Concurrent callers may compute a value
// twice; they store the same one.
func (rd *reduction) liveOf(n *node) (liveCache, error) {
	now, reduce := rd.now, rd.r != nil
	if n.allLive(now) {
		lc := liveCache{lo: math.MinInt64, hi: n.minExp, count: n.count, hasRed: reduce}
		if reduce && n.count > 0 {
			v, err := rd.node(n)
			if err != nil {
				return liveCache{}, err
			}
			lc.red = v
		}
		return lc, nil
	}
	if p := n.live.Load(); p != nil && p.valid(now) && (p.hasRed || !reduce) {
		return *p, nil
	}
	var lcp *liveCache // the value to cache
	if n.leaf() {
		// One allocation holds the leaf's value and its chunks'.
		lb := &leafLive{}
		lcp = &lb.lc
		*lcp = liveCache{lo: math.MinInt64, hasRed: reduce, chunks: lb.chunks[:(len(n.items)+liveChunk-1)/liveChunk]}
	} else {
		lcp = &liveCache{lo: math.MinInt64, hasRed: reduce}
	}
	lc := lcp
	if n.leaf() {
		var prev []liveCache
		if p := n.live.Load(); p != nil && (p.hasRed || !reduce) {
			prev = p.chunks
		}
		vals := rd.leafVals[:0]
		defer func() { rd.leafVals = vals[:0] }()
		for i := range lc.chunks {
			ch := &lc.chunks[i]
			if i < len(prev) && prev[i].valid(now) {
				*ch = prev[i]
			} else if err := rd.liveChunk(ch, n.items[i*liveChunk:min((i+1)*liveChunk, len(n.items))]); err != nil {
				return liveCache{}, err
			}
			lc.lo, lc.hi = max(lc.lo, ch.lo), minNZ(lc.hi, ch.hi)
			lc.count += ch.count
			if reduce && ch.count > 0 {
				vals = append(vals, ch.red)
			}
		}
		if len(vals) > 0 {
			v, err := rd.rereduce(vals)
			if err != nil {
				return liveCache{}, err
			}
			lc.red = v
		}
	} else {
		// The children's reductions go on rd.stack above base: each
		// child's own use of it ends before it returns.
		base := len(rd.stack)
		defer func() { rd.stack = rd.stack[:base] }()
		for _, c := range n.children {
			cl, err := rd.liveOf(c)
			if err != nil {
				return liveCache{}, err
			}
			lc.lo, lc.hi = max(lc.lo, cl.lo), minNZ(lc.hi, cl.hi)
			lc.count += cl.count
			if reduce && cl.count > 0 {
				rd.stack = append(rd.stack, cl.red)
			}
		}
		if vals := rd.stack[base:]; len(vals) > 0 {
			v, err := rd.rereduce(vals)
			if err != nil {
				return liveCache{}, err
			}
			lc.red = v
		}
	}
	if p := n.live.Load(); p == nil || !p.hasRed || reduce || !p.valid(now) {
		n.live.Store(lcp)
	}
	return *lc, nil
}

// leafLive is a leaf's liveCache with room for its chunks, in one
// allocation.
type leafLive struct {
	lc     liveCache
	chunks [(maxItems + liveChunk - 1) / liveChunk]liveCache
}

// liveChunk fills ch with the live rows of items (a chunk of a leaf) at
// rd.now: their number, reduction and interval of validity.
func (rd *reduction) liveChunk(ch *liveCache, items []row) error {
	now, reduce := rd.now, rd.r != nil
	*ch = liveCache{lo: math.MinInt64, hasRed: reduce}
	live := rd.liveRows[:0]
	for _, r := range items {
		if e := r.exp(); isExpired(e, now) {
			ch.lo = max(ch.lo, e)
		} else {
			ch.hi = minNZ(ch.hi, e)
			live = append(live, r)
		}
	}
	rd.liveRows = live[:0]
	ch.count = len(live)
	if reduce && len(live) > 0 {
		v, err := rd.rows(live)
		if err != nil {
			return err
		}
		ch.red = v
	}
	return nil
}

// Whole-view answers (no key range, no grouping) do not descend at all.
//
// The rows of a view live at now are those that never expire and those whose
// expiration is after now. The first are the same at every instant: each
// node caches their number and reduction (never) once computed, and it never
// goes stale, as a published node's rows never change. The second are a
// suffix of the view's expiry tree (ordered by expiration), counted from node
// counts and reduced from its cached reductions. So a whole-view exact
// reduce costs O(log n) node visits and Reducer calls, however many rows
// expired since the last query; its answer is also cached in the root's live
// cache for the interval between the expirations around now, so a repeated
// one costs none.

// maxExactExp bounds the instants at which the expiry tree is split by
// instant: its keys encode expirations as JSON numbers (float64), exact
// below 2^53, so that "expiration > now" is "key >= encodeExp(now+1)" for
// every now with |now+1| <= 2^53. Other instants take the descending path.
const maxExactExp = 1 << 53

// splitsAt reports whether the expiry tree can be split at instant now.
func splitsAt(now int64) bool { return now > -maxExactExp-1 && now < maxExactExp }

// liveRows returns the number of rows of a view (tree root, expiry tree exp)
// live at now, from node counts alone: the rows that never expire (those of
// the view less those of its expiry tree) and the expiry tree's rows after
// now.
func liveRows(root, exp *node, now int64) (int, bool) {
	if root.allLive(now) {
		return root.count, true
	}
	if !splitsAt(now) {
		return 0, false
	}
	return root.count - exp.count + rangeCount(exp, encodeExp(now+1), nil), true
}

// wholeLive returns the reduction of the rows of a view (tree root, expiry
// tree exp) live at rd.now, and whether there are any, at the cost of a few
// paths of the two trees (see above). rd must have a Reducer.
func (rd *reduction) wholeLive(root, exp *node) ([]byte, bool, error) {
	now := rd.now
	if root.allLive(now) || root.leaf() || !splitsAt(now) {
		// Nothing to step around, or one leaf: the usual way is as cheap.
		return rd.rangeValue(root, nil, nil)
	}
	if p := root.live.Load(); p != nil && p.valid(now) && p.hasRed {
		return p.red, p.count > 0, nil
	}
	bound := encodeExp(now + 1)
	never := root.count - exp.count
	after := rangeCount(exp, bound, nil)
	lc := &liveCache{count: never + after, hasRed: true}
	// The live rows stay the same from the latest expiration passed (there
	// is one: root is not all live) to the next one.
	var c cursor
	if c.seekLT(exp, bound); !c.valid() {
		return rd.rangeValue(root, nil, nil) // cannot be: an expired row is in exp
	}
	lc.lo = c.row().exp()
	if c.seekGE(exp, bound); c.valid() {
		lc.hi = c.row().exp()
	}
	var vals [][]byte
	if never > 0 {
		_, v, err := rd.neverOf(root)
		if err != nil {
			return nil, false, err
		}
		vals = append(vals, v)
	}
	if after > 0 {
		ex := reduction{ctx: rd.ctx, r: rd.r} // the expiry tree's rows are all counted
		v, _, err := ex.rangeValue(exp, bound, nil)
		if err != nil {
			return nil, false, err
		}
		vals = append(vals, v)
	}
	if len(vals) > 0 {
		v, err := rd.rereduce(vals)
		if err != nil {
			return nil, false, err
		}
		lc.red = v
	}
	root.live.Store(lc)
	return lc.red, lc.count > 0, nil
}

// neverOf returns the number and reduction (nil when there are none) of the
// rows under n that never expire, caching them in n. rd must have a Reducer.
// Concurrent callers may compute them twice; they store the same value.
func (rd *reduction) neverOf(n *node) (int, []byte, error) {
	switch {
	case n.count == 0:
		return 0, nil, nil
	case n.minExp == 0: // no row beneath expires
		v, err := rd.node(n)
		return n.count, v, err
	}
	if p := n.never.Load(); p != nil {
		return p.count, p.red, nil
	}
	nc := &neverCache{}
	if n.leaf() {
		rows := rd.liveRows[:0]
		for _, r := range n.items {
			if r.exp() == 0 {
				rows = append(rows, r)
			}
		}
		rd.liveRows = rows[:0]
		if nc.count = len(rows); nc.count > 0 {
			v, err := rd.rows(rows)
			if err != nil {
				return 0, nil, err
			}
			nc.red = v
		}
	} else {
		var vals [][]byte
		for _, c := range n.children {
			cn, cv, err := rd.neverOf(c)
			if err != nil {
				return 0, nil, err
			}
			if cn > 0 {
				nc.count += cn
				vals = append(vals, cv)
			}
		}
		if len(vals) > 0 {
			v, err := rd.rereduce(vals)
			if err != nil {
				return 0, nil, err
			}
			nc.red = v
		}
	}
	n.never.Store(nc)
	return nc.count, nc.red, nil
}
