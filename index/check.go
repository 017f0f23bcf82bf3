package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// maxViolations is how many violations Check names before it stops looking.
const maxViolations = 8

// Check verifies the invariants of the index and returns nil, or an error
// wrapping ErrCheck that names the first violations found (at most a few), or
// ErrClosed, or ctx's error. It is meant for tests (their cleanup) and
// debugging, on a quiet index; it changes nothing.
//
// It verifies, for each view:
//   - the tree is well formed: every leaf at the same depth; leaves hold rows
//     and inner nodes children with one separator each; no node over its
//     capacity, and none but the root under a quarter of it (a root that is
//     an inner node has two children at least); every separator above the
//     rows of the child before it and at most the rows of its own child;
//     each node's count is the number of rows under it, so the root's is
//     TotalRows; no node belongs to a generation the writer has not reached;
//   - every row is well formed: its tree key is the encoding of its key JSON,
//     its escaped document id and its emit ordinal, and its value is JSON;
//   - rows are in strictly increasing tree-key order, which agrees with
//     Compare on their keys, then document id, then emit order;
//   - every reduction cached in a node equals the reduction of its subtree
//     recomputed from the rows with the view's Reducer (Reduce over each leaf,
//     Rereduce up the tree, without reading any cache), compared as decoded
//     JSON values (so 1 and 1.0 are equal);
//   - every node's earliest expiration is that of the rows under it;
//   - every cached reduction of a node's live rows holds: no row beneath
//     expires inside the interval of instants it claims, and its count and
//     reduction are those of the rows live then, recomputed from the rows;
//   - every cached reduction of a node's rows that never expire: its count
//     and reduction are those of the rows beneath with no expiration,
//     recomputed from the rows; these reductions and those of live rows
//     are compared with numbers equal to a relative 1e-9, as their float
//     sums are combined in another order than the recomputation's;
//
// and for the back index: every entry is well formed and not empty, its rows
// carry its document id, are in the tree of their view with the same bytes,
// are listed once, and have the emit ordinals 0, 1, … per view; and every row
// of every tree is listed in its document's entry.
//
// For a persistent index, it also reads the file in one bbolt read
// transaction, checks its meta data (format, signature, view names, number
// of partitions) and replays its checkpoint and log into a fresh structure,
// as Open does, which must pass the checks above and equal memory: the same
// rows in every view, the same back index (as sets of rows per document),
// sequence vector and FeedUUID; and, unless a background checkpoint is
// running, the same current checkpoint and number of logged documents.
//
// Consistency: Check takes the published snapshot, a copy of the back index
// and (for a persistent index) a read transaction of the file together while
// holding the lock that Apply holds, for the time it takes to copy the back
// index's map; it then works without the lock, so Applies and queries run
// meanwhile and Check sees none of their effects. On a busy index, though, a
// long Check keeps an old bbolt read transaction open, which stalls a commit
// that must grow the file's memory map until Check returns. A paged index
// (Config.Cache) is checked under that lock throughout: Applies wait for
// Check, queries do not; its file's pages are checked against the trees, and
// no page may be neither in a tree nor pending deletion. Reducer errors
// while recomputing a cached reduction are violations; a node without a
// cached reduction is not reduced.
func (ix *Index) Check(ctx context.Context) (err error) {
	if ix.ps != nil {
		return ix.checkPaged(ctx)
	}
	ix.mu.Lock()
	if ix.closed.Load() {
		ix.mu.Unlock()
		return ErrClosed
	}
	snap := ix.snap.Load()
	back := maps.Clone(ix.mu.back)
	mem := storeState{ckpt: ix.mu.ckpt, logDocs: ix.mu.logDocs, logNext: ix.mu.logNext, feedUUID: ix.feedUUID.Load(), mapped: ix.mapped.Load()}
	running := ix.mu.ckptRunning
	c := &checker{ctx: ctx, views: ix.views, gen: ix.mu.gen}
	var tx *bolt.Tx
	if ix.db != nil {
		var err error
		if tx, err = ix.db.Begin(false); err != nil {
			ix.mu.Unlock()
			return fmt.Errorf("index: check: %w", err)
		}
		defer tx.Rollback()
	}
	ix.mu.Unlock()

	c.checkState("memory", snap, back, true)
	if tx != nil && c.ok() {
		c.checkFile(tx, ix.signature, snap, back, mem, running)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.err()
}

// checker collects the violations Check finds.
type checker struct {
	ctx      context.Context
	views    []ViewConfig
	gen      uint64 // the writer's generation: no node is newer
	leafRows int    // the most rows of a leaf, 0 for maxItems (see wtx.leafRows)
	problems []string
	more     int // violations not listed
	ctxErr   error
}

func (c *checker) leafMax() int { return (&wtx{leafRows: c.leafRows}).leafMax() }

func (c *checker) failf(format string, args ...any) {
	if len(c.problems) < maxViolations {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	} else {
		c.more++
	}
}

// ok reports whether checking should go on: few violations so far, and ctx
// not done.
func (c *checker) ok() bool {
	if c.ctxErr == nil {
		c.ctxErr = c.ctx.Err()
	}
	return len(c.problems) < maxViolations && c.ctxErr == nil
}

func (c *checker) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	msg := strings.Join(c.problems, "; ")
	if c.more > 0 {
		msg += fmt.Sprintf("; and %d more", c.more)
	}
	return fmt.Errorf("%w: %s", ErrCheck, msg)
}

// checkState checks the trees of snap and the back index back. where names
// them in messages ("memory", "file"). reductions says whether to verify
// cached reductions.
func (c *checker) checkState(where string, snap *snapshot, back map[string][]byte, reductions bool) {
	if len(snap.roots) != len(c.views) {
		c.failf("%s: %d trees for %d views", where, len(snap.roots), len(c.views))
		return
	}
	for vi, v := range c.views {
		t := treeChecker{c: c, where: fmt.Sprintf("%s: view %q", where, v.Name), leafDepth: -1}
		n := t.node(snap.roots[vi], nil, nil, true, 0)
		if n != snap.roots[vi].count && c.ok() {
			c.failf("%s: root counts %d rows, holds %d", t.where, snap.roots[vi].count, n)
		}
		if reductions && v.Reducer != nil && c.ok() {
			t.reductions(v.Reducer)
		}
		if reductions && c.ok() {
			t.liveReductions(v.Reducer)
		}
		if reductions && c.ok() {
			t.suffixReductions(v.Reducer)
		}
		if reductions && c.ok() {
			t.neverReductions(v.Reducer)
		}
		if c.ok() {
			c.checkExpiryTree(where, vi, snap, reductions)
		}
		if !c.ok() {
			return
		}
	}
	c.checkBack(where, snap, back)
}

// treeChecker checks one tree.
type treeChecker struct {
	c          *checker
	where      string
	leafDepth  int     // depth of the first leaf seen; -1 before
	prev       row     // the row before, in tree order
	cached     []*node // nodes with a cached reduction
	liveCached []*node // nodes with a cached live reduction
	// leaves with cached reductions of their rows by expiration
	suffixCached []*node
	// nodes with a cached reduction of the rows that never expire
	neverCached []*node
	rows        int  // rows seen so far
	expiry      bool // an expiry tree (see snapshot.expRoots)
}

// node checks the subtree n, whose rows must lie in [lo, hi) (nil: open), and
// returns its number of rows.
func (t *treeChecker) node(n *node, lo, hi []byte, isRoot bool, depth int) int {
	count, _ := t.nodeExp(n, lo, hi, isRoot, depth)
	return count
}

// nodeExp is node, also returning the earliest non-zero expiration of the
// rows under n, which it checks against n.minExp.
func (t *treeChecker) nodeExp(n *node, lo, hi []byte, isRoot bool, depth int) (int, int64) {
	count, minExp := t.walkNode(n, lo, hi, isRoot, depth)
	if t.c.ok() && minExp != n.minExp {
		t.c.failf("%s: node of %d rows (row %d) keeps earliest expiration %d, its rows' is %d", t.where, n.count, t.rows, n.minExp, minExp)
	}
	return count, minExp
}

func (t *treeChecker) walkNode(n *node, lo, hi []byte, isRoot bool, depth int) (int, int64) {
	c := t.c
	if !c.ok() {
		return n.count, n.minExp
	}
	if n.live.Load() != nil {
		t.liveCached = append(t.liveCached, n)
	}
	if n.never.Load() != nil {
		t.neverCached = append(t.neverCached, n)
	}
	if n.suffix.Load() != nil {
		t.suffixCached = append(t.suffixCached, n)
	}
	if n.gen > c.gen {
		c.failf("%s: node of generation %d, the writer is at %d", t.where, n.gen, c.gen)
	}
	if n.red.Load() != nil {
		t.cached = append(t.cached, n)
	}
	if n.leaf() {
		if t.leafDepth < 0 {
			t.leafDepth = depth
		} else if depth != t.leafDepth {
			c.failf("%s: leaves at depths %d and %d", t.where, t.leafDepth, depth)
		}
		if n.keys != nil {
			c.failf("%s: leaf with %d separators", t.where, len(n.keys))
		}
		items := n.rows()
		if leafMax := c.leafMax(); len(items) > leafMax || !isRoot && len(items) < leafMax/4 {
			c.failf("%s: leaf with %d rows (row %d)", t.where, len(items), t.rows)
		}
		minExp := int64(0)
		for _, r := range items {
			if !c.ok() {
				break
			}
			t.row(r, lo, hi)
			if validRow(r) {
				minExp = minNZ(minExp, r.exp())
			}
		}
		if n.count != len(items) {
			c.failf("%s: leaf counts %d rows, holds %d (row %d)", t.where, n.count, len(items), t.rows)
		}
		return len(items), minExp
	}
	if n.items != nil {
		c.failf("%s: inner node with %d rows", t.where, len(n.items))
	}
	if len(n.keys) != len(n.children) {
		c.failf("%s: inner node with %d children and %d separators", t.where, len(n.children), len(n.keys))
		return n.count, n.minExp
	}
	switch least := maxChildren / 4; {
	case len(n.children) > maxChildren, !isRoot && len(n.children) < least, isRoot && len(n.children) < 2:
		c.failf("%s: inner node with %d children (row %d)", t.where, len(n.children), t.rows)
	}
	sum, minExp := 0, int64(0)
	for i, child := range n.children {
		clo, chi := lo, hi
		if i > 0 {
			clo = n.keys[i]
			if clo == nil || lo != nil && bytes.Compare(clo, lo) < 0 || hi != nil && bytes.Compare(clo, hi) >= 0 ||
				i > 1 && bytes.Compare(n.keys[i-1], clo) >= 0 {
				c.failf("%s: separator %d %q out of order or outside [%q, %q) (row %d)", t.where, i, clo, lo, hi, t.rows)
			}
		}
		if i+1 < len(n.children) {
			chi = n.keys[i+1]
		}
		cn, ce := t.nodeExp(child, clo, chi, false, depth+1)
		sum += cn
		minExp = minNZ(minExp, ce)
		if !c.ok() {
			return n.count, n.minExp
		}
	}
	if n.count != sum {
		c.failf("%s: inner node counts %d rows, holds %d (row %d)", t.where, n.count, sum, t.rows)
	}
	return sum, minExp
}

// row checks a row, which must lie in [lo, hi) and follow t.prev.
func (t *treeChecker) row(r row, lo, hi []byte) {
	c := t.c
	i := t.rows
	t.rows++
	if t.expiry {
		t.expiryRow(r, lo, hi)
		return
	}
	if problem := rowProblem(r); problem != "" {
		c.failf("%s: row %d: %s", t.where, i, problem)
		t.prev = nil
		return
	}
	ck := r.ck()
	if lo != nil && bytes.Compare(ck, lo) < 0 || hi != nil && bytes.Compare(ck, hi) >= 0 {
		c.failf("%s: row %d %q outside its node's range [%q, %q)", t.where, i, ck, lo, hi)
	}
	if p := t.prev; p != nil {
		if bytes.Compare(p.ck(), ck) >= 0 {
			c.failf("%s: row %d %q not above row %d %q", t.where, i, ck, i-1, p.ck())
		} else if !collatesBefore(p, r) {
			pk, _, pid := p.fields()
			k, _, id := r.fields()
			c.failf("%s: row %d (%s %q) does not collate after row %d (%s %q)", t.where, i, k, id, i-1, pk, pid)
		}
	}
	t.prev = r
}

// rowProblem describes what is wrong with r, or returns "".
func rowProblem(r row) string {
	if !validRow(r) {
		return fmt.Sprintf("malformed row %q", []byte(r))
	}
	key, value, id := r.fields()
	enc, err := EncodeKey(key)
	if err != nil {
		return fmt.Sprintf("key %q: %v", key, err)
	}
	ck := r.ck()
	ord := binary.BigEndian.Uint32(ck[len(ck)-4:])
	if want := appendCK(nil, enc, id, int(ord)); !bytes.Equal(ck, want) {
		return fmt.Sprintf("tree key %q is not that of key %s, document %q, emit %d (%q)", ck, key, id, ord, want)
	}
	if !validJSON(value) {
		return fmt.Sprintf("value %q is not JSON", value)
	}
	return ""
}

// collatesBefore reports whether row a comes before row b by key collation,
// then document id, then emit ordinal.
func collatesBefore(a, b row) bool {
	ak, _, aid := a.fields()
	bk, _, bid := b.fields()
	if c := Compare(ak, bk); c != 0 {
		return c < 0
	}
	if aid != bid {
		return aid < bid
	}
	return ordOf(a) < ordOf(b)
}

func ordOf(r row) uint32 {
	ck := r.ck()
	return binary.BigEndian.Uint32(ck[len(ck)-4:])
}

// reductions compares each cached reduction of the tree with a recomputation.
func (t *treeChecker) reductions(red Reducer) {
	rd := reduction{ctx: t.c.ctx, r: red}
	fresh := map[*node][]byte{}
	var recompute func(n *node) ([]byte, error)
	recompute = func(n *node) ([]byte, error) {
		if v, ok := fresh[n]; ok {
			return v, nil
		}
		if err := t.c.ctx.Err(); err != nil {
			return nil, err
		}
		var v []byte
		var err error
		if n.leaf() {
			v, err = rd.rows(n.rows())
		} else {
			vals := make([][]byte, 0, len(n.children))
			for _, ch := range n.children {
				if ch.count == 0 {
					continue
				}
				cv, err := recompute(ch)
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
		v = bytes.Clone(v)
		fresh[n] = v
		return v, nil
	}
	for _, n := range t.cached {
		if !t.c.ok() {
			return
		}
		cached := *n.red.Load()
		if n.count == 0 {
			continue
		}
		v, err := recompute(n)
		if err != nil {
			if t.c.ctx.Err() == nil {
				t.c.failf("%s: node of %d rows from %q caches reduction %s, recomputing it fails: %v", t.where, n.count, n.minKey(), cached, err)
			}
			continue
		}
		if !sameJSON(cached, v) {
			t.c.failf("%s: node of %d rows from %q caches reduction %s, recomputed %s", t.where, n.count, n.minKey(), cached, v)
		}
	}
}

// closeJSON reports whether a and b are JSON texts of equal values but for
// numbers, which may differ by a relative 1e-9: cached live reductions and
// reductions of the rows that never expire combine partial reductions in
// another grouping and order than Check's recomputation, and a float sum
// depends on its order.
func closeJSON(a, b []byte) bool {
	if sameJSON(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return closeValues(x, y)
}

// closeValues compares decoded JSON values as closeJSON does.
func closeValues(x, y any) bool {
	switch x := x.(type) {
	case float64:
		y, ok := y.(float64)
		return ok && math.Abs(x-y) <= 1e-9*max(math.Abs(x), math.Abs(y), 1)
	case []any:
		y, ok := y.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !closeValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !closeValues(xv, yv) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(x, y)
}

// sameJSON reports whether a and b are JSON texts of equal values.
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// lookup returns the row with tree key ck in the tree under n, or nil.
func lookup(n *node, ck []byte) row {
	for !n.leaf() {
		n = n.children[childLE(n.keys, ck)]
	}
	items := n.rows()
	if i, found := searchItems(items, ck); found {
		return items[i]
	}
	return nil
}

// checkBack checks the back index against the trees, both ways.
func (c *checker) checkBack(where string, snap *snapshot, back map[string][]byte) {
	listed := make([]int, len(c.views)) // rows listed per view
	for _, id := range slices.Sorted(maps.Keys(back)) {
		if !c.ok() {
			return
		}
		entry := back[id]
		if len(entry) == 0 {
			c.failf("%s: empty back-index entry of %q", where, id)
			continue
		}
		seen := map[string]bool{}
		ords := make([][]uint32, len(c.views))
		err := forEachEntry(entry, func(vi int, r row) error {
			if vi >= len(c.views) {
				return fmt.Errorf("view %d of %d", vi, len(c.views))
			}
			if p := rowProblem(r); p != "" {
				return fmt.Errorf("%s", p)
			}
			view := c.views[vi].Name
			ck := r.ck()
			if _, _, rid := r.fields(); rid != id {
				c.failf("%s: back-index entry of %q lists a row of %q in view %q", where, id, rid, view)
			}
			if seen[string(rune(vi))+string(ck)] {
				c.failf("%s: back-index entry of %q lists row %q of view %q twice", where, id, ck, view)
			}
			seen[string(rune(vi))+string(ck)] = true
			ords[vi] = append(ords[vi], ordOf(r))
			listed[vi]++
			if got := lookup(snap.roots[vi], ck); got == nil {
				c.failf("%s: back index lists row %q of %q, not in view %q", where, ck, id, view)
			} else if !bytes.Equal(got, r) {
				c.failf("%s: row %q of %q in view %q is %q, the back index lists %q", where, ck, id, view, []byte(got), []byte(r))
			}
			return nil
		})
		if err != nil {
			c.failf("%s: malformed back-index entry of %q: %v", where, id, err)
			continue
		}
		for vi, os := range ords {
			slices.Sort(os)
			for i, o := range os {
				if o != uint32(i) {
					c.failf("%s: rows of %q in view %q have emit ordinals %v, want 0…%d", where, id, c.views[vi].Name, os, len(os)-1)
					break
				}
			}
		}
	}
	for vi, v := range c.views {
		if !c.ok() || listed[vi] == snap.roots[vi].count {
			continue
		}
		// Some rows of the tree are not listed: name them.
		c.failf("%s: view %q holds %d rows, the back index lists %d", where, v.Name, snap.roots[vi].count, listed[vi])
		var cur cursor
		for cur.seekGE(snap.roots[vi], nil); cur.valid() && c.ok(); cur.next() {
			r := cur.row()
			if !validRow(r) {
				continue
			}
			_, _, id := r.fields()
			if !entryHas(back[id], vi, r.ck()) {
				c.failf("%s: row %q of %q in view %q is not in the back index", where, r.ck(), id, v.Name)
			}
		}
	}
}

// entryHas reports whether a back-index entry lists the row ck of view vi.
func entryHas(entry []byte, vi int, ck []byte) bool {
	found := false
	_ = forEachEntry(entry, func(v int, r row) error {
		if v == vi && validRow(r) && bytes.Equal(r.ck(), ck) {
			found = true
			return ErrStop
		}
		return nil
	})
	return found
}

// checkFile loads the file read by tx into a fresh structure, checks it and
// compares it with memory: snap, back and mem (the state the lock guards);
// running says whether a background checkpoint was running.
func (c *checker) checkFile(tx *bolt.Tx, signature string, snap *snapshot, back map[string][]byte, mem storeState, running bool) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		c.failf("file: no meta bucket")
		return
	}
	if f := meta.Get(keyFormat); string(f) != formatVersion {
		c.failf("file: format %q, want %q", f, formatVersion)
	}
	if s := meta.Get(keySignature); string(s) != signature {
		c.failf("file: signature %q, want %q", s, signature)
	}
	if v := meta.Get(keyViews); !bytes.Equal(v, encodeViewNames(c.views)) {
		c.failf("file: view names %q, want %q", v, encodeViewNames(c.views))
	}
	if !c.ok() {
		return
	}
	disk := newSnapshot(len(c.views), len(snap.seqs))
	dback := map[string][]byte{}
	st, err := loadTx(c.ctx, tx, c.views, disk, dback)
	if err != nil {
		if c.ctx.Err() == nil {
			c.failf("file: does not load: %v", err)
		}
		return
	}
	if !slices.Equal(disk.seqs, snap.seqs) {
		c.failf("file: sequence vector %v, memory %v", disk.seqs, snap.seqs)
	}
	if st.feedUUID != mem.feedUUID {
		c.failf("file: feed UUID %d, memory %d", st.feedUUID, mem.feedUUID)
	}
	if st.mapped != mem.mapped {
		c.failf("file: %d documents mapped, memory %d", st.mapped, mem.mapped)
	}
	if st.logNext > mem.logNext {
		c.failf("file: log holds record %d, memory's next record is %d", st.logNext-1, mem.logNext)
	}
	if !running {
		if st.ckpt != mem.ckpt {
			c.failf("file: checkpoint %q, memory %q", st.ckpt, mem.ckpt)
		}
		if st.logDocs != mem.logDocs {
			c.failf("file: log of %d documents, memory counts %d", st.logDocs, mem.logDocs)
		}
	}
	c.checkState("file", disk, dback, false)
	for vi, v := range c.views {
		if !c.ok() {
			return
		}
		var a, b cursor
		a.seekGE(snap.roots[vi], nil)
		b.seekGE(disk.roots[vi], nil)
	rows:
		for i := 0; a.valid() || b.valid(); i++ {
			switch {
			case !a.valid():
				c.failf("file: view %q has row %d %q, memory has %d rows", v.Name, i, b.row().ck(), i)
			case !b.valid():
				c.failf("file: view %q has %d rows, memory has row %d %q", v.Name, i, i, a.row().ck())
			case !bytes.Equal(a.row(), b.row()):
				c.failf("file: view %q row %d is %q, memory %q", v.Name, i, []byte(b.row()), []byte(a.row()))
			default:
				a.next()
				b.next()
				continue
			}
			break rows
		}
	}
	if !c.ok() {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(back)) {
		if _, ok := dback[id]; !ok {
			c.failf("file: no back-index entry of %q", id)
		} else if !slices.Equal(entrySet(back[id]), entrySet(dback[id])) {
			c.failf("file: back-index entry of %q differs from memory's", id)
		}
		if !c.ok() {
			return
		}
	}
	for _, id := range slices.Sorted(maps.Keys(dback)) {
		if _, ok := back[id]; !ok {
			c.failf("file: back-index entry of %q, not in memory", id)
		}
		if !c.ok() {
			return
		}
	}
}

// entrySet returns the rows of a back-index entry (view index and row bytes),
// sorted: the order of an entry's rows differs between an entry written by
// Apply (in emit order) and one loaded from a checkpoint (in tree order).
func entrySet(entry []byte) []string {
	var out []string
	_ = forEachEntry(entry, func(vi int, r row) error {
		out = append(out, string(binary.AppendUvarint(nil, uint64(vi)))+string(r))
		return nil
	})
	slices.Sort(out)
	return out
}

// liveReductions checks each node's cached live rows (see liveCache) against
// a recomputation: no row beneath expires strictly inside the interval the
// cache claims, the node holds an expired row at its start (else nothing
// needed caching), and the count and (if cached) the reduction are those of
// the rows live then, reduced from the rows without reading any cache. red
// is the view's Reducer, nil for a map-only view.
func (t *treeChecker) liveReductions(red Reducer) {
	for _, n := range t.liveCached {
		if !t.c.ok() {
			return
		}
		lc := n.live.Load()
		at := lc.lo
		var live []row
		var leaves [][]row // live rows per leaf, for the reduction
		bad := int64(0)
		_ = walkLeaves(n, func(leaf *node) error {
			var l []row
			for _, r := range leaf.rows() {
				e := r.exp()
				if e != 0 && e > lc.lo && (lc.hi == 0 || e < lc.hi) && bad == 0 {
					bad = e
				}
				if !isExpired(e, at) {
					l = append(l, r)
				}
			}
			live = append(live, l...)
			leaves = append(leaves, l)
			return nil
		})
		switch {
		case bad != 0:
			t.c.failf("%s: node of %d rows from %q caches live rows for [%d, %d), a row expires at %d", t.where, n.count, n.minKey(), lc.lo, lc.hi, bad)
			continue
		case n.allLive(at):
			t.c.failf("%s: node of %d rows from %q caches live rows for [%d, %d), none has expired then", t.where, n.count, n.minKey(), lc.lo, lc.hi)
			continue
		case lc.count != len(live):
			t.c.failf("%s: node of %d rows from %q caches %d live rows for [%d, %d), %d are", t.where, n.count, n.minKey(), lc.count, lc.lo, lc.hi, len(live))
			continue
		case !lc.hasRed:
			continue
		case red == nil:
			t.c.failf("%s: node from %q caches a live reduction, the view has no reduce", t.where, n.minKey())
			continue
		case len(live) == 0:
			if lc.red != nil {
				t.c.failf("%s: node from %q caches live reduction %s of no rows", t.where, n.minKey(), lc.red)
			}
			continue
		}
		v, err := reduceLeaves(t.c.ctx, red, leaves)
		if err != nil {
			if t.c.ctx.Err() == nil {
				t.c.failf("%s: node from %q caches live reduction %s, recomputing it fails: %v", t.where, n.minKey(), lc.red, err)
			}
			continue
		}
		if !closeJSON(lc.red, v) {
			t.c.failf("%s: node of %d rows from %q caches live reduction %s for [%d, %d), recomputed %s", t.where, n.count, n.minKey(), lc.red, lc.lo, lc.hi, v)
		}
	}
}

// suffixReductions checks each leaf's cached rows by expiration (see
// expSuffix) against a recomputation: the expirations are those of its
// expiring rows in ascending order, and for each number k of them that can
// have expired at an instant (the k-th expiration below the next), the
// cached reduction is that of the rows left (those that never expire or
// expire after the k-th), reduced from the rows. red is the view's
// Reducer, nil for a map-only view.
func (t *treeChecker) suffixReductions(red Reducer) {
	for _, n := range t.suffixCached {
		if !t.c.ok() {
			return
		}
		s := n.suffix.Load()
		var want []int64
		items := n.rows()
		for _, r := range items {
			if e := r.exp(); e != 0 {
				want = append(want, e)
			}
		}
		slices.Sort(want)
		exps := make([]int64, s.len())
		for i := range exps {
			exps[i] = s.exp(i)
		}
		if len(s.ent) != 2*len(exps) || !slices.Equal(exps, want) {
			t.c.failf("%s: leaf of %d rows from %q caches expirations %v, its rows' are %v", t.where, len(items), n.minKey(), exps, want)
			return
		}
		if !s.hasRed {
			continue
		}
		if s.tooBig {
			if s.vals != nil {
				t.c.failf("%s: leaf from %q keeps reductions by expiration it found too big", t.where, n.minKey())
				return
			}
			continue
		}
		m := len(want)
		switch {
		case red == nil:
			t.c.failf("%s: leaf from %q caches reductions by expiration, the view has no reduce", t.where, n.minKey())
			return
		case m == 0:
			continue
		case s.end(m) != int64(len(s.vals)):
			t.c.failf("%s: leaf from %q caches reductions by expiration ending at %d in %d bytes", t.where, n.minKey(), s.end(m), len(s.vals))
			return
		}
		rd := reduction{ctx: t.c.ctx, r: red}
		for k := 1; k <= m; k++ {
			if s.end(k) < 0 || k > 1 && s.end(k) < s.end(k-1) {
				t.c.failf("%s: leaf from %q caches reductions by expiration out of order", t.where, n.minKey())
				return
			}
			if k < m && want[k] == want[k-1] {
				continue // no instant has exactly k expired
			}
			var left []row
			for _, r := range items {
				if e := r.exp(); e == 0 || e > want[k-1] {
					left = append(left, r)
				}
			}
			got := s.red(k)
			if len(left) == 0 {
				if len(got) != 0 {
					t.c.failf("%s: leaf from %q caches reduction %s of its rows expiring after %d, there are none", t.where, n.minKey(), got, want[k-1])
					return
				}
				continue
			}
			v, err := rd.rows(left)
			if err != nil {
				if t.c.ctx.Err() == nil {
					t.c.failf("%s: leaf from %q caches reduction %s of its rows expiring after %d, recomputing it fails: %v", t.where, n.minKey(), got, want[k-1], err)
				}
				return
			}
			if !closeJSON(got, v) {
				t.c.failf("%s: leaf from %q caches reduction %s of its rows expiring after %d or never, recomputed %s", t.where, n.minKey(), got, want[k-1], v)
				return
			}
		}
	}
}

// expiryRow checks a row of an expiry tree, which must lie in [lo, hi) and
// follow t.prev: well formed, with an expiration, under the tree key of
// that expiration, document id and emit ordinal.
func (t *treeChecker) expiryRow(r row, lo, hi []byte) {
	c := t.c
	i := t.rows
	t.rows++
	if !validRow(r) || r.exp() == 0 {
		c.failf("%s: row %d %q is malformed or has no expiration", t.where, i, []byte(r))
		t.prev = nil
		return
	}
	_, _, id := r.fields()
	ck := r.ck()
	if want := appendCK(nil, encodeExp(r.exp()), id, r.ord()); !bytes.Equal(ck, want) {
		c.failf("%s: row %d has tree key %q, its expiration %d gives %q", t.where, i, ck, r.exp(), want)
	}
	if lo != nil && bytes.Compare(ck, lo) < 0 || hi != nil && bytes.Compare(ck, hi) >= 0 {
		c.failf("%s: row %d %q outside its node's range [%q, %q)", t.where, i, ck, lo, hi)
	}
	if p := t.prev; p != nil && bytes.Compare(p.ck(), ck) >= 0 {
		c.failf("%s: row %d %q not above row %d %q", t.where, i, ck, i-1, p.ck())
	}
	t.prev = r
}

// checkExpiryTree checks the expiry tree of view vi of snap: well formed,
// its cached reductions (with reductions), and holding exactly the rows of
// the view's tree that have an expiration, as expiryRow makes them.
func (c *checker) checkExpiryTree(where string, vi int, snap *snapshot, reductions bool) {
	v := c.views[vi]
	t := treeChecker{c: c, where: fmt.Sprintf("%s: expiry tree of view %q", where, v.Name), leafDepth: -1, expiry: true}
	root := snap.expRoots[vi]
	if n := t.node(root, nil, nil, true, 0); n != root.count && c.ok() {
		c.failf("%s: root counts %d rows, holds %d", t.where, root.count, n)
	}
	if reductions && v.Reducer != nil && c.ok() {
		t.reductions(v.Reducer)
	}
	if !c.ok() {
		return
	}
	want := buildExpiryTree(snap.roots[vi])
	var a, b cursor
	a.seekGE(root, nil)
	b.seekGE(want, nil)
	for i := 0; (a.valid() || b.valid()) && c.ok(); i++ {
		switch {
		case !a.valid():
			c.failf("%s: %d rows, the view's rows with an expiration give row %d %q too", t.where, i, i, b.row().ck())
			return
		case !b.valid():
			c.failf("%s: row %d %q is not one of the view's rows with an expiration (%d)", t.where, i, a.row().ck(), i)
			return
		case !bytes.Equal(a.row(), b.row()):
			c.failf("%s: row %d is %q, the view's rows give %q", t.where, i, []byte(a.row()), []byte(b.row()))
			return
		}
		a.next()
		b.next()
	}
}

// neverReductions checks each node's cached rows that never expire (see
// neverCache) against a recomputation from the rows, without reading any
// cache: their number, and their reduction (Reduce over each leaf's,
// Rereduce of those). red is the view's Reducer, nil for a map-only view.
func (t *treeChecker) neverReductions(red Reducer) {
	for _, n := range t.neverCached {
		if !t.c.ok() {
			return
		}
		nc := n.never.Load()
		var leaves [][]row // rows that never expire, per leaf
		count := 0
		_ = walkLeaves(n, func(leaf *node) error {
			var l []row
			for _, r := range leaf.rows() {
				if r.exp() == 0 {
					l = append(l, r)
				}
			}
			if len(l) > 0 {
				leaves = append(leaves, l)
				count += len(l)
			}
			return nil
		})
		switch {
		case nc.count != count:
			t.c.failf("%s: node of %d rows from %q caches %d rows that never expire, %d are", t.where, n.count, n.minKey(), nc.count, count)
			continue
		case count == 0:
			if nc.red != nil {
				t.c.failf("%s: node from %q caches reduction %s of no rows that never expire", t.where, n.minKey(), nc.red)
			}
			continue
		case red == nil:
			t.c.failf("%s: node from %q caches a reduction of rows that never expire, the view has no reduce", t.where, n.minKey())
			continue
		}
		v, err := reduceLeaves(t.c.ctx, red, leaves)
		if err != nil {
			if t.c.ctx.Err() == nil {
				t.c.failf("%s: node from %q caches reduction %s of rows that never expire, recomputing it fails: %v", t.where, n.minKey(), nc.red, err)
			}
			continue
		}
		if !closeJSON(nc.red, v) {
			t.c.failf("%s: node of %d rows from %q caches reduction %s of rows that never expire, recomputed %s", t.where, n.count, n.minKey(), nc.red, v)
		}
	}
}

// reduceLeaves recomputes the reduction of rows given leaf by leaf: each
// non-empty leaf's rows reduced, then the results rereduced, as the tree
// combines them.
func reduceLeaves(ctx context.Context, red Reducer, leaves [][]row) ([]byte, error) {
	rd := reduction{ctx: ctx, r: red}
	var vals [][]byte
	for _, l := range leaves {
		if len(l) == 0 {
			continue
		}
		v, err := rd.rows(l)
		if err != nil {
			return nil, err
		}
		vals = append(vals, bytes.Clone(v))
	}
	return rd.rereduce(vals)
}

// checkPaged is Check for a paged index: it first writes back what the
// Applies changed (see writeBack), then checks the trees (read through the page
// cache) and the file's back index as for memory, then the file's pages:
// each node of the trees has its page, holding what the node holds, and
// every other page is one a finished Apply dropped (pending deletion), so
// the file leaks none. It holds Apply's lock throughout (queries go on):
// its read transaction stays open while leaves are read in others, which a
// commit that grows the file's memory map would otherwise deadlock.
func (ix *Index) checkPaged(ctx context.Context) (err error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed.Load() {
		return ErrClosed
	}
	defer recoverPage(&err)
	if err = ix.writeBackLocked(); err != nil {
		return err
	}
	snap := ix.acquire()
	defer ix.release(snap)
	pending := map[uint64]bool{}
	for _, f := range ix.ps.pending {
		for _, id := range f.ids {
			pending[id] = true
		}
	}
	c := &checker{ctx: ctx, views: ix.views, gen: ix.mu.gen, leafRows: ix.leafRows}
	tx, err := ix.db.Begin(false)
	if err != nil {
		return fmt.Errorf("index: check: %w", err)
	}
	defer tx.Rollback()
	back := map[string][]byte{}
	if b := tx.Bucket(bucketBack); b != nil {
		_ = b.ForEach(func(k, v []byte) error {
			if !validEntries(v, len(ix.views)) {
				c.failf("file: back-index entry of %q malformed", k)
				return nil
			}
			back[string(k)] = bytes.Clone(v)
			return nil
		})
	}
	c.checkState("memory", snap, back, true)
	if c.ok() {
		c.checkPages(tx, snap, pending)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.err()
}

// checkRef checks a ref read from the file (see appendRef) against the
// node it stands for: page, kind, count and earliest expiration equal, and
// a stored reduction the node's cached one (Check's reductions pass then
// recomputes that one from the rows).
func (c *checker) checkRef(where string, r nodeRef, n *node) {
	kind := byte(pageLeaf)
	if !n.leaf() {
		kind = pageInner
	}
	if r.page != n.page || r.kind != kind || r.count != n.count || r.minExp != n.minExp {
		c.failf("%s: ref (page %d, kind %c, %d rows, min exp %d), node (page %d, kind %c, %d rows, min exp %d)",
			where, r.page, r.kind, r.count, r.minExp, n.page, kind, n.count, n.minExp)
		return
	}
	if r.red == nil {
		return
	}
	if p := n.red.Load(); p == nil || !bytes.Equal(*p, r.red) {
		c.failf("%s: stores reduction %s, its node caches another", where, r.red)
	}
}

// checkPages checks a paged index's pages against the trees of snap (see
// checkPaged); pending are the pages dropped but not yet deleted.
func (c *checker) checkPages(tx *bolt.Tx, snap *snapshot, pending map[uint64]bool) {
	pages, free := tx.Bucket(bucketPages), tx.Bucket(bucketFree)
	if pages == nil || free == nil {
		c.failf("file: missing pages or free bucket")
		return
	}
	meta := tx.Bucket(bucketMeta)
	d := decoder{b: meta.Get(keyRoots)}
	for vi := range snap.roots {
		c.checkRef("file: root", d.ref(), snap.roots[vi])
		c.checkRef("file: expiry root", d.ref(), snap.expRoots[vi])
	}
	if d.err != nil || len(d.b) != 0 {
		c.failf("file: roots malformed")
	}
	if got := meta.Get(keySeqs); !bytes.Equal(got, encodeSeqs(snap.seqs)) {
		c.failf("file: sequence vector differs from memory's")
	}
	if log := tx.Bucket(bucketLog); log == nil {
		c.failf("file: missing log bucket")
	} else if k, _ := log.Cursor().First(); k != nil {
		c.failf("file: log record %x left after a write-back", k)
	}
	if undo := tx.Bucket(bucketBackUndo); undo == nil {
		c.failf("file: missing back-index undo bucket")
	} else if k, _ := undo.Cursor().First(); k != nil {
		c.failf("file: back-index undo entry of %q left after a write-back", k)
	}
	seen := map[uint64]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if !c.ok() {
			return
		}
		if n.page == 0 {
			if n.count != 0 || !n.leaf() {
				c.failf("file: a node of %d rows has no page", n.count)
			}
			return
		}
		if seen[n.page] {
			c.failf("file: page %d in two places", n.page)
			return
		}
		seen[n.page] = true
		p := pages.Get(pageKeyBytes(n.page))
		if n.leaf() {
			if !bytes.Equal(p, appendLeaf(nil, n.rows())) {
				c.failf("file: page %d does not hold its node (%d rows)", n.page, n.count)
			}
		} else if keys, refs, err := decodeInner(p); err != nil || len(refs) != len(n.children) {
			c.failf("file: page %d does not hold its inner node (%d rows): %v", n.page, n.count, err)
		} else {
			for i, r := range refs {
				if !bytes.Equal(keys[i], n.keys[i]) {
					c.failf("file: page %d separator %d differs from its node's", n.page, i)
				}
				c.checkRef(fmt.Sprintf("file: page %d child %d", n.page, i), r, n.children[i])
			}
		}
		for _, ch := range n.children {
			walk(ch)
		}
	}
	for vi := range snap.roots {
		walk(snap.roots[vi])
		walk(snap.expRoots[vi])
	}
	var next uint64 // pages at or above it: a crashed write-back's orphans
	if v := meta.Get(keyNextPage); len(v) == 8 {
		next = binary.BigEndian.Uint64(v)
	} else {
		c.failf("file: next page id malformed")
	}
	_ = pages.ForEach(func(k, _ []byte) error {
		id := binary.BigEndian.Uint64(k)
		switch {
		case seen[id]:
			if id >= next {
				c.failf("file: page %d of a tree is at or above the next page id %d", id, next)
			}
		case id >= next && next > 0:
		case !pending[id]:
			c.failf("file: page %d belongs to no tree and is not pending deletion", id)
		case free.Get(k) == nil:
			c.failf("file: page %d pending deletion is not listed free", id)
		}
		return nil
	})
	_ = free.ForEach(func(k, _ []byte) error {
		if !pending[binary.BigEndian.Uint64(k)] {
			c.failf("file: page %x listed free, not pending", k)
		}
		return nil
	})
}
