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
