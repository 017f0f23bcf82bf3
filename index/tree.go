package index

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strconv"
	"sync/atomic"
	"unsafe"
)

// Node capacities of the in-memory B+tree. A leaf holds at most maxItems rows
// and an inner node at most maxChildren children; a node other than the root
// holds at least a quarter of that (see rebalance). Bulk loading fills nodes to
// three quarters.
const (
	maxItems    = 64
	maxChildren = 64
	loadItems   = maxItems * 3 / 4
	loadFanout  = maxChildren * 3 / 4
)

// row is one view row, in one immutable byte slice: its tree key (ck: encoded
// key | escaped document id | terminator | 4-byte emit ordinal), then its
// stored value (uvarint length of the key JSON | key JSON | value JSON), then
// the 8-byte big-endian expiration of its document (Unix seconds, 0: never;
// last, so that reading it costs nothing). Tree
// keys are never prefixes of one another, so rows order as their tree keys do,
// and a bound that is not a whole tree key compares with a row as with its
// tree key.
type row []byte

// ckLen returns the length of the row's tree key.
func (r row) ckLen() int {
	n := encLen(r)
	return n + bytes.IndexByte(r[n:], terminator) + 1 + 4
}

func (r row) ck() []byte {
	n := r.ckLen()
	return r[:n:n]
}

// fields returns the row's key JSON, value JSON and document id.
func (r row) fields() (key, value []byte, id string) {
	n := encLen(r)
	t := n + bytes.IndexByte(r[n:], terminator)
	if esc := r[n:t]; bytes.IndexByte(esc, escByte) < 0 {
		// The string shares the row's bytes, which never change (a row is
		// immutable once built), so it needs no copy.
		id = unsafe.String(unsafe.SliceData(esc), len(esc))
	} else {
		idb, _ := unescape(r[n : t+1])
		id = string(idb)
	}
	stored := r[t+1+4 : len(r)-8]
	klen, vn := binary.Uvarint(stored)
	return stored[vn : vn+int(klen) : vn+int(klen)], stored[vn+int(klen):], id
}

// exp returns the expiration of the row's document: Unix seconds, 0 for never.
func (r row) exp() int64 { return int64(binary.BigEndian.Uint64(r[len(r)-8:])) }

// appendRow appends a row built from its encoded key, document id, emit
// ordinal, JSON and its document's expiration.
func appendRow(dst, enc []byte, id string, ord int, key, value []byte, exp int64) []byte {
	dst = appendCK(dst, enc, id, ord)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(append(dst, key...), value...)
	return binary.BigEndian.AppendUint64(dst, uint64(exp))
}

// appendCK appends the tree key of a row: encoded key, escaped document id,
// terminator and the big-endian emit ordinal. Rows order by key collation, then
// document id byte-wise, then emit order.
func appendCK(dst, enc []byte, id string, ord int) []byte {
	dst = append(dst, enc...)
	dst = appendEscaped(dst, id)
	dst = append(dst, terminator)
	return binary.BigEndian.AppendUint32(dst, uint32(ord))
}

// ord returns the row's emit ordinal.
func (r row) ord() int {
	ck := r.ck()
	return int(binary.BigEndian.Uint32(ck[len(ck)-4:]))
}

// encodeExp is the encoded key that orders rows by expiration in a view's
// expiry tree: the expiration as a JSON number.
func encodeExp(exp int64) []byte {
	enc, _ := EncodeKey(strconv.AppendInt(nil, exp, 10)) // a number always encodes
	return enc
}

// expiryRow appends the row of r (whose expiration is not 0) in its view's
// expiry tree: r's key JSON, value, document id and emit ordinal, under the
// tree key of its expiration (see snapshot.expRoots).
func expiryRow(dst []byte, r row) []byte {
	key, value, id := r.fields()
	return appendRow(dst, encodeExp(r.exp()), id, r.ord(), key, value, r.exp())
}

// expiryCK appends the tree key of r's row in its view's expiry tree.
func expiryCK(dst []byte, r row) []byte {
	_, _, id := r.fields()
	return appendCK(dst, encodeExp(r.exp()), id, r.ord())
}

// validRow reports whether r is a well-formed row (of a file).
func validRow(r []byte) bool {
	n := encLen(r)
	if n < 0 {
		return false
	}
	t := bytes.IndexByte(r[n:], terminator)
	if t < 0 || len(r) < n+t+1+4 {
		return false
	}
	stored := r[n+t+1+4:]
	if len(stored) < 8 {
		return false
	}
	stored = stored[:len(stored)-8]
	klen, vn := binary.Uvarint(stored)
	return vn > 0 && uint64(len(stored)-vn) >= klen
}

// node is a node of a copy-on-write B+tree of rows ordered by ck. A node whose
// gen is the writer's current generation is private to the writer and changed in
// place; any other node may be shared by published snapshots and is never
// changed, except for red, the cached reduction of its subtree, live, the
// cached reduction of its live rows (inner nodes), suffix, the cached
// reductions of its rows by expiration (leaves), and never, the cached
// reduction of its rows that never expire, which readers fill in atomically.
type node struct {
	gen    uint64
	count  int   // rows in the subtree
	minExp int64 // the earliest non-zero expiration of a row in the subtree; 0: none

	items []row // leaf (children == nil)

	// Inner node: keys[i] (i >= 1) is above every row of children[i-1] and at
	// most every row of children[i]. keys[0] does not route; in a node made by
	// a split it is the separator its parent takes (see sep).
	keys     [][]byte
	children []*node

	red    atomic.Pointer[[]byte]
	live   atomic.Pointer[liveCache]
	suffix atomic.Pointer[expSuffix]
	never  atomic.Pointer[neverCache]
	share  atomic.Pointer[shareCache]

	// page is the node's page in a paged index's file (see pager), 0 for
	// none; a paged leaf's items are then nil and read through ps (see
	// rows).
	page uint64
	ps   *pager
	// delta, on a paged leaf changed since its page was written, is what
	// changed: its rows are the page's less delta.gone, plus delta.ins
	// (see leafDelta). Nil otherwise.
	delta *leafDelta
}

// leafDelta is how a dirty leaf of a paged index differs from its page:
// the tree keys of the page's rows deleted (gone) and the rows inserted
// (ins), each sorted. A change to a leaf on disk thus costs the heap of
// the change, not of a copy of the leaf, and needs no read of its page;
// the leaf is merged with its page only when it splits or merges, or at
// the write-back that writes it (see wtx.materialize, pager.write).
type leafDelta struct {
	gone [][]byte
	ins  []row
}

// merge returns the rows of a page holding rows changed by d.
func (d *leafDelta) merge(rows []row) []row { return d.mergeInto(nil, rows) }

// mergeInto is merge appending the rows to dst[:0].
func (d *leafDelta) mergeInto(dst []row, rows []row) []row {
	out := slices.Grow(dst[:0], len(rows)-len(d.gone)+len(d.ins))
	g, i := 0, 0
	for _, r := range rows {
		ck := r.ck()
		for g < len(d.gone) && bytes.Compare(d.gone[g], ck) < 0 {
			g++
		}
		if g < len(d.gone) && bytes.Equal(d.gone[g], ck) {
			g++
			continue
		}
		for i < len(d.ins) && bytes.Compare(d.ins[i], r) < 0 {
			out = append(out, d.ins[i])
			i++
		}
		out = append(out, r)
	}
	return append(out, d.ins[i:]...)
}

// clone returns a copy of d that the writer may change.
func (d *leafDelta) clone() *leafDelta {
	if d == nil {
		return &leafDelta{}
	}
	return &leafDelta{gone: slices.Clone(d.gone), ins: slices.Clone(d.ins)}
}

// rows returns the rows of leaf n: its items, or, for a leaf of a paged
// index whose rows are on disk, its page's rows through the page cache. A
// page that cannot be read panics with a pageError, which the entry points
// of the package recover as an error (see recoverPage).
func (n *node) rows() []row {
	if n.page == 0 || n.items != nil {
		return n.items
	}
	rows, err := n.ps.leafRows(n.page)
	if err != nil {
		panic(pageError{err})
	}
	if n.delta != nil {
		return n.delta.merge(rows)
	}
	return rows
}

// neverCache is what a node's rows that never expire (expiration 0) are:
// their number and reduction (nil when there are none). Unlike liveCache it
// holds at every instant, so once filled it never goes stale: a node's rows
// never change once it is published.
type neverCache struct {
	count int
	red   []byte
}

// shareCache is the number and reduction of a node's rows whose documents
// are in set (see Range.Include). Its reduction is nil when there are none
// or it was computed without a Reducer (hasRed false).
type shareCache struct {
	set    *Subset
	count  int
	red    []byte
	hasRed bool
}

// liveCache is what a node's live rows (those not expired) were at some
// instant: their number and, if hasRed, their reduction (nil when there are
// none). The live rows are the same at every instant t with lo <= t < hi (hi
// 0: no end), as no row beneath expires strictly between lo and hi.
// Leaves do not keep one: they answer from their expSuffix.
type liveCache struct {
	lo, hi int64
	count  int
	red    []byte
	hasRed bool
}

// valid reports whether c holds for instant now.
func (c *liveCache) valid(now int64) bool {
	return c.lo <= now && (c.hi == 0 || now < c.hi)
}

// isExpired reports whether a row with expiration exp has expired at now.
func isExpired(exp, now int64) bool { return exp != 0 && exp <= now }

// minNZ returns the smaller of two expirations, 0 standing for none.
func minNZ(a, b int64) int64 {
	switch {
	case a == 0:
		return b
	case b == 0 || a <= b:
		return a
	}
	return b
}

// fixMinExp recomputes n.minExp from its rows or children.
func (n *node) fixMinExp() {
	m := int64(0)
	if n.leaf() {
		for _, r := range n.rows() {
			m = minNZ(m, r.exp())
		}
	} else {
		for _, c := range n.children {
			m = minNZ(m, c.minExp)
		}
	}
	n.minExp = m
}

// allLive reports whether no row under n has expired at now.
func (n *node) allLive(now int64) bool { return n.minExp == 0 || n.minExp > now }

func (n *node) leaf() bool { return n.children == nil }

// size is the number of items or children of n.
func (n *node) size() int {
	if n.leaf() {
		return n.count
	}
	return len(n.children)
}

// capacity is the most items or children n may hold, leafMax rows for a
// leaf.
func (n *node) capacity(leafMax int) int {
	if n.leaf() {
		return leafMax
	}
	return maxChildren
}

// first and last return the first and last row under n (not empty).
func (n *node) first() row {
	for !n.leaf() {
		n = n.children[0]
	}
	return n.rows()[0]
}

func (n *node) last() row {
	for !n.leaf() {
		n = n.children[len(n.children)-1]
	}
	items := n.rows()
	return items[len(items)-1]
}

// edge returns the first (or with last, the last) row under n (not empty)
// if reading it costs no page read: n is a leaf (whose rows its caller
// reads anyway), or the leaf at that edge of n's subtree holds its rows in
// memory.
func (n *node) edge(last bool) (row, bool) {
	l := n
	for !l.leaf() {
		if last {
			l = l.children[len(l.children)-1]
		} else {
			l = l.children[0]
		}
	}
	if l != n && l.page != 0 && l.items == nil {
		return nil, false
	}
	items := l.rows()
	if last {
		return items[len(items)-1], true
	}
	return items[0], true
}

// trimBounds returns lo and hi (nil: open), each dropped when it does not
// cut the rows under n (not empty), so that a subtree wholly in [lo, hi)
// answers from its cached figures. A bound is kept when checking it would
// read a page (see edge): the walk below then drops it through the
// separators (see eachChildIn) or at the leaf, at no page read but those
// the range's ends need.
func trimBounds(n *node, lo, hi []byte) ([]byte, []byte) {
	if lo != nil {
		if r, ok := n.edge(false); ok && bytes.Compare(r, lo) >= 0 {
			lo = nil
		}
	}
	if hi != nil {
		if r, ok := n.edge(true); ok && bytes.Compare(r, hi) < 0 {
			hi = nil
		}
	}
	return lo, hi
}

// minKey returns the tree key of the first row under n (not empty).
func (n *node) minKey() []byte { return n.first().ck() }

// searchItems returns the index of the first row of items at or above k, and
// whether that row's tree key is k.
func searchItems(items []row, k []byte) (int, bool) {
	lo, hi := 0, len(items)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(items[m], k) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(items) && bytes.HasPrefix(items[lo], k) && items[lo].ckLen() == len(k)
}

// searchGone returns the index of the first tree key of gone at or above
// k, and whether it is k.
func searchGone(gone [][]byte, k []byte) (int, bool) {
	return slices.BinarySearchFunc(gone, k, bytes.Compare)
}

// childLE returns the index of the child of n that holds k if any child does:
// the last i with keys[i] <= k, or 0.
func childLE(keys [][]byte, k []byte) int {
	lo, hi := 1, len(keys)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(keys[m], k) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// childLT returns the index of the last child of n that may hold a key below k:
// the last i with keys[i] < k, or 0.
func childLT(keys [][]byte, k []byte) int {
	lo, hi := 1, len(keys)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(keys[m], k) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// eachChildIn calls fn with each child of inner node n that may hold rows of
// the span [lo, hi) (nil leaves that end open), in order, with the bounds
// that concern it: only the first and last children meet the span's ends,
// so the others get nil. It stops at fn's first error.
func eachChildIn(n *node, lo, hi []byte, fn func(c *node, lo, hi []byte) error) error {
	i0, i1 := 0, len(n.children)-1
	if lo != nil {
		i0 = childLE(n.keys, lo)
	}
	if hi != nil {
		i1 = childLT(n.keys, hi)
	}
	for i := i0; i <= i1; i++ {
		var clo, chi []byte
		// keys[i] (i >= 1) is at most every row of child i, and
		// keys[i+1] above every row of child i: a bound they pass does
		// not cut the child.
		if i == i0 && (i == 0 || bytes.Compare(n.keys[i], lo) < 0) {
			clo = lo
		}
		if i == i1 && (i == len(n.children)-1 || bytes.Compare(n.keys[i+1], hi) > 0) {
			chi = hi
		}
		if err := fn(n.children[i], clo, chi); err != nil {
			return err
		}
	}
	return nil
}

// wtx changes trees for one writer generation: nodes it creates belong to gen
// and are changed in place; older nodes are copied first.
type wtx struct {
	gen   uint64
	freed []uint64 // pages of the nodes dropped (see drop)
	// leafRows is the most rows a leaf may hold: maxItems, or
	// pagedLeafItems in a paged index (see leafMax).
	leafRows int
	// dirtyBytes estimates the heap of the leaves of a paged index that
	// this generation copied from their pages (see pager.dirty).
	dirtyBytes int64
}

// leafMax returns the most rows a leaf written by w may hold.
func (w *wtx) leafMax() int {
	if w.leafRows == 0 {
		return maxItems
	}
	return w.leafRows
}

func (w *wtx) own(n *node) *node {
	if n.gen == w.gen {
		return n
	}
	c := &node{gen: w.gen, count: n.count, minExp: n.minExp}
	if n.leaf() && n.page != 0 {
		// A paged leaf: the copy keeps the page, and holds what changes
		// in a delta (the page stays in the tree: not dropped).
		c.page, c.ps, c.delta = n.page, n.ps, n.delta.clone()
		if n.delta == nil {
			w.dirtyBytes += 200
		}
		return c
	}
	w.drop(n)
	if n.leaf() {
		items := n.rows()
		c.items = append(make([]row, 0, len(items)+1), items...)
	} else {
		c.keys = append(make([][]byte, 0, len(n.keys)+1), n.keys...)
		c.children = append(make([]*node, 0, len(n.children)+1), n.children...)
	}
	return c
}

// dirtyLeafBytes estimates the heap of a dirty leaf holding items: its row
// slice, the rows (slices of page bytes or of back-index entries) and the
// node.
func dirtyLeafBytes(items []row) int64 {
	b := int64(200 + 24*cap(items))
	for _, r := range items {
		b += int64(len(r))
	}
	return b
}

// drop records that n is no longer part of the tree being written: a paged
// index frees its page once no reader needs it. (A node of the writer's
// generation holds a page only as a delta leaf, whose page no other node
// of the tree holds.)
func (w *wtx) drop(n *node) {
	if n.page != 0 {
		w.freed = append(w.freed, n.page)
	}
}

// materialize returns leaf n owned by w with its rows in memory (items):
// a delta leaf is merged with its page, which it then no longer holds
// (dropped).
func (w *wtx) materialize(n *node) *node {
	n = w.own(n)
	if n.page == 0 {
		return n
	}
	items := n.rows()
	w.dirtyBytes += dirtyLeafBytes(items)
	w.drop(n)
	n.items = append(make([]row, 0, len(items)+1), items...)
	n.page, n.ps, n.delta = 0, nil, nil
	return n
}

// insert adds r to the tree rooted at root, replacing a row with the same ck, and
// returns the new root.
func (w *wtx) insert(root *node, r row) *node {
	n, right := w.insertAt(root, r)
	if right == nil {
		return n
	}
	return &node{gen: w.gen, count: n.count + right.count, minExp: minNZ(n.minExp, right.minExp),
		keys: [][]byte{nil, right.sep()}, children: []*node{n, right}}
}

// sep is the separator that routes to n as a right sibling.
func (n *node) sep() []byte {
	if n.leaf() {
		return n.rows()[0].ck()
	}
	return n.keys[0]
}

func (w *wtx) insertAt(n *node, r row) (*node, *node) {
	n = w.own(n)
	ck := r.ck()
	if n.leaf() && n.page != 0 && n.count < w.leafMax() {
		// Into the delta: the page's rows are not read. The row's ck is
		// not among them (replace deletes a document's rows first).
		d := n.delta
		i, found := searchItems(d.ins, ck)
		if found {
			old := d.ins[i].exp()
			d.ins[i] = r
			if old != 0 && old == n.minExp {
				n.fixMinExp()
			} else {
				n.minExp = minNZ(n.minExp, r.exp())
			}
			return n, nil
		}
		d.ins = slices.Insert(d.ins, i, r)
		n.count++
		n.minExp = minNZ(n.minExp, r.exp())
		w.dirtyBytes += 24 + int64(len(r))
		return n, nil
	}
	if n.leaf() {
		n = w.materialize(n)
		i, found := searchItems(n.items, ck)
		if found {
			old := n.items[i].exp()
			n.items[i] = r
			if old != 0 && old == n.minExp {
				n.fixMinExp()
			} else {
				n.minExp = minNZ(n.minExp, r.exp())
			}
			return n, nil
		}
		n.items = slices.Insert(n.items, i, r)
		n.count++
		n.minExp = minNZ(n.minExp, r.exp())
		if len(n.items) <= w.leafMax() {
			return n, nil
		}
		h := len(n.items) / 2
		right := &node{gen: w.gen, items: append(make([]row, 0, len(n.items)-h+1), n.items[h:]...)}
		clear(n.items[h:])
		n.items = n.items[:h]
		n.count, right.count = len(n.items), len(right.items)
		n.fixMinExp()
		right.fixMinExp()
		return n, right
	}
	i := childLE(n.keys, ck)
	before := n.children[i].count
	c, split := w.insertAt(n.children[i], r)
	n.children[i] = c
	n.count += c.count - before
	if split == nil {
		n.fixMinExp()
		return n, nil
	}
	n.count += split.count
	n.children = slices.Insert(n.children, i+1, split)
	n.keys = slices.Insert(n.keys, i+1, split.sep())
	if len(n.children) <= maxChildren {
		n.fixMinExp()
		return n, nil
	}
	h := len(n.children) / 2
	right := &node{gen: w.gen,
		keys:     append(make([][]byte, 0, len(n.keys)-h+1), n.keys[h:]...),
		children: append(make([]*node, 0, len(n.children)-h+1), n.children[h:]...)}
	clear(n.keys[h:])
	clear(n.children[h:])
	n.keys, n.children = n.keys[:h], n.children[:h]
	n.count, right.count = sumCounts(n.children), sumCounts(right.children)
	n.fixMinExp()
	right.fixMinExp()
	return n, right
}

func sumCounts(children []*node) int {
	s := 0
	for _, c := range children {
		s += c.count
	}
	return s
}

// delete removes the row with tree key ck from the tree rooted at root and
// returns the new root; a missing ck leaves the tree as it is, but for a
// paged leaf whose rows are on disk, which takes ck to be among them
// unread (Apply deletes the rows a document's back-index entry lists). exp
// is the row's expiration (-1: unknown), which spares such a leaf a read
// of its page to keep its earliest expiration.
func (w *wtx) delete(root *node, ck []byte, exp int64) *node {
	n, _ := w.deleteAt(root, ck, exp)
	for !n.leaf() && len(n.children) == 1 {
		w.drop(n)
		n = n.children[0]
	}
	return n
}

func (w *wtx) deleteAt(n *node, ck []byte, exp int64) (*node, bool) {
	if n.leaf() && n.page != 0 {
		// From the delta: a row inserted since the page, or one of the
		// page's, found without reading it (its rows are the document's
		// back-index entry's, see replace).
		n = w.own(n)
		d := n.delta
		var old int64
		if i, found := searchItems(d.ins, ck); found {
			old = d.ins[i].exp()
			d.ins = slices.Delete(d.ins, i, i+1)
		} else {
			j, _ := searchGone(d.gone, ck)
			d.gone = slices.Insert(d.gone, j, bytes.Clone(ck)) // ck may be the caller's scratch
			w.dirtyBytes += 24 + int64(len(ck))
			old = exp
		}
		n.count--
		if old == -1 && n.minExp != 0 || old != 0 && old == n.minExp {
			n.fixMinExp()
		}
		return n, true
	}
	if n.leaf() {
		i, found := searchItems(n.rows(), ck)
		if !found {
			return n, false
		}
		n = w.own(n)
		old := n.items[i].exp()
		n.items = slices.Delete(n.items, i, i+1)
		n.count--
		if old != 0 && old == n.minExp {
			n.fixMinExp()
		}
		return n, true
	}
	i := childLE(n.keys, ck)
	c, ok := w.deleteAt(n.children[i], ck, exp)
	if !ok {
		return n, false
	}
	n = w.own(n)
	n.children[i] = c
	n.count--
	if c.size() < c.capacity(w.leafMax())/4 {
		w.rebalance(n, i)
	}
	n.fixMinExp()
	return n, true
}

// rebalance merges the underfull child i of n (owned) with a neighbour, or
// shares the neighbour's entries with it when both do not fit in one node.
func (w *wtx) rebalance(n *node, i int) {
	if len(n.children) < 2 {
		return
	}
	l := min(i, len(n.children)-2)
	a, b := n.children[l], n.children[l+1]
	if a.size()+b.size() <= a.capacity(w.leafMax()) {
		if a.leaf() {
			a = w.materialize(a)
		} else {
			a = w.own(a)
		}
		w.drop(b)
		if a.leaf() {
			a.items = append(a.items, b.rows()...)
		} else {
			a.keys = append(append(a.keys, n.keys[l+1]), b.keys[1:]...)
			a.children = append(a.children, b.children...)
		}
		a.count += b.count
		a.minExp = minNZ(a.minExp, b.minExp)
		n.children[l] = a
		n.children = slices.Delete(n.children, l+1, l+2)
		n.keys = slices.Delete(n.keys, l+1, l+2)
		return
	}
	w.drop(a)
	w.drop(b)
	na := &node{gen: w.gen}
	nb := &node{gen: w.gen}
	if a.leaf() {
		all := slices.Concat(a.rows(), b.rows())
		h := len(all) / 2
		na.items = slices.Clip(all[:h])
		nb.items = slices.Clone(all[h:])
		na.count, nb.count = len(na.items), len(nb.items)
	} else {
		keys := slices.Concat(a.keys, [][]byte{n.keys[l+1]}, b.keys[1:])
		children := slices.Concat(a.children, b.children)
		h := len(children) / 2
		na.keys, na.children = slices.Clip(keys[:h]), slices.Clip(children[:h])
		nb.keys, nb.children = slices.Clone(keys[h:]), slices.Clone(children[h:])
		na.count, nb.count = sumCounts(na.children), sumCounts(nb.children)
	}
	na.fixMinExp()
	nb.fixMinExp()
	n.children[l], n.children[l+1] = na, nb
	n.keys[l+1] = nb.sep()
}

// builder bulk-loads a tree from rows given in ck order.
type builder struct {
	gen    uint64
	leaves []*node
	cur    []row
}

func (b *builder) add(r row) {
	if b.cur == nil {
		b.cur = make([]row, 0, loadItems+1)
	}
	b.cur = append(b.cur, r)
	if len(b.cur) == loadItems {
		l := &node{gen: b.gen, items: b.cur, count: len(b.cur)}
		l.fixMinExp()
		b.leaves = append(b.leaves, l)
		b.cur = nil
	}
}

// finish returns the root of the loaded tree.
func (b *builder) finish() *node {
	if len(b.cur) > 0 || len(b.leaves) == 0 {
		l := &node{gen: b.gen, items: b.cur, count: len(b.cur)}
		l.fixMinExp()
		b.leaves = append(b.leaves, l)
	}
	level := b.leaves
	balanceLast(level)
	for len(level) > 1 {
		var up []*node
		for start := 0; start < len(level); start += loadFanout {
			kids := level[start:min(start+loadFanout, len(level))]
			p := &node{gen: b.gen, children: slices.Clone(kids), keys: make([][]byte, len(kids))}
			for i, k := range kids {
				if i > 0 {
					p.keys[i] = k.minKey()
				}
			}
			p.count = sumCounts(p.children)
			p.fixMinExp()
			up = append(up, p)
		}
		balanceLast(up)
		level = up
	}
	return level[0]
}

// balanceLast evens out the last two nodes of a freshly built level, so that the
// last one is not underfull.
func balanceLast(level []*node) {
	if len(level) < 2 {
		return
	}
	a, b := level[len(level)-2], level[len(level)-1]
	if a.leaf() {
		all := slices.Concat(a.items, b.items)
		h := len(all) / 2
		a.items, b.items = slices.Clip(all[:h]), slices.Clone(all[h:])
		a.count, b.count = len(a.items), len(b.items)
		a.fixMinExp()
		b.fixMinExp()
		return
	}
	children := slices.Concat(a.children, b.children)
	keys := slices.Concat(a.keys, [][]byte{b.minKey()}, b.keys[1:])
	h := len(children) / 2
	a.children, b.children = slices.Clip(children[:h]), slices.Clone(children[h:])
	a.keys, b.keys = slices.Clip(keys[:h]), slices.Clone(keys[h:])
	a.count, b.count = sumCounts(a.children), sumCounts(b.children)
	a.fixMinExp()
	b.fixMinExp()
}

// cursor is a position in a tree: the path from the root to a row.
type cursor struct {
	stack []frame
}

// frame is one node of a cursor's path and the index of the child or row
// the path takes; a leaf's frame holds its rows (read once, see node.rows).
type frame struct {
	n     *node
	i     int
	items []row
}

// getCursor returns a cursor from the index's pool, its path's room kept
// from an earlier query: a view query walks rows without allocating the
// path it descends (one frame per level, grown one append at a time, for
// every query otherwise). putCursor gives it back.
func (ix *Index) getCursor() *cursor {
	if c, ok := ix.cursors.Get().(*cursor); ok {
		return c
	}
	return &cursor{}
}

// putCursor returns c to the pool, holding no node or rows any more (a
// pooled cursor must not keep a page's rows alive).
func (ix *Index) putCursor(c *cursor) {
	clear(c.stack[:cap(c.stack)])
	c.stack = c.stack[:0]
	ix.cursors.Put(c)
}

func (c *cursor) valid() bool { return len(c.stack) > 0 }

func (c *cursor) row() row {
	f := c.stack[len(c.stack)-1]
	return f.items[f.i]
}

// seekGE positions c at the first row with ck >= k (the first row if k is nil).
func (c *cursor) seekGE(root *node, k []byte) {
	c.stack = c.stack[:0]
	n := root
	for !n.leaf() {
		i := 0
		if k != nil {
			i = childLE(n.keys, k)
		}
		c.stack = append(c.stack, frame{n: n, i: i})
		n = n.children[i]
	}
	items := n.rows()
	i := 0
	if k != nil {
		i, _ = searchItems(items, k)
	}
	c.stack = append(c.stack, frame{n, i - 1, items})
	c.next()
}

// seekLT positions c at the last row with ck < k (the last row if k is nil).
func (c *cursor) seekLT(root *node, k []byte) {
	c.stack = c.stack[:0]
	n := root
	for !n.leaf() {
		i := len(n.children) - 1
		if k != nil {
			i = childLT(n.keys, k)
		}
		c.stack = append(c.stack, frame{n: n, i: i})
		n = n.children[i]
	}
	items := n.rows()
	i := len(items)
	if k != nil {
		i, _ = searchItems(items, k)
	}
	c.stack = append(c.stack, frame{n, i, items})
	c.prev()
}

// push adds child n to c's path, positioned at i, or, with fromEnd, after
// its last entry.
func (c *cursor) push(n *node, i int, fromEnd bool) {
	f := frame{n: n, i: i}
	if n.leaf() {
		f.items = n.rows()
		if fromEnd {
			f.i = len(f.items)
		}
	} else if fromEnd {
		f.i = len(n.children)
	}
	c.stack = append(c.stack, f)
}

// next moves c to the following row; past the last row c is no longer valid.
func (c *cursor) next() {
	for len(c.stack) > 0 {
		t := &c.stack[len(c.stack)-1]
		t.i++
		if t.n.leaf() {
			if t.i < len(t.items) {
				return
			}
		} else if t.i < len(t.n.children) {
			c.push(t.n.children[t.i], -1, false)
			continue
		}
		c.stack = c.stack[:len(c.stack)-1]
	}
}

// prev moves c to the preceding row; before the first row c is no longer valid.
func (c *cursor) prev() {
	for len(c.stack) > 0 {
		t := &c.stack[len(c.stack)-1]
		t.i--
		if t.i >= 0 {
			if t.n.leaf() {
				return
			}
			c.push(t.n.children[t.i], 0, true)
			continue
		}
		c.stack = c.stack[:len(c.stack)-1]
	}
}
