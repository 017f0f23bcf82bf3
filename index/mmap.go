package index

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// bbolt reads its file through a shared read-only memory map, and every
// page of it a reader or a writer's transaction has touched stays in the
// process's resident memory (file-backed: the kernel's page cache mapped
// into the process, counted in its RSS) until the kernel reclaims it. A
// paged index reads its leaves and back index through that map, so over a
// view build or a stream of queries the whole file came to count as the
// server's memory, beside the page cache of decoded leaves that is meant to
// bound it (BENCHMARKS.md, "Resident memory at scale"). mapRelease gives
// those pages back: madvise(MADV_DONTNEED) over the mapped range drops the
// process's mappings of them (they stay in the kernel's page cache; the
// next read maps them again with a minor fault). bbolt writes with pwrite,
// never through the map, so nothing is lost, and it remaps the file only
// under its mmap lock, which a read transaction holds shared: the range
// is released under one, and readers in other transactions meanwhile
// just fault their pages back in.
//
// A read fault on the map brings in more than the page read: Linux maps
// the pages around it that the page cache holds, up to fault_around_bytes
// (64 KiB by default), whatever the map's madvise. So a lookup that lands
// on a page nothing near was read from costs the process 64 KiB of
// resident memory, not 4: a view build's back-index lookups, sorted but
// sparse in a large back index, each mapped a window of their own, and
// when they were counted as a page each the map held up to 16 times the
// count (a 1,000,000-row build's benchmark: 186 of its 208 MiB of
// file-backed memory at its peak were those lookups' windows, with 32 MiB
// counted). The reads whose address is known are counted as the windows
// they touch, each once until the release (see noteMappedIn).

// mapRelease releases an index file's mapped pages after its
// transactions have read about limit bytes through them, and when told to
// (after a write-back or checkpoint, whose transaction touched pages of its
// own).
type mapRelease struct {
	db    *bolt.DB
	limit int64 // bytes read that make a release due

	read atomic.Int64               // bytes read through the map since the last release
	seen atomic.Pointer[mapWindows] // the windows read since the last release; nil: none
	runs atomic.Int64               // releases done
	mu   sync.Mutex                 // one release at a time; guards err
	err  error                      // the last release's failure, nil if it succeeded
}

// faultAround is the bytes a read fault on the map brings in around the
// page read: Linux's fault_around_bytes, 64 KiB unless its debugfs knob
// changed it, aligned to itself.
const faultAround = 64 << 10

// mapWindows marks the faultAround windows of a map read through since the
// last release.
type mapWindows struct {
	base, end uintptr // the map's address, and the end of the file's bytes mapped there
	bits      []atomic.Uint64
}

// mapPage is what one lookup in the file counts as read through the map
// beside the bytes it returns: the leaf page it lands on (bbolt's pages are
// the OS page, 4 KiB here).
const mapPage = 4 << 10

// minMapRelease is the least read between two releases: below it a
// release would cost more faults than the memory it frees is worth.
const minMapRelease = 4 << 20

// maxMapRead is the most read between two releases however large the page
// cache: the reads counted are the pages a lookup lands on, and bbolt's
// own (branch pages, a commit's) go uncounted, so the map held more than
// the count. A 5,000,000-document build with a 256 MiB cache, releasing
// after 256 MiB counted, held 410-450 MiB of the file for seconds at a
// time (BENCHMARKS.md, "Large quotas: the memory limit, bloom filters");
// after 64 MiB counted, 100-137 MiB ("(issue 19) the build's peak").
const maxMapRead = 32 << 20

func newMapRelease(db *bolt.DB, limit int64) *mapRelease {
	return &mapRelease{db: db, limit: max(limit, minMapRelease)}
}

// noteRead counts n bytes read through the map, for a later maybe.
func (m *mapRelease) noteRead(n int) {
	if m != nil {
		m.read.Add(int64(n))
	}
}

// noteReadIn counts n bytes read through the map by tx, a transaction of
// the calling goroutine, and releases the mapped pages in it if the reads
// reached the limit: a long transaction (a write-back, a large Apply's
// back-index lookups) does not wait for its end.
func (m *mapRelease) noteReadIn(tx *bolt.Tx, n int) {
	if m != nil && m.read.Add(int64(n)) >= m.limit {
		m.releaseIn(tx)
	}
}

// noteMappedIn counts the read of p, bytes of tx, a transaction of the
// calling goroutine, as the faultAround windows of the map it touches that
// no read touched since the last release, and releases the mapped pages in
// tx if the count reached the limit. It returns the bytes counted. p
// outside the map (bytes bbolt holds in its heap, in a write transaction)
// counts nothing.
func (m *mapRelease) noteMappedIn(tx *bolt.Tx, p []byte) int64 {
	if m == nil || len(p) == 0 {
		return 0
	}
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	end := addr + uintptr(len(p))
	w := m.seen.Load()
	if w == nil || addr < w.base || end > w.end {
		if w = m.windows(tx, addr, end); w == nil {
			return 0
		}
	}
	var n int64
	first := w.base / faultAround
	for i := addr/faultAround - first; i <= (end-1)/faultAround-first; i++ {
		bit := uint64(1) << (i % 64)
		if w.bits[i/64].Or(bit)&bit == 0 {
			n += faultAround
		}
	}
	if n > 0 && m.read.Add(n) >= m.limit {
		m.releaseIn(tx)
	}
	return n
}

// windows returns the windows to mark for the bytes [addr, end) read in tx,
// new ones if the map moved or the file grew since the last; nil if they
// are not in the map.
func (m *mapRelease) windows(tx *bolt.Tx, addr, end uintptr) *mapWindows {
	base := m.db.Info().Data // tx keeps the map where it is (see releaseIn)
	mapEnd := base + uintptr(tx.Size())
	if addr < base || end > mapEnd {
		return nil
	}
	old := m.seen.Load()
	w := &mapWindows{base: base, end: mapEnd}
	w.bits = make([]atomic.Uint64, ((mapEnd-1)/faultAround-base/faultAround)/64+1)
	if old != nil && old.base == base { // the file grew: the same map, or one as fresh
		for i := range min(len(old.bits), len(w.bits)) {
			w.bits[i].Store(old.bits[i].Load())
		}
	}
	if !m.seen.CompareAndSwap(old, w) {
		// Another reader replaced it: mark those, or these if they
		// do not cover the read (a few windows counted twice).
		if cur := m.seen.Load(); cur != nil && addr >= cur.base && end <= cur.end {
			return cur
		}
	}
	return w
}

// maybe releases the mapped pages if the reads since the last release
// reached the limit. It must not be called inside a transaction of the
// calling goroutine (bbolt's read and write transactions must not nest).
func (m *mapRelease) maybe() {
	if m != nil && m.read.Load() >= m.limit {
		m.release()
	}
}

// release gives the file's mapped pages back to the kernel (see above), in
// a read transaction of its own: it must not be called inside a
// transaction of the calling goroutine.
func (m *mapRelease) release() {
	if m == nil {
		return
	}
	if err := m.db.View(func(tx *bolt.Tx) error { m.releaseIn(tx); return nil }); err != nil {
		m.mu.Lock()
		m.err = fmt.Errorf("index: release the file's mapped pages: %w", err)
		m.mu.Unlock()
	}
}

// releaseIn gives the mapped pages back within tx, a transaction of the
// calling goroutine, read or write: while it is open the map cannot move
// (bbolt remaps under its mmap lock, which a read transaction holds
// shared, and a write transaction only in its own commit), and the map
// covers at least the transaction's size (bbolt maps the file whole). A
// failure loses nothing (the pages just stay): it is kept for lastErr, not
// returned to the Apply or query that happened to trigger the release.
func (m *mapRelease) releaseIn(tx *bolt.Tx) {
	if m == nil || !m.mu.TryLock() {
		return // another goroutine is releasing the same pages
	}
	defer m.mu.Unlock()
	m.read.Store(0)
	m.seen.Store(nil)
	if m.err = dontNeed(m.db.Info().Data, tx.Size()); m.err != nil {
		m.err = fmt.Errorf("index: release the file's mapped pages: %w", m.err)
		return
	}
	m.runs.Add(1)
}

// lastErr returns the last release's failure (nil: it succeeded, or none
// ran).
func (m *mapRelease) lastErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}
