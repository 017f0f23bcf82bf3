package index

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// SetCheckpointDocs lowers the number of logged documents that trigger a
// checkpoint (a paged index's write-back), so that tests reach it with few
// documents.
func SetCheckpointDocs(ix *Index, n int) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.checkpointDocs = n
	ix.fixedCheckpoint = true
}

// SetCheckpointHook makes every background checkpoint started from now on
// call hook after writing its rows, before switching to them.
func SetCheckpointHook(ix *Index, hook func()) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.ckptHook = hook
}

// CheckpointRunning reports whether a background checkpoint is running.
func CheckpointRunning(ix *Index) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.mu.ckptRunning
}

// FileNoSync reports whether the index file was opened without fsync.
func FileNoSync(ix *Index) bool { return ix.db.NoSync }

// The Corrupt functions damage an index behind its back, for tests of Check.
// They change published nodes in place: no query or checkpoint may run.

// CorruptReduction caches a wrong reduction in the root of view's tree.
func CorruptReduction(ix *Index, view string, wrong []byte) {
	ix.snap.Load().roots[ix.byName[view]].red.Store(&wrong)
}

// CorruptMinExp moves the earliest expiration kept in the root of view's
// tree one second later.
func CorruptMinExp(ix *Index, view string) {
	ix.snap.Load().roots[ix.byName[view]].minExp++
}

// CorruptLiveCount adds one to the live row count cached in the root of
// view's tree; it reports whether there was one.
func CorruptLiveCount(ix *Index, view string) bool {
	lc := ix.snap.Load().roots[ix.byName[view]].live.Load()
	if lc == nil {
		return false
	}
	lc.count++
	return true
}

// CorruptNeverReduction caches a wrong reduction of the rows that never
// expire in the root of view's tree; it reports whether there was one.
func CorruptNeverReduction(ix *Index, view string, wrong []byte) bool {
	nc := ix.snap.Load().roots[ix.byName[view]].never.Load()
	if nc == nil {
		return false
	}
	nc.red = wrong
	return true
}

// CorruptNeverCount adds one to the number of rows that never expire cached
// in the root of view's tree; it reports whether there was one.
func CorruptNeverCount(ix *Index, view string) bool {
	nc := ix.snap.Load().roots[ix.byName[view]].never.Load()
	if nc == nil {
		return false
	}
	nc.count++
	return true
}

// CorruptExpiryRow gives the first row of view's expiry tree the value 999.
func CorruptExpiryRow(ix *Index, view string) {
	n := ix.snap.Load().expRoots[ix.byName[view]]
	for !n.leaf() {
		n = n.children[0]
	}
	r := n.items[0]
	key, _, id := r.fields()
	n.items[0] = appendRow(nil, encodeExp(r.exp()), id, r.ord(), key, []byte("999"), r.exp())
}

// CorruptCount adds one to the row count of the root of view's tree.
func CorruptCount(ix *Index, view string) {
	ix.snap.Load().roots[ix.byName[view]].count++
}

// CorruptOrder swaps the first two rows of the first leaf of view's tree.
func CorruptOrder(ix *Index, view string) {
	n := ix.snap.Load().roots[ix.byName[view]]
	for !n.leaf() {
		n = n.children[0]
	}
	n.items[0], n.items[1] = n.items[1], n.items[0]
}

// CorruptBackIndex deletes the back-index entry of document id.
func CorruptBackIndex(ix *Index, id string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	delete(ix.mu.back, id)
}

// CorruptBackIndexAdd gives document id a back-index entry listing a row of
// view (key JSON, value 1) that no tree holds.
func CorruptBackIndexAdd(ix *Index, id, view string, key []byte) {
	enc, err := EncodeKey(key)
	if err != nil {
		panic(err)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.mu.back[id] = appendEntry(nil, ix.byName[view], appendRow(nil, enc, id, 0, key, []byte("1"), 0))
}

// CorruptFeedUUID changes the feed UUID in memory only.
func CorruptFeedUUID(ix *Index, u uint64) { ix.feedUUID.Store(u) }

// CorruptFileLog appends to the file's log a record of document id with one
// row of view (key JSON, value 1), which memory does not have.
func CorruptFileLog(ix *Index, id, view string, key []byte) error {
	enc, err := EncodeKey(key)
	if err != nil {
		return err
	}
	rows := appendEntry(nil, ix.byName[view], appendRow(nil, enc, id, 0, key, []byte("1"), 0))
	rec := appendBytes(appendBytes(nil, []byte(id)), rows)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLog).Put(binary.BigEndian.AppendUint64(nil, ix.mu.logNext), rec)
	})
}

// CorruptFileSeqs overwrites the file's sequence vector with seq everywhere.
func CorruptFileSeqs(ix *Index, seq uint64) error {
	seqs := make([]uint64, len(ix.snap.Load().seqs))
	for i := range seqs {
		seqs[i] = seq
	}
	return ix.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySeqs, encodeSeqs(seqs))
	})
}

// CopyFile writes a consistent copy of the index file to path, as a crash
// would leave the file at this moment (every committed transaction, nothing
// else).
func CopyFile(ix *Index, path string) error {
	return ix.db.View(func(tx *bolt.Tx) error { return tx.CopyFile(path, 0o600) })
}

// suffixLeaf returns the first leaf of view's tree that caches reductions
// by expiration with the first of them checked (its two earliest
// expirations differ), or nil.
func suffixLeaf(ix *Index, view string) *expSuffix {
	var found *expSuffix
	_ = walkLeaves(ix.snap.Load().roots[ix.byName[view]], func(n *node) error {
		s := n.suffix.Load()
		if found == nil && s != nil && s.hasRed && s.len() > 0 && (s.len() == 1 || s.exp(0) != s.exp(1)) {
			found = s
		}
		return nil
	})
	return found
}

// CorruptSuffixReduction caches a wrong reduction of the rows left once the
// earliest expiring row is gone, in the first leaf of view's tree that
// caches reductions by expiration; it reports whether there was one.
func CorruptSuffixReduction(ix *Index, view string, wrong []byte) bool {
	s := suffixLeaf(ix, view)
	if s == nil {
		return false
	}
	shift := int64(len(wrong)) - s.end(1)
	s.vals = append(append([]byte(nil), wrong...), s.vals[s.end(1):]...)
	for k := 1; k <= s.len(); k++ {
		s.ent[2*k-1] += shift
	}
	return true
}

// CorruptSuffixExp moves the earliest expiration cached by expiration in
// the first leaf of view's tree that caches reductions by expiration one
// second earlier; it reports whether there was one.
func CorruptSuffixExp(ix *Index, view string) bool {
	s := suffixLeaf(ix, view)
	if s == nil {
		return false
	}
	s.ent[0]--
	return true
}

// PageCount returns the number of pages in a paged index's file.
func PageCount(ix *Index) int {
	n := 0
	_ = ix.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketPages).Stats().KeyN
		return nil
	})
	return n
}

// FileSize returns the size of the index's file in bytes.
func FileSize(t testing.TB, ix *Index) int64 {
	t.Helper()
	fi, err := os.Stat(ix.db.Path())
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// DeleteLeafPage deletes the page of the first leaf of view's tree from a
// paged index's file and forgets the cached rows of every page.
func DeleteLeafPage(ix *Index, view string) error {
	n := ix.snap.Load().roots[ix.byName[view]]
	for !n.leaf() {
		n = n.children[0]
	}
	ix.ps.cache.dropOwner(ix.ps.owner)
	return ix.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPages).Delete(pageKeyBytes(n.page))
	})
}

// WithPagedLeafRows returns cfg with the most rows of a paged index's
// leaves lowered to n, so that tests reach deep trees with few rows. Use the
// same for every Open of a file.
func WithPagedLeafRows(cfg Config, n int) Config {
	cfg.leafRows = n
	return cfg
}

// TreeDepth returns the number of levels of view's tree.
func TreeDepth(ix *Index, view string) int {
	d := 1
	for n := ix.snap.Load().roots[ix.byName[view]]; !n.leaf(); n = n.children[0] {
		d++
	}
	return d
}

// PagedDirty reports whether a paged index holds changes its file does not.
func PagedDirty(ix *Index) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.ps != nil && ix.ps.isDirty()
}

// LeafCount returns the number of leaves of view's tree.
func LeafCount(ix *Index, view string) int {
	n := 0
	_ = walkLeaves(ix.snap.Load().roots[ix.byName[view]], func(*node) error {
		n++
		return nil
	})
	return n
}

// DirtyBytes returns the estimated heap of a paged index's dirty leaves.
func DirtyBytes(ix *Index) int64 {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.ps.dirty.bytes
}

// CachedReductions returns how many nodes of view's tree hold a cached
// reduction (after Open: one their parent's page, or the roots, stored).
func CachedReductions(ix *Index, view string) int {
	n := 0
	var walk func(*node)
	walk = func(x *node) {
		if x.red.Load() != nil {
			n++
		}
		for _, c := range x.children {
			walk(c)
		}
	}
	walk(ix.snap.Load().roots[ix.byName[view]])
	return n
}

// FlipLeafPageByte changes the last byte of the page of the first leaf of
// view's tree in a paged index's file and forgets the cached rows of every
// page.
func FlipLeafPageByte(ix *Index, view string) error {
	n := ix.snap.Load().roots[ix.byName[view]]
	for !n.leaf() {
		n = n.children[0]
	}
	ix.ps.cache.dropOwner(ix.ps.owner)
	return ix.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPages)
		p := bytes.Clone(b.Get(pageKeyBytes(n.page)))
		p[len(p)-1] ^= 0x20
		return b.Put(pageKeyBytes(n.page), p)
	})
}

// FileUsed returns the bytes of the index's file that bbolt has put pages
// in (its high-water mark; the file itself grows by doubling).
func FileUsed(t testing.TB, ix *Index) int64 {
	t.Helper()
	var n int64
	if err := ix.db.View(func(tx *bolt.Tx) error {
		n = tx.Size()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// SetMapReleaseLimit makes ix release its file's mapped pages once its
// reads through them reach n bytes (see mapRelease). Call it before ix is
// shared.
func SetMapReleaseLimit(ix *Index, n int64) { ix.mm.limit = n }

// MapReleases returns how many releases of ix's mapped pages succeeded,
// and the last one's failure.
func MapReleases(ix *Index) (int64, error) { return ix.mm.runs.Load(), ix.mm.lastErr() }

// ReleaseMapped releases ix's mapped pages now.
func ReleaseMapped(ix *Index) { ix.mm.release() }

// SetWriteBackTxBytes sets the most page bytes a paged index's write-back
// puts in one transaction (0: the default).
func SetWriteBackTxBytes(ix *Index, n int64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.ps.txBytes = n
}

// WriteBackPageTxs returns the number of transactions the paged index's
// write-backs committed before their final ones.
func WriteBackPageTxs(ix *Index) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.ps.pageTxs
}

// SetAfterPageTx sets a function called (under the index's lock, outside
// any transaction) after each transaction of only pages a write-back
// (or deletion of pages freed earlier) commits: what the file holds then is
// what a crash there leaves. An error
// fails the write-back there.
func SetAfterPageTx(ix *Index, f func() error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.ps.afterPageTx = f
}

// OrphanPages returns the number of pages of a paged index's file at or
// above its stored next page id (left by a write-back a crash ended).
func OrphanPages(ix *Index) (int, error) {
	return orphanPages(ix.db)
}

// FileOrphanPages is OrphanPages of the paged index file at path, not open.
func FileOrphanPages(path string) (int, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Minute})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	return orphanPages(db)
}

func orphanPages(db *bolt.DB) (int, error) {
	n := 0
	err := db.View(func(tx *bolt.Tx) error {
		next := tx.Bucket(bucketMeta).Get(keyNextPage)
		c := tx.Bucket(bucketPages).Cursor()
		for k, _ := c.Seek(next); k != nil; k, _ = c.Next() {
			n++
		}
		return nil
	})
	return n, err
}

// WriteBackBackTxs returns the number of transactions before their final
// ones in which the paged index's write-backs changed the back index.
func WriteBackBackTxs(ix *Index) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.ps.backTxs
}

// HookBackTxs is WriteBackBackTxs for a function SetAfterPageTx set,
// which runs under the index's lock.
func HookBackTxs(ix *Index) int { return ix.ps.backTxs }

// FileBackUndo returns the number of back-index entries the paged index
// file at path, not open, holds saved in its undo bucket (left by a
// write-back that did not finish).
func FileBackUndo(path string) (int, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Minute})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	n := 0
	err = db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketBackUndo).Stats().KeyN
		return nil
	})
	return n, err
}

// SetBackInFinalTx makes a paged index's write-backs put the back index's
// changes in their final transactions (as before they were bounded), or
// not (the default).
func SetBackInFinalTx(ix *Index, final bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.ps.backFinal = final
}
