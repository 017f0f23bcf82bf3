package index

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"
)

// Exact answers at an instant (Range.ExcludeExpired).
//
// Every row carries its document's expiration, and every node the earliest
// non-zero expiration beneath it (minExp, kept by the writer as it keeps
// count). At an instant now, a node with minExp 0 or above now holds live
// rows only: its stored count and cached reduction answer as they are.
// Below an inner node that holds expired rows, a query descends; what it
// finds — the number of live rows, their reduction, and the interval of
// instants over which they stay the same (from the latest expiration passed
// to the next to come) — it caches in the node (live), as red is cached:
// atomically, in a node that may be shared by snapshots, never written by
// the writer. A later query inside that interval takes the cached value; one
// after the next expiration descends again, but only into the children where
// something expired since. Leaves answer from reductions by expiration order
// that never go stale (see leafLive). So an exact answer costs about the
// expired rows the index still holds (until the pager purges them), and a
// query with nothing newly expired costs what an ordinary one does.

// expired reports whether the row at c has expired at now. It reads the
// row's expiration only when its leaf holds an expired row.
func (c *cursor) expired(now int64) bool {
	f := c.stack[len(c.stack)-1]
	return !f.n.allLive(now) && isExpired(f.items[f.i].exp(), now)
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
	if n.leaf() {
		return rd.leafLive(n)
	}
	if p := n.live.Load(); p != nil && p.valid(now) && (p.hasRed || !reduce) {
		return *p, nil
	}
	lc := &liveCache{lo: math.MinInt64, hasRed: reduce}
	// The children's reductions go on rd.stack above base: each child's
	// own use of it ends before it returns.
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
	if p := n.live.Load(); p == nil || !p.hasRed || reduce || !p.valid(now) {
		n.live.Store(lc)
	}
	return *lc, nil
}

// Leaves answer from what never goes stale.
//
// A leaf's live rows at any instant are a suffix of its rows ordered by
// expiration (those that never expire last): the rows after the k that have
// expired. So a leaf caches, once, its rows' expirations in that order and
// the reduction of every such suffix that can be live (expSuffix); at an
// instant, a binary search of the expirations gives k, the count, the
// interval of validity and the reduction, with no Reducer call, no row read
// and no allocation. A published leaf's rows never change, so the cache
// holds for as long as the leaf lives; a write makes a new leaf without one.
// Building it costs two Reducer calls per distinct expiration of the leaf
// (the reduction of the rows expiring then, and its rereduction with the
// suffix after them), once per leaf.

// leafLive returns the live rows of leaf n at rd.now, as liveOf does, from
// n's expSuffix (built and cached if need be).
func (rd *reduction) leafLive(n *node) (liveCache, error) {
	reduce := rd.r != nil
	s := n.suffix.Load()
	if s == nil || reduce && !s.hasRed {
		var err error
		if s, err = rd.buildSuffix(n); err != nil {
			return liveCache{}, err
		}
	}
	m := s.len()
	k := s.expiredAt(rd.now)
	lc := liveCache{lo: math.MinInt64, count: n.count - k, hasRed: reduce}
	if k > 0 {
		lc.lo = s.exp(k - 1)
	}
	if k < m {
		lc.hi = s.exp(k)
	}
	switch {
	case !reduce || lc.count == 0:
	case s.tooBig:
		// Reduced from the live rows, uncached (see tooBig).
		v, err := rd.rows(rd.liveOnly(n.rows()))
		if err != nil {
			return liveCache{}, err
		}
		lc.red = v
	case k > 0:
		lc.red = s.red(k)
	default:
		v, err := rd.node(n) // nothing expired: the whole leaf
		if err != nil {
			return liveCache{}, err
		}
		lc.red = v
	}
	return lc, nil
}

// expSuffix is what a leaf's rows are, ordered by expiration (see
// leafLive), for its m expiring rows: ent[2i] is the i-th of their
// expirations, ascending; with hasRed, the reduction of the rows left once
// the first k of that order are gone (1 <= k <= m; the rows that never
// expire come last) is vals[ent[2k-3]:ent[2k-1]] (from 0 for k = 1), empty
// when no row is left. Interleaved so, what an instant needs is in a few
// adjacent words. at remembers the k of the last instant asked, a hint
// checked before use: time mostly moves on, and a leaf's k seldom changes.
//
// tooBig (with hasRed) says the reductions were computed but not kept, as
// they took more than maxSuffixRatio times the bytes of the leaf's rows (a
// reduce whose result grows with its rows, such as one that lists them,
// would make them quadratic): the leaf's live rows are then reduced from
// the rows at each query, and vals is nil.
type expSuffix struct {
	ent    []int64
	vals   []byte
	hasRed bool
	tooBig bool
	at     atomic.Int32
}

// maxSuffixRatio bounds the bytes of a leaf's reductions by expiration, as
// a multiple of the bytes of its rows.
const maxSuffixRatio = 2

// len returns the number of the leaf's expiring rows.
func (s *expSuffix) len() int { return len(s.ent) / 2 }

// exp returns the i-th earliest expiration of the leaf's rows.
func (s *expSuffix) exp(i int) int64 { return s.ent[2*i] }

// end returns where in vals the reduction of the rows left once the first
// k (>= 1) are gone ends.
func (s *expSuffix) end(k int) int64 { return s.ent[2*k-1] }

// expiredAt returns the number of the leaf's rows expired at now.
func (s *expSuffix) expiredAt(now int64) int {
	m := s.len()
	if k := int(s.at.Load()); k <= m {
		if k == m || now < s.exp(k) {
			if k == 0 || s.exp(k-1) <= now {
				return k
			}
		} else if k+1 == m || now < s.exp(k+1) {
			// One more has expired (the usual step of a clock moving on).
			s.at.Store(int32(k + 1))
			return k + 1
		}
	}
	lo, hi := 0, m
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if s.exp(h) <= now {
			lo = h + 1
		} else {
			hi = h
		}
	}
	s.at.Store(int32(lo))
	return lo
}

// red returns the reduction of the rows left once the first k (>= 1) in
// expiration order are gone.
func (s *expSuffix) red(k int) []byte {
	a := int64(0)
	if k > 1 {
		a = s.end(k - 1)
	}
	b := s.end(k)
	return s.vals[a:b:b]
}

// buildSuffix computes leaf n's expSuffix (with reductions if rd has a
// Reducer) and caches it in n. Concurrent callers may compute it twice;
// they store the same value.
func (rd *reduction) buildSuffix(n *node) (*expSuffix, error) {
	byExp := rd.liveRows[:0]
	never := 0
	items := n.rows()
	for _, r := range items {
		if r.exp() != 0 {
			byExp = append(byExp, r)
		}
	}
	m := len(byExp)
	for _, r := range items {
		if r.exp() == 0 {
			byExp = append(byExp, r)
			never++
		}
	}
	rd.liveRows = byExp[:0]
	slices.SortStableFunc(byExp[:m], func(a, b row) int { return cmp.Compare(a.exp(), b.exp()) })
	s := &expSuffix{ent: make([]int64, 2*m), hasRed: rd.r != nil}
	for i, r := range byExp[:m] {
		s.ent[2*i] = r.exp()
	}
	if s.hasRed && m > 0 {
		// The suffixes from the last one back: suf[k-1] is the reduction of
		// byExp[k:]. Rows expiring at the same instant go in one Reduce
		// call: no instant has only some of them expired, so the suffixes
		// that start inside such a run are never asked for (left empty).
		suf := slices.Grow(rd.leafVals[:0], m)[:m]
		clear(suf)
		defer func() { rd.leafVals = suf[:0] }()
		var next []byte
		if never > 0 {
			v, err := rd.rows(byExp[m:])
			if err != nil {
				return nil, err
			}
			next = v
		}
		for k := m; ; {
			suf[k-1] = next
			j := k - 1 // byExp[j:k] expire at the same instant
			for j > 0 && s.exp(j-1) == s.exp(k-1) {
				j--
			}
			if j == 0 {
				break
			}
			v, err := rd.rows(byExp[j:k])
			if err != nil {
				return nil, err
			}
			if next != nil {
				rd.pair[0], rd.pair[1] = v, next
				if v, err = rd.rereduce(rd.pair[:]); err != nil {
					return nil, err
				}
			}
			next, k = v, j
		}
		size := 0
		for _, v := range suf {
			size += len(v)
		}
		rowBytes := 0
		for _, r := range items {
			rowBytes += len(r)
		}
		if size > maxSuffixRatio*rowBytes {
			s.tooBig = true
			n.suffix.Store(s)
			return s, nil
		}
		s.vals = make([]byte, 0, size)
		for i, v := range suf {
			s.vals = append(s.vals, v...)
			s.ent[2*i+1] = int64(len(s.vals))
		}
	}
	n.suffix.Store(s)
	return s, nil
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
		for _, r := range n.rows() {
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
