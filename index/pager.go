package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Paged indexes (Config.Cache set).
//
// A paged index keeps its trees on disk, as CouchDB's and Couchbase's view
// files do, rather than wholly in the heap. Every node of every tree (the
// views' trees and their expiry trees) is a page of the file's pages bucket,
// keyed by a page id that is never reused; an inner node's page lists its
// children's separators, page ids, kinds, counts, earliest expirations and
// reductions (see appendRef); a leaf's page its rows, under a checksum.
// In memory, inner nodes stay resident (about one for every 48 leaves), and
// so does each leaf's small node record (count, earliest expiration, cached
// reductions); a leaf's rows are read from its page through a PageCache, a
// byte budget of decoded pages, least recently used out first, one per
// index or shared by all of a process's. The back index (document id → the
// document's rows) is the file's back bucket, read by Apply for the
// documents it updates.
//
// An Apply changes the trees copy-on-write as an in-memory index does,
// logs its documents' rows and the sequence vector in one bbolt
// transaction (the log of the in-memory layout, see store.go), and
// publishes the trees; the leaves it changed stay in memory, dirty (no
// page), with the inner nodes above them. A write-back (see writeBack)
// writes a page for each node without one (in bounded transactions the
// roots do not reach yet), the back index's changes (in bounded
// transactions that save the entries they replace, see
// pageWriter.putBack), then, in a final transaction, the roots, and
// empties the log: Apply makes one
// once the dirty leaves reach the dirty budget (see
// PageCache.SetDirtyBudget) or the log holds checkpointDocs documents and
// half the index's rows (see writeBackDue), and Close (past checkpointDocs)
// and Check before they end. The file thus holds the pages of some earlier
// Apply, complete, and the log of every Apply since: Open reads the last
// written pages without loading any leaf and replays the log onto them
// (see replayPaged), so an Apply is durable once it returns, as in memory.
// The pages of the nodes the Applies replaced are listed in the free
// bucket by the write-back, and deleted by a later one once no query holds
// a snapshot that may read them (queries register the snapshot they read,
// see Index.acquire); Open deletes whatever the free bucket lists. bbolt
// reuses the space of deleted pages, so the file does not grow under
// updates.
//
// A leaf an Apply changes is not copied: it keeps its page and holds a
// delta (see leafDelta), merged with the page when it splits or merges and
// by the write-back. Reductions are cached in the node records as in
// memory, and stored in the pages by the write-back (see reduction.store),
// so that a reduce after Open reads only the leaves at its range's edges.
var (
	bucketPages = []byte("pages")
	bucketBack  = []byte("back")
	bucketFree  = []byte("free")
	// bucketBackUndo holds, while a write-back is unfinished, the entries
	// the back index had before the write-back's bounded transactions
	// changed them (see pageWriter.putBack): document id → 1 and the old
	// rows, or 0 when the document had none. The final transaction
	// empties it; Open puts back what it holds (see restoreBack).
	bucketBackUndo = []byte("backundo")

	keyRoots    = []byte("roots")    // per view: tree ref, expiry tree ref (see appendRef)
	keyNextPage = []byte("nextpage") // 8 bytes big-endian: the next page id
)

// pagedFormat names the paged layout; a file of the other layout (see
// formatVersion) is rebuilt, as one of another signature is.
const pagedFormat = "mayfly-index-paged-2"

// pagedLeafItems is the most rows of a paged index's leaf: twice an
// in-memory leaf's. An Apply rewrites each leaf it touches whole, and what
// a written page costs beyond its bytes (its bbolt key, the deletion of the
// page it replaces, its node) dominates: building the benchmark view ran at
// 8.9k, 11k, 16.4k and 16.6k rows/s with leaves of 32, 64, 128 and 256 rows
// (same run, 400k rows).
const pagedLeafItems = maxItems * 2

// Page kinds, the first byte of a page.
const (
	pageLeaf  = 'L'
	pageInner = 'I'
)

// pageError carries an error reading a page up to the entry point of the
// package that recovers it (recoverPage): node.rows has no error result, as
// an in-memory leaf cannot fail.
type pageError struct{ err error }

// recoverPage turns a pageError panic into *err; other panics go on.
func recoverPage(err *error) {
	if r := recover(); r != nil {
		pe, ok := r.(pageError)
		if !ok {
			panic(r)
		}
		*err = pe.err
	}
}

// pager is a paged index's node store: its file, the page cache, and what
// the writer and readers share about pages not yet deleted.
type pager struct {
	db    *bolt.DB
	cache *PageCache
	owner uint64      // this index's keys in cache
	mm    *mapRelease // the file's mapped pages: reads counted, released

	// next is the id of the next page written. REQUIRES: Index.mu.
	next uint64
	// stored is the file's next page id (keyNextPage): no tree of the
	// file reaches a page at or above it, and any there is an orphan of
	// an unfinished write-back (see writeBack). REQUIRES: Index.mu.
	stored uint64
	// txBytes bounds the page bytes a write-back puts in one transaction
	// (see writeBack); 0: writeBackTxBytes; negative: everything in one
	// transaction, as before the split. Tests and benchmarks set it.
	txBytes int64
	// backFinal puts a write-back's back-index changes in its final
	// transaction, unbounded, without saving what they replace (as
	// before putBack bounded them); benchmarks set it to compare.
	backFinal bool
	// pageTxs counts the transactions write-backs committed before their
	// final ones (see writeBack), and backTxs those of them that changed
	// the back index. REQUIRES: Index.mu.
	pageTxs, backTxs int
	// afterPageTx, if set, is called after each such commit (a test's
	// crash point); an error fails the write-back there, as a failed
	// commit of the next transaction would. REQUIRES: Index.mu.
	afterPageTx func() error
	// pending lists the pages dropped by each Apply, not yet deleted.
	// REQUIRES: Index.mu.
	pending []freedPages

	// What the Applies since the last write-back changed and the file
	// does not hold yet (see writeBack). REQUIRES: Index.mu.
	dirty struct {
		back  map[string][]byte // document id → its rows, nil: none
		freed []freedPages      // pages the Applies dropped
		docs  int               // document updates applied
		bytes int64             // estimated heap of the dirty leaves
	}

	rmu     sync.Mutex
	readers map[uint64]int // snapshot generation → queries reading it; guarded by rmu
}

// dirtyBudget is the most heap, estimated, that the dirty leaves of the
// paged indexes of a cache may take together before the largest of them
// writes back: the cache's dirty budget (see PageCache.SetDirtyBudget), at
// least minDirtyBudget.
func (ps *pager) dirtyBudget() int64 { return max(ps.cache.dirty.Load(), minDirtyBudget) }

// addDirty adds n (negative: less) to the estimated heap of the index's
// dirty leaves, and to its cache's sum for all of its indexes.
// REQUIRES: Index.mu.
func (ps *pager) addDirty(n int64) {
	if n == 0 {
		return
	}
	was := ps.dirty.bytes
	ps.dirty.bytes += n
	ps.cache.dirtyUsed.Add(n)
	switch {
	case was == 0 && ps.dirty.bytes > 0:
		ps.cache.dirtyIndexes.Add(1)
	case was > 0 && ps.dirty.bytes == 0:
		ps.cache.dirtyIndexes.Add(-1)
	}
}

// overDirtyBudget reports whether the index should write back for the
// dirty budget: the dirty leaves of its cache's indexes have reached it,
// and this index holds at least an even share of them, so that the
// largest holders write back and a small index is not made to write back
// each Apply for another's leaves (an idle one writes back when its feed
// goes quiet, see WriteBack). REQUIRES: Index.mu.
func (ps *pager) overDirtyBudget() bool {
	total := ps.cache.dirtyUsed.Load()
	if total < ps.dirtyBudget() || ps.dirty.bytes == 0 {
		return false
	}
	return ps.dirty.bytes*max(ps.cache.dirtyIndexes.Load(), 1) >= total
}

// minDirtyBudget is the least dirty budget (see dirtyBudget), so that a
// tiny cache does not write back every Apply.
const minDirtyBudget = 1 << 20

// freedPages are the pages an Apply of generation gen dropped: only
// snapshots older than gen may read them.
type freedPages struct {
	gen uint64
	ids []uint64
}

func pageKeyBytes(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }

// leafRows returns the rows of leaf page id, from the cache or, read with a
// read transaction of its own, from the file (and then kept in the cache).
// A write-back reads the pages it replaces with its own transaction (see
// pageWriter.oldRows).
func (ps *pager) leafRows(id uint64) ([]row, error) {
	k := pageKey{ps.owner, id}
	if rows, ok := ps.cache.get(k); ok {
		return rows, nil
	}
	var page []byte
	var rows []row
	err := ps.db.View(func(tx *bolt.Tx) (err error) {
		page, rows, err = ps.readLeaf(tx, id, nil, nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("index: read page: %w", err)
	}
	ps.cache.put(k, rows, leafSize(page, rows))
	return rows, nil
}

// readLeaf reads leaf page id with tx, noting the map's windows it
// touched: its bytes copied to buf[:0] (they outlast tx) and its rows,
// slices of them, decoded into dst[:0].
func (ps *pager) readLeaf(tx *bolt.Tx, id uint64, buf []byte, dst []row) ([]byte, []row, error) {
	b := tx.Bucket(bucketPages)
	if b == nil {
		return nil, nil, fmt.Errorf("%w: missing pages", ErrCorrupt)
	}
	page := b.Get(pageKeyBytes(id))
	if page == nil {
		return nil, nil, fmt.Errorf("%w: missing page %d", ErrCorrupt, id)
	}
	ps.mm.noteMappedIn(tx, page)
	buf = append(buf[:0], page...)
	rows, err := decodeLeafInto(dst, buf)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: page %d", err, id)
	}
	return buf, rows, nil
}

// leafSize is what a decoded leaf page costs in the cache: its bytes, its
// row slice and the cache's entry.
func leafSize(page []byte, rows []row) int64 {
	return int64(len(page)) + 24*int64(cap(rows)) + cacheEntryOverhead
}

// appendLeaf appends the page of a leaf holding rows: its kind, the
// CRC-32C of what follows, the number of rows, then each row's uvarint
// length and bytes.
func appendLeaf(dst []byte, rows []row) []byte {
	start := len(dst)
	dst = append(dst, pageLeaf, 0, 0, 0, 0)
	dst = binary.AppendUvarint(dst, uint64(len(rows)))
	for _, r := range rows {
		dst = appendBytes(dst, r)
	}
	binary.BigEndian.PutUint32(dst[start+1:], crc32.Checksum(dst[start+5:], castagnoli))
	return dst
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// decodeLeafInto returns the rows of leaf page p, slices of p, appended to
// dst[:0]. The checksum stands for checking each row (see validRow), which
// costs more than reading the page: a page whose checksum holds is one the
// index wrote, of rows it built.
func decodeLeafInto(dst []row, p []byte) ([]row, error) {
	if len(p) < 5 || p[0] != pageLeaf {
		return nil, fmt.Errorf("%w: not a leaf page", ErrCorrupt)
	}
	if crc32.Checksum(p[5:], castagnoli) != binary.BigEndian.Uint32(p[1:]) {
		return nil, fmt.Errorf("%w: leaf page checksum", ErrCorrupt)
	}
	return decodeLeafRowsInto(dst, p)
}

// decodeLeafRows returns the rows of leaf page p (kind and checksum not
// checked: p is one the index wrote).
func decodeLeafRows(p []byte) ([]row, error) { return decodeLeafRowsInto(nil, p) }

// decodeLeafRowsInto is decodeLeafRows appending the rows to dst[:0].
func decodeLeafRowsInto(dst []row, p []byte) ([]row, error) {
	d := decoder{b: p[5:]}
	n := d.uvarint()
	if d.err != nil || n > max(maxItems, pagedLeafItems)+1 {
		return nil, fmt.Errorf("%w: leaf of %d rows", ErrCorrupt, n)
	}
	rows := slices.Grow(dst[:0], int(n))
	for range n {
		r := d.bytes()
		if d.err != nil || len(r) < 13 {
			return nil, fmt.Errorf("%w: leaf row", ErrCorrupt)
		}
		rows = append(rows, r)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: leaf page trailer", ErrCorrupt)
	}
	return rows, nil
}

// appendRef appends what a parent knows of child n: its page id, kind, row
// count, earliest expiration and stored reduction (see storedRed): uvarint
// length plus one and bytes, 0 for none.
func appendRef(dst []byte, n *node) []byte {
	dst = binary.AppendUvarint(dst, n.page)
	kind := byte(pageLeaf)
	if !n.leaf() {
		kind = pageInner
	}
	dst = append(dst, kind)
	dst = binary.AppendUvarint(dst, uint64(n.count))
	dst = binary.AppendVarint(dst, n.minExp)
	red, ok := storedRed(n)
	if !ok {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(red))+1)
	return append(dst, red...)
}

// maxStoredReduction is the longest reduction a page stores for a child
// (see storedRed); a longer one is computed again after Open when a query
// needs it, as before a write-back.
const maxStoredReduction = 4 << 10

// storedRed returns the reduction a ref to n stores: its cached reduction,
// if it has one no longer than maxStoredReduction.
func storedRed(n *node) ([]byte, bool) {
	p := n.red.Load()
	if p == nil || len(*p) > maxStoredReduction {
		return nil, false
	}
	return *p, true
}

// appendInner appends the page of inner node n: its kind, its number of
// children, then each child's separator (uvarint length and bytes; empty for
// none) and ref (see appendRef).
func appendInner(dst []byte, n *node) []byte {
	dst = append(dst, pageInner)
	dst = binary.AppendUvarint(dst, uint64(len(n.children)))
	for i, c := range n.children {
		dst = appendBytes(dst, n.keys[i])
		dst = appendRef(dst, c)
	}
	return dst
}

// nodeRef is a decoded ref (see appendRef).
type nodeRef struct {
	page   uint64
	kind   byte
	count  int
	minExp int64
	red    []byte // the stored reduction, a slice of the page; nil: none
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = ErrCorrupt
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) ref() nodeRef {
	var r nodeRef
	r.page = d.uvarint()
	if len(d.b) == 0 {
		d.err = ErrCorrupt
		return r
	}
	r.kind, d.b = d.b[0], d.b[1:]
	r.count = int(d.uvarint())
	r.minExp = d.varint()
	if l := d.uvarint(); l > 0 && d.err == nil {
		if uint64(len(d.b)) < l-1 {
			d.err = ErrCorrupt
			return r
		}
		r.red, d.b = d.b[:l-1:l-1], d.b[l-1:]
	}
	if r.kind != pageLeaf && r.kind != pageInner || r.count < 0 {
		d.err = ErrCorrupt
	}
	return r
}

// setRed gives n the reduction a ref stores, copied out of the page.
func (n *node) setRed(r nodeRef) {
	if r.red != nil {
		v := bytes.Clone(r.red)
		n.red.Store(&v)
	}
}

// decodeInner returns the separators and child refs of inner page p,
// slices of p.
func decodeInner(p []byte) (keys [][]byte, refs []nodeRef, err error) {
	if len(p) == 0 || p[0] != pageInner {
		return nil, nil, fmt.Errorf("%w: missing or not an inner page", ErrCorrupt)
	}
	d := decoder{b: p[1:]}
	nc := int(d.uvarint())
	if d.err != nil || nc < 2 || nc > maxChildren+1 {
		return nil, nil, fmt.Errorf("%w: inner page of %d children", ErrCorrupt, nc)
	}
	refs = make([]nodeRef, nc)
	keys = make([][]byte, nc)
	for i := range nc {
		keys[i] = d.bytes()
		refs[i] = d.ref()
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, nil, fmt.Errorf("%w: inner page", ErrCorrupt)
	}
	return keys, refs, nil
}

// loadNode returns the node of ref r, read with tx: a leaf's record only
// (its rows stay on disk), an inner node with its subtree's inner nodes.
func (ps *pager) loadNode(tx *bolt.Tx, r nodeRef) (*node, error) {
	if r.page == 0 {
		if r.kind != pageLeaf || r.count != 0 {
			return nil, fmt.Errorf("%w: a tree without page", ErrCorrupt)
		}
		return &node{}, nil
	}
	n := &node{count: r.count, minExp: r.minExp, page: r.page, ps: ps}
	n.setRed(r)
	if r.kind == pageLeaf {
		return n, nil
	}
	inner := tx.Bucket(bucketPages).Get(pageKeyBytes(r.page))
	raw, refs, err := decodeInner(inner)
	ps.mm.noteMappedIn(tx, inner)
	if err != nil {
		return nil, fmt.Errorf("%w: inner page %d", err, r.page)
	}
	nc := len(refs)
	n.keys = make([][]byte, nc)
	n.children = make([]*node, nc)
	var keyBytes int
	for _, k := range raw {
		keyBytes += len(k)
	}
	buf := make([]byte, 0, keyBytes) // the node's separators, in one allocation
	for i, k := range raw {
		if len(k) > 0 {
			buf = append(buf, k...)
			n.keys[i] = buf[len(buf)-len(k) : len(buf) : len(buf)]
		}
	}
	for i, cr := range refs {
		c, err := ps.loadNode(tx, cr)
		if err != nil {
			return nil, err
		}
		n.children[i] = c
	}
	return n, nil
}

// write returns n with a page for every node under it: n itself if it
// has one (then so do all its descendants), else a copy of generation gen
// holding a new page, its children written first; each copy is appended
// to written. An empty leaf without page stays so (a tree without page).
// The pages are built in pw's scratch buffer and copied to its arena (see
// pageWriter.arena). A copied inner
// node's separators are packed into one allocation, so that none keeps a
// row's bytes alive; a copy keeps n's cached reductions. A delta leaf
// (see leafDelta) is written as a new page with its merged rows, and its
// old page appended to replaced.
func (ps *pager) write(pw *pageWriter, n *node, gen uint64, rd *reduction, written *[]writtenNode, replaced *[]uint64) (*node, error) {
	if n.page != 0 && n.delta == nil {
		return n, nil
	}
	if n.delta != nil {
		*replaced = append(*replaced, n.page)
	}
	if n.leaf() && n.count == 0 {
		return &node{gen: gen}, nil
	}
	c := &node{gen: gen, count: n.count, minExp: n.minExp}
	c.red.Store(n.red.Load())
	c.live.Store(n.live.Load())
	c.suffix.Store(n.suffix.Load())
	c.never.Store(n.never.Load())
	if n.leaf() {
		items := n.items
		if n.delta != nil {
			rows, err := pw.oldRows(n.page)
			if err != nil {
				return nil, err
			}
			pw.items = n.delta.mergeInto(pw.items[:0], rows)
			items = pw.items
		}
		c.items = items // for the reduction
		rd.store(c)
		if n.delta != nil {
			// Its rows are pw's scratch, which the next leaf reuses: a
			// Reducer must not keep them, but one returning an input's
			// bytes would, through the reduction cached.
			if p := c.red.Load(); p != nil && p != n.red.Load() {
				v := bytes.Clone(*p)
				c.red.Store(&v)
			}
		}
		pw.scratch = appendLeaf(pw.scratch[:0], c.items)
		// The rows are in the page now: the copy, published at the end of
		// the write-back, reads them through the cache (published puts the
		// pages kept there). Held until then, a write-back's leaves were
		// its whole dirty set at once, merged with the rows of the pages
		// they replace: a build's write-backs touch most of the index's
		// leaves, so most of its rows (BENCHMARKS.md, "(issue 19) the
		// build's peak").
		c.items = nil
	} else {
		c.children = make([]*node, len(n.children))
		for i, ch := range n.children {
			var err error
			if c.children[i], err = ps.write(pw, ch, gen, rd, written, replaced); err != nil {
				return nil, err
			}
		}
		size := 0
		for _, k := range n.keys {
			size += len(k)
		}
		keys := make([]byte, 0, size)
		c.keys = make([][]byte, len(n.keys))
		for i, k := range n.keys {
			if k != nil {
				keys = append(keys, k...)
				c.keys[i] = keys[len(keys)-len(k) : len(keys) : len(keys)]
			}
		}
		rd.store(c)
		pw.scratch = appendInner(pw.scratch[:0], c)
	}
	c.page, c.ps = ps.next, ps
	ps.next++
	var kept []byte // for the cache (see published), a copy: the arena is reused
	if n.leaf() && int64(len(pw.scratch)) <= pw.retain {
		kept = bytes.Clone(pw.scratch)
		pw.retain -= int64(len(kept))
	}
	*written = append(*written, writtenNode{c, kept})
	return c, pw.put(c.page, pw.place(pw.scratch))
}

// arenaChunk is the size of the chunks of a pageWriter's arena.
const arenaChunk = 256 << 10

// place returns a copy of page in pw's arena, where it stays until pw's
// transaction ends: bbolt keeps the values put until then. The arena's
// chunks are reused by the next transaction (see commit), so that a
// write-back allocates about one transaction's pages rather than all it
// writes: what it allocates is the collector's work, and a build's last
// write-back runs beside the requests (BENCHMARKS.md, issue 19).
func (pw *pageWriter) place(page []byte) []byte {
	if cap(pw.arena)-len(pw.arena) < len(page) {
		if len(pw.arena) > 0 {
			pw.filled = append(pw.filled, pw.arena)
		}
		pw.arena = nil
		if n := len(pw.spare); n > 0 && cap(pw.spare[n-1]) >= len(page) {
			pw.arena, pw.spare = pw.spare[n-1][:0], pw.spare[:n-1]
		} else {
			pw.arena = make([]byte, 0, max(arenaChunk, len(page)))
		}
	}
	start := len(pw.arena)
	pw.arena = append(pw.arena, page...)
	return pw.arena[start:len(pw.arena):len(pw.arena)]
}

// oldRows returns the rows of page id, which a delta leaf replaces: from
// the cache, or read with pw's transaction into its scratch (reused by
// the next call: the caller holds them only until the leaf's new page is
// built).
func (pw *pageWriter) oldRows(id uint64) ([]row, error) {
	ps := pw.ps
	if rows, ok := ps.cache.get(pageKey{ps.owner, id}); ok {
		return rows, nil
	}
	page, rows, err := ps.readLeaf(pw.tx, id, pw.old, pw.oldItems)
	if err != nil {
		return nil, fmt.Errorf("index: read page: %w", err)
	}
	pw.old, pw.oldItems = page, rows
	return rows, nil
}

// writtenRetainShare is the share of the page cache's budget a write-back
// keeps of the leaf pages it wrote, to put in the cache once it is
// published (see published); the others are read from the file when a
// query or the next write-back needs them. Every page was kept once: a
// 5,000,000-document build with a 256 MiB cache held 160-205 MiB of
// written pages at each write-back's end, beside the cache and the dirty
// leaves (BENCHMARKS.md, "Large quotas: the memory limit, bloom filters"),
// for a cache that could keep only its budget of them.
const writtenRetainShare = 4

// writtenRetain returns the bytes of written leaf pages a write-back keeps
// for a cache of budget bytes.
func writtenRetain(budget int64) int64 { return budget / writtenRetainShare }

// writeBackTxBytes is the most page bytes a write-back puts in one bbolt
// transaction (see writeBack): bbolt holds a transaction's changed nodes
// in its heap until the commit, which writes them through freshly
// allocated buffers, and the file's pages the transaction reached stay
// mapped and resident until the map is released after it.
const writeBackTxBytes = 16 << 20

// pageWriter puts a write-back's new pages into a run of transactions of
// the file, each holding about ps.txBytes of them: when one is full it is
// committed (only pages at or above the file's stored next page id, which
// no tree of the file reaches until the final transaction of the
// write-back switches the roots), the file's mapped pages are released,
// and the next one begins. The last one is the write-back's final
// transaction.
type pageWriter struct {
	ps     *pager
	tx     *bolt.Tx
	pages  *bolt.Bucket
	bytes  int64 // page bytes put in tx, and what its back-index puts count
	mapped int64 // bytes of the map's windows tx read first (see mapRelease.noteMappedIn)
	backs  int   // back-index entries changed in tx
	retain int64 // bytes of written leaf pages still kept for the cache (writtenRetain)

	// The arena of the pages put in tx (see place): arena is being
	// filled, filled holds the chunks filled before, spare those free
	// for reuse.
	arena         []byte
	filled, spare [][]byte
	scratch       []byte       // the page being built
	items         []row        // a delta leaf's merged rows
	old           []byte       // the page a delta leaf replaces (see oldRows)
	oldItems      []row        // its rows
	backC, undoC  *bolt.Cursor // cursors of tx's back and undo buckets (see putBack), nil until used
	// undoFresh: the undo bucket was empty when the write-back's
	// back-index changes began, so none of the entries it puts, each
	// once, is there before (see putBack).
	undoFresh bool
}

// begin starts pw's next transaction.
func (pw *pageWriter) begin() error {
	tx, err := pw.ps.db.Begin(true)
	if err != nil {
		return err
	}
	pw.tx, pw.pages, pw.bytes, pw.mapped, pw.backs = tx, tx.Bucket(bucketPages), 0, 0, 0
	pw.backC, pw.undoC = nil, nil
	pw.pages.FillPercent = 1 // page ids only grow
	return nil
}

// limit returns the most bytes pw puts in one transaction; negative: no
// bound (everything in the final transaction).
func (pw *pageWriter) limit() int64 {
	if pw.ps.txBytes == 0 {
		return writeBackTxBytes
	}
	return pw.ps.txBytes
}

// full reports whether pw's transaction holds its bound's worth: of page
// bytes and back-index puts (bbolt's heap), and of the map's windows it
// read first (the file's resident map: its commit reads again the leaves
// it changed, and their siblings when it rebalances them, after the last
// release its reads made).
func (pw *pageWriter) full() bool {
	limit := pw.limit()
	return limit >= 0 && (pw.bytes >= limit || pw.mapped >= limit)
}

// next commits pw's transaction and begins the next one if it holds its
// bound's worth.
func (pw *pageWriter) next() error {
	if !pw.full() {
		return nil
	}
	if err := pw.commit(); err != nil {
		return err
	}
	return pw.begin()
}

// put writes page id, and moves to a new transaction if tx is full.
func (pw *pageWriter) put(id uint64, page []byte) error {
	ps := pw.ps
	ps.mm.noteReadIn(pw.tx, mapPage) // the leaf page the page's key goes to
	if err := pw.pages.Put(pageKeyBytes(id), page); err != nil {
		return err
	}
	pw.bytes += int64(len(page))
	return pw.next()
}

// putBack writes document id's back-index entry (rows nil: none), and
// moves to a new transaction if tx is full. The back index must switch
// with the roots: the log's replay at Open reads it for the rows each
// logged document had, as the file's trees hold them. So unless pw has
// no bound (all in the final transaction), the entry the file held
// before is saved first in the undo bucket, in the same transaction,
// which the final transaction empties and Open restores (see
// restoreBack): a crash between leaves the back index as the roots have
// it. A failed write-back leaves its undo entries in the file; its next
// attempt keeps them (the entry before the first attempt) rather than
// saving what the failed one wrote.
func (pw *pageWriter) putBack(id string, rows []byte) error {
	ps := pw.ps
	back := pw.tx.Bucket(bucketBack)
	key := []byte(id)
	// The leaf page the key goes to, read through the map (its windows),
	// and the entry it holds there. The cursors are reused: a new one
	// grows its stack anew at each Seek.
	if pw.backC == nil {
		pw.backC = back.Cursor()
	}
	k, old := pw.backC.Seek(key)
	pw.mapped += ps.mm.noteMappedIn(pw.tx, k)
	if !bytes.Equal(k, key) {
		old = nil
	}
	bounded := pw.limit() >= 0 && !ps.backFinal
	if bounded {
		undo := pw.tx.Bucket(bucketBackUndo)
		undo.FillPercent = 1 // in key order, into an empty bucket
		if pw.undoC == nil {
			pw.undoC = undo.Cursor()
		}
		fresh := pw.undoFresh
		if !fresh {
			uk, _ := pw.undoC.Seek(key)
			fresh = !bytes.Equal(uk, key)
		}
		if fresh {
			v := make([]byte, 0, 1+len(old))
			if old != nil {
				v = append(append(v, 1), old...)
			} else {
				v = append(v, 0)
			}
			if err := undo.Put(key, v); err != nil {
				return err
			}
		}
	}
	var err error
	if rows != nil {
		err = back.Put(key, rows)
	} else {
		err = back.Delete(key)
	}
	if err != nil {
		return err
	}
	pw.backs++
	// A document's key lands on its own leaf page of the back index
	// when the documents are few among many (a build in partition order):
	// bbolt holds and rewrites that page.
	if !bounded {
		return nil
	}
	pw.bytes += mapPage
	return pw.next()
}

// restoreBack puts back, in tx, the back-index entries the undo bucket
// saved (see putBack) and empties it: a write-back that did not finish
// changed them; its roots and free list never reached the file, its log
// records are still there, and their replay needs the back index the
// roots go with.
func restoreBack(tx *bolt.Tx) error {
	undo := tx.Bucket(bucketBackUndo)
	if undo == nil { // a file of before the undo bucket
		_, err := tx.CreateBucket(bucketBackUndo)
		return err
	}
	back := tx.Bucket(bucketBack)
	n := 0
	if err := undo.ForEach(func(k, v []byte) error {
		n++
		switch {
		case len(v) == 1 && v[0] == 0:
			return back.Delete(bytes.Clone(k))
		case len(v) > 1 && v[0] == 1:
			return back.Put(bytes.Clone(k), bytes.Clone(v[1:]))
		}
		return fmt.Errorf("%w: back-index undo entry of %q", ErrCorrupt, k)
	}); err != nil || n == 0 {
		return err
	}
	return emptyBackUndo(tx)
}

// emptyBackUndo empties the undo bucket in tx. Deleting the bucket frees
// its pages without reading their entries.
func emptyBackUndo(tx *bolt.Tx) error {
	if err := tx.DeleteBucket(bucketBackUndo); err != nil {
		return err
	}
	_, err := tx.CreateBucket(bucketBackUndo)
	return err
}

// commit commits pw's transaction, one before the write-back's final one.
func (pw *pageWriter) commit() error {
	ps := pw.ps
	tx := pw.tx
	pw.tx = nil
	backs := pw.backs
	if err := tx.Commit(); err != nil {
		return err
	}
	// The pages put are in the file: the arena's chunks are free.
	pw.spare = append(pw.spare, pw.filled...)
	pw.filled, pw.arena = nil, pw.arena[:0]
	ps.pageTxs++
	if backs > 0 {
		ps.backTxs++
	}
	ps.mm.release() // what the transaction read and wrote through the map
	if ps.afterPageTx != nil {
		return ps.afterPageTx()
	}
	return nil
}

// deleteEarly deletes the pages of the batches of ps.pending that no
// reader needs (generation at most safe), in transactions of their own of
// a bounded number of deletions each, and drops them from ps.pending and
// the cache. They are safe to delete before the write-back's final
// transaction: an earlier write-back listed them free in the file, and
// none of its trees reaches them; and after it, those it listed free.
// REQUIRES: Index.mu.
func (pw *pageWriter) deleteEarly(safe uint64) error {
	ps := pw.ps
	var early, keep []freedPages
	for _, f := range ps.pending {
		if f.gen <= safe {
			early = append(early, f)
		} else {
			keep = append(keep, f)
		}
	}
	limit := pw.limit()
	if len(early) == 0 || limit < 0 {
		return nil
	}
	perTx := int(max(limit/(2*mapPage), 1)) // each reads about two leaf pages (see deleteFreed)
	var ids []uint64
	for _, f := range early {
		ids = append(ids, f.ids...)
	}
	slices.Sort(ids)
	for len(ids) > 0 {
		if err := pw.begin(); err != nil {
			return err
		}
		// Up to perTx deletions, fewer if their leaves are spread
		// over the map (see full).
		pc, fc := pw.pages.Cursor(), pw.tx.Bucket(bucketFree).Cursor()
		n := 0
		for ; n < len(ids) && n < perTx && !pw.full(); n++ {
			k := pageKeyBytes(ids[n])
			for _, c := range []*bolt.Cursor{pc, fc} {
				mapped, err := ps.deleteAt(pw.tx, c, k)
				if err != nil {
					return err
				}
				pw.mapped += mapped
			}
		}
		if err := pw.commit(); err != nil {
			return err
		}
		ids = ids[n:]
	}
	ps.pending = keep
	ps.dropCached(early, nil)
	return nil
}

// rollback ends pw's open transaction, if any, without committing it.
func (pw *pageWriter) rollback() {
	if pw.tx != nil {
		_ = pw.tx.Rollback()
		pw.tx = nil
	}
}

// store computes and caches the reduction of n, a node being written, so
// that its parent's page (or the roots) stores it (see appendRef): the
// children's reductions are cached already, those of the children just
// written or read from their refs, so this costs one Reduce of a leaf's
// rows or one Rereduce. rd nil (a view without reduce) stores none, and so
// does a failure (a Reducer error, a reduction too large, a page that
// cannot be read): a query computes it then, as before a write-back.
func (rd *reduction) store(n *node) {
	if rd == nil || n.count == 0 {
		return
	}
	var err error
	func() {
		defer recoverPage(&err)
		_, err = rd.node(n)
	}()
	_ = err // no stored reduction; the query that needs it reports the error
}

// writtenNode is a node a write-back wrote, and its page (in its arena).
type writtenNode struct {
	n    *node
	page []byte
}

// published finishes the nodes written by a committed write-back: each leaf's
// rows leave the node, and those of the leaves whose pages were kept
// (writtenRetain) go to the cache, decoded from a copy of the page (so that
// they keep neither the Apply's rows nor its arena alive).
func (ps *pager) published(written []writtenNode) {
	for _, w := range written {
		if !w.n.leaf() {
			continue
		}
		if w.page == nil {
			w.n.items = nil
			continue
		}
		if rows, err := decodeLeafRows(w.page); err == nil { // a copy (see write)
			ps.cache.put(pageKey{ps.owner, w.n.page}, rows, leafSize(w.page, rows))
		}
		w.n.items = nil
	}
}

// safeGen returns the generation up to which dropped pages may be deleted:
// no query reads a snapshot older than it. current is the published
// snapshot's generation.
func (ps *pager) safeGen(current uint64) uint64 {
	ps.rmu.Lock()
	defer ps.rmu.Unlock()
	m := current
	for g := range ps.readers {
		m = min(m, g)
	}
	return m
}

// deleteFreed deletes, in tx, the pages of the batches of pending that no
// reader may need (generation at most safe), from the pages and free
// buckets, and returns the batches left.
func (ps *pager) deleteFreed(tx *bolt.Tx, pending []freedPages, safe uint64) ([]freedPages, error) {
	pages, free := tx.Bucket(bucketPages), tx.Bucket(bucketFree)
	var left []freedPages
	var ids []uint64
	for _, f := range pending {
		if f.gen > safe {
			left = append(left, f)
			continue
		}
		ids = append(ids, f.ids...)
	}
	slices.Sort(ids) // in key order (see writeBack)
	pc, fc := pages.Cursor(), free.Cursor()
	for _, id := range ids {
		k := pageKeyBytes(id)
		for _, c := range []*bolt.Cursor{pc, fc} {
			if _, err := ps.deleteAt(tx, c, k); err != nil {
				return nil, err
			}
		}
	}
	return left, nil
}

// deleteAt deletes key k with c, a cursor of tx, counting the leaf page
// it was on as read through the map, and returns the bytes counted.
func (ps *pager) deleteAt(tx *bolt.Tx, c *bolt.Cursor, k []byte) (int64, error) {
	at, _ := c.Seek(k)
	mapped := ps.mm.noteMappedIn(tx, at) // the leaf page the key was on, or would be
	if !bytes.Equal(at, k) {
		return mapped, nil
	}
	return mapped, c.Delete()
}

// dropCached removes the deleted pages' rows from the cache.
func (ps *pager) dropCached(before, after []freedPages) {
	keep := make(map[uint64]bool, len(after))
	for _, f := range after {
		keep[f.gen] = true
	}
	for _, f := range before {
		if keep[f.gen] {
			continue
		}
		for _, id := range f.ids {
			ps.cache.drop(pageKey{ps.owner, id})
		}
	}
}

// encodeRoots encodes the roots of snap's trees (see keyRoots).
func encodeRoots(snap *snapshot) []byte {
	var b []byte
	for vi := range snap.roots {
		b = appendRef(b, snap.roots[vi])
		b = appendRef(b, snap.expRoots[vi])
	}
	return b
}

// loadPaged reads a paged file's state into snap (inner nodes and leaf
// records; no rows) and deletes the pages its free bucket lists, left by
// the previous run, and those at or above its next page id, left by a
// write-back a crash ended (see pageWriter).
func (ix *Index) loadPaged(snap *snapshot) error {
	ps := ix.ps
	return ix.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		pages, free := tx.Bucket(bucketPages), tx.Bucket(bucketFree)
		if meta == nil || pages == nil || free == nil || tx.Bucket(bucketBack) == nil || tx.Bucket(bucketLog) == nil {
			return fmt.Errorf("%w: missing bucket", ErrCorrupt)
		}
		if err := restoreBack(tx); err != nil {
			return err
		}
		seqs, next := meta.Get(keySeqs), meta.Get(keyNextPage)
		if len(seqs) != 8*len(snap.seqs) || len(next) != 8 {
			return fmt.Errorf("%w: bad meta", ErrCorrupt)
		}
		for i := range snap.seqs {
			snap.seqs[i] = binary.BigEndian.Uint64(seqs[8*i:])
		}
		ps.next = binary.BigEndian.Uint64(next)
		ps.stored = ps.next
		ix.feedUUID.Store(loadFeedUUID(meta))
		ix.mapped.Store(loadMapped(meta))
		{
			d := decoder{b: meta.Get(keyRoots)}
			for vi := range snap.roots {
				r, x := d.ref(), d.ref()
				if d.err != nil {
					return fmt.Errorf("%w: roots", ErrCorrupt)
				}
				var err error
				if snap.roots[vi], err = ps.loadNode(tx, r); err != nil {
					return err
				}
				if snap.expRoots[vi], err = ps.loadNode(tx, x); err != nil {
					return err
				}
			}
			if len(d.b) != 0 {
				return fmt.Errorf("%w: roots", ErrCorrupt)
			}
		}
		var ids [][]byte
		if err := free.ForEach(func(k, _ []byte) error {
			ids = append(ids, bytes.Clone(k))
			return nil
		}); err != nil {
			return err
		}
		// The orphans of a write-back that a crash ended before its
		// final transaction (see pageWriter).
		c := pages.Cursor()
		for k, _ := c.Seek(next); k != nil; k, _ = c.Next() {
			ids = append(ids, bytes.Clone(k))
		}
		for _, k := range ids {
			if err := pages.Delete(k); err != nil {
				return err
			}
			if err := free.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// createPagedBuckets makes the empty buckets and trees of a new paged file
// of nviews views.
func createPagedBuckets(tx *bolt.Tx, nviews int) error {
	for _, name := range [][]byte{bucketPages, bucketBack, bucketFree, bucketLog, bucketBackUndo} {
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if err := meta.Put(keyRoots, encodeRoots(newSnapshot(nviews, 0))); err != nil {
		return err
	}
	return meta.Put(keyNextPage, binary.BigEndian.AppendUint64(nil, 1))
}

// readBack returns the back-index entries of the documents of updates, read
// from the dirty state or the file (copies), the file's in key order.
func (ps *pager) readBack(updates []DocUpdate) (map[string][]byte, error) {
	back := make(map[string][]byte, len(updates))
	var ids []string
	for i := range updates {
		id := updates[i].DocID
		if v, ok := ps.dirty.back[id]; ok {
			if v != nil {
				back[id] = v // immutable: Apply replaces entries, never changes one
			}
			continue
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return back, nil
	}
	slices.Sort(ids)
	err := ps.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBack).Cursor()
		for i, id := range ids {
			if i > 0 && id == ids[i-1] {
				continue
			}
			k, v := c.Seek([]byte(id))
			if k != nil && string(k) == id {
				back[id] = bytes.Clone(v)
			}
			// The leaf page sought, found or not (its windows).
			ps.mm.noteMappedIn(tx, k)
			ps.mm.noteMappedIn(tx, v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index: read back index: %w", err)
	}
	return back, nil
}

// eachDoc calls fn with the id of every document the index holds rows of:
// those of the file's back index that the Applies since the last write-back
// did not delete, and those they gave rows. REQUIRES: Index.mu.
func (ps *pager) eachDoc(fn func(id string)) error {
	err := ps.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBack).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			ps.mm.noteMappedIn(tx, k)
			ps.mm.noteMappedIn(tx, v)
			if _, changed := ps.dirty.back[string(k)]; !changed {
				fn(string(k))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index: read back index: %w", err)
	}
	for id, rows := range ps.dirty.back {
		if rows != nil {
			fn(id)
		}
	}
	return nil
}

// applied records what a successful Apply of a paged index changed and
// did not write as pages: its documents' back-index entries (back holds
// them now), the pages it dropped, its dirty leaves' estimated bytes.
// REQUIRES: Index.mu.
func (ps *pager) applied(gen uint64, a *applier, updates []DocUpdate) {
	if ps.dirty.back == nil {
		ps.dirty.back = make(map[string][]byte, len(updates))
	}
	for i := range updates {
		id := updates[i].DocID
		ps.dirty.back[id] = a.back[id] // nil when the document has no rows now
	}
	if len(a.w.freed) > 0 {
		ps.dirty.freed = append(ps.dirty.freed, freedPages{gen: gen, ids: a.w.freed})
	}
	ps.dirty.docs += len(updates)
	if ps.dirty.docs == 0 {
		ps.dirty.docs = 1 // an Apply of no update still moves the vector
	}
	ps.addDirty(a.w.dirtyBytes)
}

// writeBackDue reports whether a paged index whose published snapshot is
// snap should write back now: its dirty leaves have reached the dirty
// budget, or its log holds checkpointDocs documents and, unless a test
// fixed that number, as many as half the rows of its trees. The log bound
// grows with the index, as the in-memory index's checkpoint does: random
// updates touch most leaves, so a write-back costs about the whole tree,
// and each one is paid for by that many logged documents; it also bounds
// what Open replays. REQUIRES: Index.mu.
func (ix *Index) writeBackDue(snap *snapshot) bool {
	ps := ix.ps
	if ps.overDirtyBudget() {
		return true
	}
	bound := ix.checkpointDocs
	if !ix.fixedCheckpoint {
		rows := 0
		for _, r := range snap.roots {
			rows += r.count
		}
		bound = max(bound, rows/2)
	}
	return ix.mu.logDocs >= bound
}

// isDirty reports whether Applies changed what the file does not hold yet.
// REQUIRES: Index.mu.
func (ps *pager) isDirty() bool { return ps.dirty.docs > 0 }

// writeBackLocked writes back a dirty paged index (see writeBack) as a
// writer generation of its own. REQUIRES: Index.mu.
func (ix *Index) writeBackLocked() (err error) {
	defer recoverPage(&err)
	ps := ix.ps
	if ps == nil || !ps.isDirty() {
		return nil
	}
	ix.mu.gen++
	return ix.writeBack(ix.mu.gen)
}

// writeBack persists what the Applies since the last write-back changed:
// a page for every node that has none (the dirty leaves and the inner
// nodes above them), the roots, the sequence vector and Mapped of the
// published snapshot, the back index's changes, the pages the Applies
// dropped (listed as free) and the deletion of the dropped pages no
// reader needs. The new pages go in transactions of about writeBackTxBytes
// each (see pageWriter), so that neither bbolt's heap nor the file's
// resident map holds a large build's whole dirty set at once, and so do the
// back index's changes after them, each transaction saving the entries it
// replaces (see pageWriter.putBack); everything else goes in the last one,
// the final transaction, with the last pages or entries, but for the
// deletion of the pages earlier write-backs freed and no reader needs,
// which goes first, in bounded transactions too (see deleteEarly).
// Until it commits, the file's roots reach none of the new pages (their
// ids are at or above its stored next page id), and the back index it
// changed is saved as it was, so the file always holds one Apply's
// complete state, never a sequence vector ahead of its pages: after a
// crash Open deletes the orphaned pages and restores the back index (see
// restoreBack), and replays the log, and the feed replays from the vector
// it holds.
//
// The published nodes are never changed (queries read them): the nodes
// written are copies, with their pages and cached reductions, published as
// a new snapshot of generation gen (a fresh writer generation), whose
// leaves read their rows through the cache. REQUIRES: Index.mu.
func (ix *Index) writeBack(gen uint64) error {
	ps := ix.ps
	if !ps.isDirty() {
		return nil
	}
	old := ix.snap.Load()
	snap := &snapshot{roots: slices.Clone(old.roots), expRoots: slices.Clone(old.expRoots), seqs: old.seqs, gen: gen}
	safe := ps.safeGen(old.gen)
	var written []writtenNode
	var left, pending []freedPages
	var replaced []uint64 // the pages of the delta leaves written
	pw := &pageWriter{ps: ps, retain: writtenRetain(ps.cache.budget)}
	defer pw.rollback() // a failure's, or a panic's (see recoverPage)
	err := func() error {
		if err := pw.deleteEarly(safe); err != nil {
			return err
		}
		pending = append(slices.Clone(ps.pending), ps.dirty.freed...)
		if err := pw.begin(); err != nil {
			return err
		}
		for vi := range snap.roots {
			var rd *reduction
			if r := ix.views[vi].Reducer; r != nil {
				rd = &reduction{ctx: context.Background(), r: r}
			}
			var err error
			if snap.roots[vi], err = ps.write(pw, snap.roots[vi], gen, rd, &written, &replaced); err != nil {
				return err
			}
			if snap.expRoots[vi], err = ps.write(pw, snap.expRoots[vi], gen, rd, &written, &replaced); err != nil {
				return err
			}
		}
		// The back index's changes, in bounded transactions too, each
		// saving the entries it replaces (see putBack); in key order:
		// bbolt splits its nodes only at commit, so keys put in random
		// order into a node grown by this transaction cost a shift of the
		// node's entries each.
		if k, _ := pw.tx.Bucket(bucketBackUndo).Cursor().First(); k == nil {
			pw.undoFresh = true // not a failed write-back's
		}
		for _, id := range slices.Sorted(maps.Keys(ps.dirty.back)) {
			if err := pw.putBack(id, ps.dirty.back[id]); err != nil {
				return err
			}
		}
		// The final transaction: everything else, which must switch with
		// the roots, and the undo entries' end.
		tx := pw.tx
		if err := emptyBackUndo(tx); err != nil {
			return err
		}
		// The log's records are all below logNext: the bucket goes
		// whole, as the undo bucket's. Deleting a bucket frees its pages
		// reading their headers, in this call, and bbolt's commit does
		// not read them again; deleting its records one by one left the
		// commit to read every leaf they emptied (rebalancing it). The
		// map is released after both.
		if err := tx.DeleteBucket(bucketLog); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketLog); err != nil {
			return err
		}
		ps.mm.releaseIn(tx)
		free := tx.Bucket(bucketFree)
		freed := slices.Clone(replaced)
		for _, f := range ps.dirty.freed {
			freed = append(freed, f.ids...)
		}
		slices.Sort(freed) // in key order, as the back index's
		for _, id := range freed {
			if err := free.Put(pageKeyBytes(id), nil); err != nil {
				return err
			}
		}
		// The pages no reader needs stay, listed free, until the
		// deletion after the switch (below), in bounded transactions:
		// deleted here, they were a build's Applies' dropped pages all
		// over the pages bucket, and bbolt's commit of the final
		// transaction read, through the map, every leaf they were on
		// and its siblings (rebalancing), with no release until its end.
		// Unbounded (a write-back in one transaction), they go here.
		left = pending
		if pw.limit() < 0 {
			var err error
			if left, err = ps.deleteFreed(tx, pending, safe); err != nil {
				return err
			}
		}
		if len(replaced) > 0 { // snapshots before gen read them
			left = append(left, freedPages{gen: gen, ids: replaced})
		}
		meta := tx.Bucket(bucketMeta)
		for _, kv := range [][2][]byte{
			{keyRoots, encodeRoots(snap)},
			{keySeqs, encodeSeqs(snap.seqs)},
			{keyMapped, binary.BigEndian.AppendUint64(nil, ix.mapped.Load())},
			{keyNextPage, binary.BigEndian.AppendUint64(nil, ps.next)},
		} {
			if err := meta.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		pw.tx = nil
		return tx.Commit()
	}()
	if err != nil {
		// The copies are never published, and the pages the committed
		// transactions wrote, all at or above the file's stored next
		// page id, are orphans that the next write-back overwrites (its
		// ids start there again) or Open deletes. The dirty state stays,
		// for the next write-back.
		pw.rollback()
		ps.next = ps.stored
		return fmt.Errorf("index: write pages: %w", err)
	}
	ps.stored = ps.next
	ps.published(written)
	ps.dropCached(pending, left)
	ps.pending = left
	ps.dirty.back, ps.dirty.freed, ps.dirty.docs = nil, nil, 0
	ps.addDirty(-ps.dirty.bytes)
	ix.mu.logDocs = 0
	ix.publish(snap)
	ps.mm.release() // the transaction read the pages it changed
	// The pages the final transaction listed free that no reader needs,
	// deleted in transactions of a bounded number of deletions each: a
	// crash before leaves them listed free, and Open deletes them.
	if err := pw.deleteEarly(safe); err != nil {
		return fmt.Errorf("index: delete freed pages: %w", err)
	}
	return nil
}

// acquire returns the published snapshot for a reader; a paged index
// counts the readers of each snapshot, so that the pages it reads stay
// until release.
func (ix *Index) acquire() *snapshot {
	ps := ix.ps
	if ps == nil {
		return ix.snap.Load()
	}
	ps.rmu.Lock()
	s := ix.snap.Load()
	ps.readers[s.gen]++
	ps.rmu.Unlock()
	return s
}

// release ends a read of s, from acquire.
func (ix *Index) release(s *snapshot) {
	ps := ix.ps
	if ps == nil {
		return
	}
	ps.rmu.Lock()
	if ps.readers[s.gen]--; ps.readers[s.gen] <= 0 {
		delete(ps.readers, s.gen)
	}
	ps.rmu.Unlock()
	ps.mm.maybe() // the read is over, its transactions closed
}

// publish makes snap the snapshot queries read.
func (ix *Index) publish(snap *snapshot) {
	ps := ix.ps
	if ps == nil {
		ix.snap.Store(snap)
		return
	}
	ps.rmu.Lock()
	ix.snap.Store(snap)
	ps.rmu.Unlock()
}

// runDone calls the durable callbacks *done holds (see ApplyDurable). It is
// deferred before the index's lock is taken, so that they run once the lock
// is released.
func runDone(done *[]func()) {
	for _, f := range *done {
		f()
	}
}

// replayPaged applies the log records a paged file holds (the Applies
// logged since its last write-back) to the trees loaded into snap, as
// dirty leaves of writer generation 1, as those Applies had left them.
func (ix *Index) replayPaged(ctx context.Context, snap *snapshot) error {
	ps := ix.ps
	var recs [][]byte
	err := ix.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLog).Cursor()
		for k, rec := c.First(); k != nil; k, rec = c.Next() {
			if len(k) != 8 {
				return fmt.Errorf("%w: log key %x", ErrCorrupt, k)
			}
			recs = append(recs, bytes.Clone(rec))
			ix.mu.logNext = binary.BigEndian.Uint64(k) + 1
		}
		return nil
	})
	if err != nil || len(recs) == 0 {
		return err
	}
	defer recoverPage(&err)
	ix.mu.gen = 1 // the loaded nodes are of generation 0
	a := applier{w: wtx{gen: ix.mu.gen, leafRows: ix.leafRows}, roots: snap.roots, expRoots: snap.expRoots}
	var docs []DocUpdate
	for _, rec := range recs {
		if err := ctx.Err(); err != nil {
			return err
		}
		var ids []DocUpdate
		var entries [][]byte
		for d := (decoder{b: rec}); !d.done(); {
			id, rows := d.bytes(), d.bytes()
			if d.err != nil || !validEntries(rows, len(snap.roots)) {
				return fmt.Errorf("%w: log record", ErrCorrupt)
			}
			ids = append(ids, DocUpdate{DocID: string(id)})
			entries = append(entries, rows)
		}
		back, err := ps.readBack(ids)
		if err != nil {
			return err
		}
		a.back = back
		for i := range ids {
			if err := a.replace(ids[i].DocID, bytes.Clone(entries[i])); err != nil {
				return err
			}
		}
		// What the record changed is dirty from now on, so that the next
		// record reads these documents' entries from the dirty state.
		ps.applied(a.w.gen, &a, ids)
		a.w.freed, a.w.dirtyBytes = nil, 0
		docs = append(docs, ids...)
	}
	ix.mu.logDocs = len(docs)
	return nil
}
