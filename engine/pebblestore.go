package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A couchbase bucket's pebble store is one pebble database (a folder of
// sstables, a write-ahead log and a manifest) whose keys carry a one-byte
// prefix naming what they hold, so that each kind is one contiguous, ordered
// range:
//
//	'd' be32(cid) key           → encoded Document (key order: collection, then key)
//	'e' be64(exp) be32(cid) key → nothing (expiration order)
//	'w' be64(n)                 → the partitions' high sequence numbers that
//	                              batch n set: be16(partition) be64(seqno) pairs
//	'v' be16(partition)         → be64 high sequence number (the old format:
//	                              read at open, and rewritten as a 'w' record)
//	'm' name                    → bucket metadata (the names of bktMeta's keys)
//	's' key                     → system document (design documents…)
const (
	pfxDoc    = 'd'
	pfxExp    = 'e'
	pfxSeq    = 'v'
	pfxSeqLog = 'w'
	pfxMeta   = 'm'
	pfxSys    = 's'
)

// The sequence log. A commit writes the high sequence numbers of the
// partitions it touched as one 'w' record, keyed by the commit's number, in
// the commit's own pebble batch (so a crash keeps both or neither): one
// memtable insert a commit, where a key per touched partition was about
// half of a commit's inserts at small values (1,000 keys over 1,024
// partitions: ~77 sequence keys a batch of ~80 sets). The partitions' numbers
// are the records read in order, a later one's pair overriding an earlier
// one's (as a later commit's overwrite did). Every seqCheckpointEvery
// records, a commit writes every partition's number instead of its own (a
// checkpoint) and deletes the records before it: an open reads at most that
// many records, and the table properties warm-up estimates its document
// count from (estimateKeys) count at most that many live records beside the
// documents. With 1,024 partitions a checkpoint is 10 KiB: a third of a
// kilobyte and one deletion a commit, against the ~77 keys it replaces.
const (
	seqPairSize        = 10 // be16 partition, be64 seqno
	seqCheckpointEvery = 32
)

// Memory a pebble store may hold outside the Go heap's control, per bucket:
// its block cache (sstable blocks read, shared by every reader) and its
// memtables (writes not yet flushed to an sstable; at most
// pebbleMemTableStop of them before writes wait for a flush). Both scale
// with the bucket's quota (pebbleSizesFor), between these bounds: a 100 MiB
// bucket of a thousand keys should not keep 32 MiB of memtables resident.
const (
	pebbleCacheMin     = 8 << 20
	pebbleCacheMax     = 32 << 20
	pebbleMemTableMin  = 1 << 20
	pebbleMemTableMax  = 16 << 20
	pebbleMemTableStop = 2
)

// pebbleSizes are a pebble store's block cache and memtable sizes.
type pebbleSizes struct{ cache, memTable int64 }

// budget is the most a store of these sizes holds in its block cache and
// memtables (Bucket.StorageMemBudget).
func (z pebbleSizes) budget() int64 { return z.cache + z.memTable*pebbleMemTableStop }

// pebbleSizesFor sizes a store for a bucket of quota bytes: the block cache
// a sixteenth of the quota and each memtable pebbleMemTableFor, within the
// bounds above; quota 0 (unknown) gets the largest. Each memtable's buffer
// becomes resident as it fills, and pebble keeps one spare, so a small
// bucket under a stream of overwrites holds its two largest memtables: a
// bucket of the default 100 MiB quota 1.6 MiB of them (pebbleMemTableFor;
// 8 MiB with memtables of a thirty-second, at least 4 MiB, were a third of
// the memcached benchmark's resident memory; BENCHMARKS.md).
func pebbleSizesFor(quota int64) pebbleSizes {
	if quota <= 0 {
		return pebbleSizes{cache: pebbleCacheMax, memTable: pebbleMemTableMax}
	}
	return pebbleSizes{
		cache:    min(max(quota/16, pebbleCacheMin), pebbleCacheMax),
		memTable: pebbleMemTableFor(quota),
	}
}

// Below pebbleSmallQuota a bucket's memtables are a hundred-and-twenty-
// eighth of its quota, at least pebbleSmallMemTableMin: the default 100 MiB
// bucket's two resident memtables 1.6 MB where a sixty-fourth made them 3.2
// (BENCHMARKS.md, "Resident memory during the memcached benchmark"). A
// small bucket's flushes are small too (a thousand keys overwritten make an
// sstable of a thousand entries), so flushing twice as often costs little.
const (
	pebbleSmallQuota       = 256 << 20
	pebbleSmallMemTableMin = 512 << 10
)

// pebbleMemTableFor returns the memtable size of a bucket of quota bytes
// (more than 0): a sixty-fourth of it, or a hundred-and-twenty-eighth below
// pebbleSmallQuota, within the bounds.
func pebbleMemTableFor(quota int64) int64 {
	if quota < pebbleSmallQuota {
		return max(quota/128, pebbleSmallMemTableMin)
	}
	return min(max(quota/64, pebbleMemTableMin), pebbleMemTableMax)
}

// pebbleDir is the folder, in a bucket's folder, of its pebble store.
const pebbleDir = "pebble"

// A full disk. pebble cannot fail one commit and go on: a write to its
// write-ahead log that fails is fatal to the database (it calls
// Logger.Fatalf). So a pebble store keeps a reserve, as CockroachDB keeps
// its ballast: a file of zeros in the store's folder, removed the moment
// any write of the store meets ENOSPC, so that the write is retried into the
// space it frees and succeeds. From then on the store refuses writes itself
// (an error wrapping ENOSPC, before pebble sees them) until its probe can
// write the reserve again: the engine's contract for a full disk (writes
// refused, reads go on, writes resume once space is freed, without a
// restart).
const (
	pebbleReserveFile = "mayfly.reserve"
	pebbleReserveMax  = 16 << 20 // at most this much of the disk is held back
	pebbleReserveDiv  = 16       // and at most 1/16th of the space free at open
	pebbleReserveMin  = 64 << 10 // below this there is no reserve to hold
)

// errReserveGone is what a pebble store answers while it waits for space.
var errReserveGone = fmt.Errorf("%w: the store's reserve is spent; free space on the disk", syscall.ENOSPC)

// pebbleStorage keeps a couchbase bucket in one pebble database. A commit
// is one pebble batch (atomic: all of it or nothing is in the write-ahead
// log), fsynced unless Options.NoSync; a purge is a deletion in that batch,
// as cheap as a write.
type pebbleStorage struct {
	db    *pebble.DB
	dir   string
	sync  *pebble.WriteOptions
	log   *slog.Logger
	sizes pebbleSizes // its block cache and memtable sizes

	reserveSize int64       // bytes of the reserve file, 0 for none
	full        atomic.Bool // the reserve was spent: writes are refused

	// keysRead counts the document keys read by keys scans (tests check
	// that a scan reads what its caller pulls, not the collection).
	keysRead atomic.Int64

	// life guards db against use after close: pebble panics where bbolt
	// returns an error, and a late read (a background fetch racing a
	// bucket's drop) must get an error. Every operation holds it for
	// reading; close holds it for writing.
	life struct {
		sync.RWMutex
		closed bool
	}

	// mu serialises writes: a commit reads the stored CAS to keep it
	// rising, and holdWrites holds it to keep commits waiting. Taken after
	// life.
	mu struct {
		sync.Mutex
		cas uint64 // highest CAS committed (what 'm' "cas" holds)
		seq seqLog // the sequence log's state
		// batch is the last commit's pebble batch, reset, for the next
		// one (nil after a failed commit): a batch from NewBatch grows its
		// buffer from nothing whenever the collector has emptied pebble's
		// pool, about a record's bytes allocated per write.
		batch    *pebble.Batch
		batchCap int    // the bytes batch's buffer holds (0: none kept)
		batchLen int    // the last commit's batch length (tests: batchBytes bounds it)
		key      []byte // a commit's scratch document key
		enc      []byte // a commit's scratch document encoding
		// supLast, supPrev and sup are a commit's scratch space for
		// supersededLocked.
		supLast []int32
		supPrev []int32
		sup     []bool
	}
}

// seqLog is what a pebble store knows of its sequence log ('w' records):
// each partition's committed high sequence number and the numbers of the
// first record kept and of the next one. It also holds a commit's scratch space.
type seqLog struct {
	seqs   map[uint16]uint64
	first  uint64 // the oldest 'w' record kept (next when there is none)
	next   uint64 // the number of the next commit's record
	legacy int    // 'v' keys of the old format (0 once migrated)
	every  uint64 // seqCheckpointEvery (tests change it)

	batch   []uint64 // a commit's high seqno per partition, 0 for untouched
	touched []uint16 // the partitions a commit touched
	buf     []byte   // a commit's 'w' record
}

func seqLogKey(n uint64) []byte { return binary.BigEndian.AppendUint64([]byte{pfxSeqLog}, n) }

// readSeqLog reads the store's sequence numbers, the old format's 'v' keys
// and the 'w' records through one iterator (one consistent view).
// The caller holds life (or owns the store alone).
func (s *pebbleStorage) readSeqLog() (seqLog, error) {
	l := seqLog{seqs: make(map[uint16]uint64), every: seqCheckpointEvery}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxSeq}, UpperBound: prefixEnd(pfxSeqLog)})
	if err != nil {
		return l, err
	}
	first := true
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return l, err
		}
		switch {
		case k[0] == pfxSeq && len(k) == 3 && len(v) == 8:
			l.seqs[binary.BigEndian.Uint16(k[1:])] = binary.BigEndian.Uint64(v)
			l.legacy++
		case k[0] == pfxSeqLog:
			if len(k) != 9 || len(v)%seqPairSize != 0 {
				it.Close()
				return l, fmt.Errorf("engine: corrupt sequence record %x (%d bytes)", k, len(v))
			}
			n := binary.BigEndian.Uint64(k[1:])
			if first {
				l.first, first = n, false
			}
			l.next = n + 1
			for ; len(v) > 0; v = v[seqPairSize:] {
				l.seqs[binary.BigEndian.Uint16(v)] = binary.BigEndian.Uint64(v[2:])
			}
		}
	}
	if err := it.Close(); err != nil {
		return l, err
	}
	if first {
		l.first = l.next
	}
	return l, nil
}

// migrateSeqs rewrites the old format's 'v' keys as a 'w' checkpoint, in
// one synced batch: a store written before the sequence log opens with its
// sequence numbers and writes only 'w' records from then on.
func (s *pebbleStorage) migrateSeqs() error {
	l := &s.mu.seq
	if l.legacy == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{pfxSeq}, prefixEnd(pfxSeq), nil); err != nil {
		return err
	}
	buf := l.appendAll(nil)
	n := l.next
	if err := b.Set(seqLogKey(n), buf, nil); err != nil {
		return err
	}
	for m := l.first; m < n; m++ {
		if err := b.Delete(seqLogKey(m), nil); err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return err
	}
	l.first, l.next, l.legacy = n, n+1, 0
	return nil
}

// appendAll appends every partition's pair to buf.
func (l *seqLog) appendAll(buf []byte) []byte {
	for p, seq := range l.seqs {
		buf = binary.BigEndian.AppendUint16(buf, p)
		buf = binary.BigEndian.AppendUint64(buf, seq)
	}
	return buf
}

// openPebbleStorageFor opens the store in dir sized for a bucket of quota
// bytes (pebbleSizesFor).
func openPebbleStorageFor(dir string, o *Options, quota int64) (*pebbleStorage, error) {
	return openPebbleStorageSized(nil, dir, o, pebbleSizesFor(quota))
}

// pebbleFilterBits is the bits a key of each table's bloom filter: about 1 %
// false positives. Without filters a get looks in every level whose tables
// span its key, reading that table's index and data blocks to find it
// absent. After a 5,000,000-document load (5.1 GB in 521 tables: L4 63 MB,
// L5 545 MB, L6 4.5 GB) a cold get of an ejected value missed the 32 MiB
// block cache 1.46-1.55 times; with filters 1.12-1.20 (BENCHMARKS.md,
// "Large quotas: the memory limit, bloom filters"). A filter block is a
// table's keys at these bits (6 MB for 5,000,000 documents), read through
// the block cache like the index blocks; a get of a key the store does not
// have (a fullEviction miss) then reads no data block either. A store
// written before has its tables' filters as compactions rewrite them.
const pebbleFilterBits = 10

// pebbleOptions are the options a store opens with: the block cache and
// memtable sizes of z, a bloom filter in every level's tables, and log
// through log.
func pebbleOptions(fs vfs.FS, cache *pebble.Cache, z pebbleSizes, log *slog.Logger) *pebble.Options {
	o := &pebble.Options{
		FS:                          fs,
		Cache:                       cache,
		MemTableSize:                uint64(z.memTable),
		MemTableStopWritesThreshold: pebbleMemTableStop,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      pebbleLogger{log},
	}
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(pebbleFilterBits)
	}
	return o
}

// openPebbleStorageSized opens the store in dir, with cache and memtables of
// sizes z, on the file system fs; nil is the operating system's, with a
// reserve for a full disk (tests pass a memory file system that can
// simulate a crash, and keep no reserve).
func openPebbleStorageSized(fs vfs.FS, dir string, o *Options, z pebbleSizes) (*pebbleStorage, error) {
	s := &pebbleStorage{dir: dir, sync: pebble.Sync, log: o.Logger, sizes: z}
	if o.NoSync {
		s.sync = pebble.NoSync
	}
	if fs == nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("engine: open %s: %w", dir, err)
		}
		if err := s.keepReserve(); err != nil {
			// Too little space for a reserve: the store opens without one (a
			// full disk is then fatal), as refusing to open would lose reads.
			s.log.Warn("pebble store opens without a reserve for a full disk", "dir", dir, "err", err)
		}
		fs = vfs.OnDiskFull(vfs.Default, s.spendReserve)
	}
	cache := pebble.NewCache(z.cache)
	defer cache.Unref() // the database holds its own reference
	db, err := pebble.Open(dir, pebbleOptions(fs, cache, z, o.Logger))
	if err != nil {
		return nil, fmt.Errorf("engine: open %s: %w", dir, err)
	}
	s.db = db
	v, err := s.get(metaKey(metaCAS))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("engine: open %s: %w", dir, err)
	}
	if len(v) == 8 {
		s.mu.cas = binary.BigEndian.Uint64(v)
	}
	if s.mu.seq, err = s.readSeqLog(); err == nil {
		err = s.migrateSeqs()
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("engine: open %s: sequence numbers: %w", dir, err)
	}
	return s, nil
}

// keepReserve makes sure the reserve file is there, whole: one left by an
// earlier open is kept at its size; a new one is sized from the space free.
func (s *pebbleStorage) keepReserve() error {
	path := filepath.Join(s.dir, pebbleReserveFile)
	if s.reserveSize == 0 {
		if fi, err := os.Stat(path); err == nil && fi.Size() >= pebbleReserveMin {
			s.reserveSize = fi.Size()
			return nil
		}
		du, err := vfs.Default.GetDiskUsage(s.dir)
		if err != nil {
			return err
		}
		size := min(int64(pebbleReserveMax), int64(du.AvailBytes/pebbleReserveDiv))
		if size < pebbleReserveMin {
			return fmt.Errorf("%w: %d bytes free", syscall.ENOSPC, du.AvailBytes)
		}
		s.reserveSize = size
	}
	err := writeZeros(path, s.reserveSize)
	if err != nil {
		os.Remove(path)
	}
	return err
}

// writeZeros makes path a file of size bytes whose space is taken (not a
// sparse one): allocated at once where the file system can (fallocate),
// else written with zeros.
func writeZeros(path string, size int64) (err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if err := allocate(f, size); err == nil {
		return nil
	} else if errors.Is(err, syscall.ENOSPC) {
		return err
	}
	buf := make([]byte, min(size, 1<<20))
	for left := size; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			return err
		}
	}
	return f.Sync()
}

// spendReserve is called by pebble's file system when a write meets ENOSPC,
// with every other write waiting: it removes the reserve (the write is then
// retried once) and makes the store refuse writes until reclaim.
func (s *pebbleStorage) spendReserve() {
	s.full.Store(true)
	if err := os.Remove(filepath.Join(s.dir, pebbleReserveFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Error("pebble store: the disk is full and its reserve cannot be removed", "dir", s.dir, "err", err)
		return
	}
	s.log.Error("pebble store: the disk is full; its reserve is spent, and writes are refused until space is freed", "dir", s.dir)
}

// reclaim writes the reserve again, after it was spent, so that writes can
// resume; it fails (with ENOSPC) while the disk is still too full.
// REQUIRES: s.mu.
func (s *pebbleStorage) reclaimLocked() error {
	if !s.full.Load() {
		return nil
	}
	if err := s.keepReserve(); err != nil {
		return fmt.Errorf("%w (%w)", errReserveGone, err)
	}
	s.full.Store(false)
	s.log.Info("pebble store: space freed; its reserve is back and writes resume", "dir", s.dir)
	return nil
}

// pebbleLogger sends pebble's log lines to the engine's logger: its
// routine lines (flushes, compactions) at debug level, its errors as errors.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf is called by pebble on corruption it cannot go on from; pebble
// expects it not to return.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic(msg)
}

func (s *pebbleStorage) durable() bool { return true }

// enter starts an operation on the database: it fails with ErrClosed once
// the store is closed, else the caller calls the returned exit when done.
func (s *pebbleStorage) enter() (exit func(), err error) {
	s.life.RLock()
	if s.life.closed {
		s.life.RUnlock()
		return nil, ErrClosed
	}
	return s.life.RUnlock, nil
}

func pebbleDocKey(k docKey) []byte {
	return appendPebbleDocKey(make([]byte, 0, 5+len(k.key)), k)
}

// appendPebbleDocKey appends pebbleDocKey(k) to b.
func appendPebbleDocKey(b []byte, k docKey) []byte {
	b = append(b, pfxDoc)
	b = binary.BigEndian.AppendUint32(b, uint32(k.cid))
	return append(b, k.key...)
}

func pebbleExpKey(exp int64, k docKey) []byte {
	b := make([]byte, 13+len(k.key))
	b[0] = pfxExp
	binary.BigEndian.PutUint64(b[1:], uint64(exp))
	binary.BigEndian.PutUint32(b[9:], uint32(k.cid))
	copy(b[13:], k.key)
	return b
}

func metaKey(name []byte) []byte { return append([]byte{pfxMeta}, name...) }

func sysKey(key string) []byte { return append([]byte{pfxSys}, key...) }

// prefixEnd returns the first key after every key that starts with the
// one-byte prefix p.
func prefixEnd(p byte) []byte { return []byte{p + 1} }

// encode returns nil: commit encodes each document into a buffer it
// keeps, which pebble's batch copies, instead of the writer allocating
// the encoding for the batch to copy (the writer is the memcached port's
// event loop, the commit one goroutine: the same work either way).
func (s *pebbleStorage) encode(record) []byte { return nil }

// scratchMax is the largest document encoding a pebble store keeps its
// buffer for.
const scratchMax = 64 << 10

// batchKeptMax is the largest buffer the kept batch keeps (pebble's
// default is 1 MiB). At durability none the memcached benchmark's group
// commits held 277 sets of 100 bytes on average (~47 KB), and a good part
// of them passed 64 KiB: a kept buffer of 64 KiB at most was dropped by
// those and grown again from 1 KiB by doubling, 310 bytes allocated a
// set, a third of a set's garbage. 256 KiB keeps the usual commit's
// buffer; a larger one's, a backlog's, is left to the collector rather
// than held in the live heap (a batch whose memtable share passes half
// the memtable is a flushable batch, whose buffer pebble gives up itself).
const batchKeptMax = 256 << 10

// pebbleBatchHeader is the size of a pebble batch's header (Batch.Len of
// an empty batch).
const pebbleBatchHeader = 12

// batchBytes bounds the bytes commit's pebble batch takes for recs: a
// batch too small for them is replaced by one of this size before the
// first record, instead of growing by doubling (each step a new buffer and
// a copy: about twice the batch allocated, for every commit that passes
// the kept buffer).
//
// REQUIRES: s.mu held.
func (s *pebbleStorage) batchBytes(recs []record, sup []bool) int {
	// An operation: its kind, two uvarint lengths (pebble reserves five
	// bytes each while it writes one), the key and the value.
	const op = 1 + 2*binary.MaxVarintLen32
	n := pebbleBatchHeader + op + 1 + 4 + 8 // the CAS
	for i := range recs {
		r := &recs[i]
		if sup == nil || !sup[i] {
			n += op + 1 + 4 + len(r.key.key)
			if !r.purge {
				n += docRecordLen(r.doc)
			}
		}
		if r.oldExp != r.newExp() {
			n += 2 * (op + 13 + len(r.key.key)) // the expiry entries
		}
	}
	// The 'w' record: 10 bytes a touched partition, every partition at a
	// checkpoint, which also deletes the records before it.
	l := &s.mu.seq
	n += op + 9 + 10*len(recs)
	if l.next-l.first >= l.every {
		n += 10*len(l.seqs) + int(l.next-l.first)*(op+9)
	}
	return n
}

// supersededKeep is the most records supersededLocked keeps its scratch
// space for between commits: a bulk load's is left to the collector.
const supersededKeep = 8192

// supersededWalk is how many earlier records of a partition
// supersededLocked compares a record's key with, at most: past it a
// repeated key is committed twice, as before (a partition of many keys
// written in one batch; the default bucket's 1,024 partitions hold a few
// hot keys each).
const supersededWalk = 8

// supersededLocked reports, for each record of recs, whether a later record
// of recs writes its key again (nil when none does, as far as it looked:
// supersededWalk). A batch applies its operations in order, so the last
// record of a key alone decides what the key holds once the batch is
// committed, and a crash keeps all of a batch or none of it: the document
// operations of the others are left out of the batch, with no change to
// what is on disk after the commit. At durability none a backlog behind a
// slow fsync holds several versions of each hot key (in the memcached
// benchmark 29-38 % of the records committed; BENCHMARKS.md, "The
// flusher's superseded versions"); each one left out is a memtable insert,
// its bytes in the write-ahead log, and its share of the memtable's flush
// saved. Couchbase's flusher de-duplicates a key's queued versions the
// same way. Every record is still published (Bucket.applyCommitted): the
// change feed sees what it saw before.
//
// A key's records share its partition, so each record is compared with
// the earlier records of its partition only, newest first, through a chain
// of record numbers a partition (no hashing of keys).
//
// REQUIRES: s.mu held.
func (s *pebbleStorage) supersededLocked(recs []record) []bool {
	if len(recs) < 2 {
		return nil
	}
	// last[p] is 1 + the newest record of partition p seen so far (0:
	// none); prev[i] is the same for the partition's record before i.
	last, prev := s.mu.supLast, s.mu.supPrev[:0]
	var sup []bool
	for i := range recs {
		r := &recs[i]
		if int(r.part) >= len(last) {
			last = append(last, make([]int32, int(r.part)+1-len(last))...)
		}
		p := last[r.part]
		prev = append(prev, p)
		for range supersededWalk {
			if p == 0 {
				break
			}
			j := p - 1
			if recs[j].key == r.key {
				if sup == nil {
					sup = s.mu.sup[:0]
					if cap(sup) < len(recs) {
						sup = make([]bool, len(recs))
					}
					sup = sup[:len(recs)]
					clear(sup)
				}
				sup[j] = true // its own older records were marked at j
				break
			}
			p = prev[j]
		}
		last[r.part] = int32(i + 1)
	}
	for i := range recs {
		last[recs[i].part] = 0
	}
	s.mu.supLast = last
	if cap(prev) <= supersededKeep {
		s.mu.supPrev = prev
	}
	if sup != nil && cap(sup) <= supersededKeep {
		s.mu.sup = sup
	}
	return sup
}

func (s *pebbleStorage) commit(recs []record) error {
	exit, err := s.enter()
	if err != nil {
		return err
	}
	defer exit()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.full.Load() {
		return errReserveGone
	}
	b := s.mu.batch
	sup := s.supersededLocked(recs)
	if need := s.batchBytes(recs, sup); b == nil || s.mu.batchCap < need {
		if b != nil {
			b.Close()
		}
		b = s.db.NewBatchWithSize(need, pebble.WithMaxRetainedSizeBytes(batchKeptMax))
	}
	s.mu.batch, s.mu.batchCap = nil, 0
	ok := false
	defer func() {
		if ok {
			// What Reset keeps: the buffer, unless it passed
			// batchKeptMax or pebble took it (a flushable batch's,
			// emptied by its commit).
			kept := 0
			s.mu.batchLen = b.Len()
			if b.Len() > pebbleBatchHeader {
				if c := cap(b.Repr()); c <= batchKeptMax {
					kept = c
				}
			}
			b.Reset()
			s.mu.batch, s.mu.batchCap = b, kept
		} else {
			b.Close()
		}
	}()
	l := &s.mu.seq
	defer l.endBatch()
	var maxCAS uint64
	for i := range recs {
		r := &recs[i]
		// A purge removes an old tombstone (or a dropped collection's
		// document): its sequence number is not the partition's newest,
		// unless it is a void write's (countsSeq).
		if r.countsSeq() {
			l.note(r.part, r.seq)
		}
		maxCAS = max(maxCAS, r.cas)
		// A batch applies its operations in order: the later record of a
		// key wins, as the interface asks. One that a later record of the
		// batch writes again is left out (supersededLocked); its expiry
		// entries are not: the later record's replace them in order.
		if sup == nil || !sup[i] {
			s.mu.key = appendPebbleDocKey(s.mu.key[:0], r.key)
			if r.purge {
				err = b.Delete(s.mu.key, nil)
			} else {
				enc := r.enc
				if enc == nil {
					s.mu.enc = appendDocRecord(s.mu.enc[:0], r.doc)
					enc = s.mu.enc
				}
				err = b.Set(s.mu.key, enc, nil) // Set copies key and value
			}
			if err != nil {
				return err
			}
		}
		if newExp := r.newExp(); r.oldExp != newExp {
			if r.oldExp != 0 {
				if err := b.Delete(pebbleExpKey(r.oldExp, r.key), nil); err != nil {
					return err
				}
			}
			if newExp != 0 {
				if err := b.Set(pebbleExpKey(newExp, r.key), nil, nil); err != nil {
					return err
				}
			}
		}
	}
	if cap(s.mu.enc) > scratchMax {
		s.mu.enc = nil // a large document's buffer is left to the collector
	}
	checkpoint, err := l.write(b)
	if err != nil {
		return err
	}
	var v [8]byte
	// A sliding extension keeps its document's older CAS: the stored CAS
	// only ever rises.
	cas := s.mu.cas
	if maxCAS > cas {
		binary.BigEndian.PutUint64(v[:], maxCAS)
		if err := b.Set(metaKey(metaCAS), v[:], nil); err != nil {
			return err
		}
		cas = maxCAS
	}
	if err := b.Commit(s.sync); err != nil {
		return err
	}
	ok = true
	s.mu.cas = cas
	l.committed(checkpoint)
	return nil
}

// forgetSeqno writes a 'w' record setting part's number to 0: the latest
// record of a partition is its number when the log is read, and the
// partition, gone from the log's state, is left out of the next
// checkpoint (which deletes the records before it).
func (s *pebbleStorage) forgetSeqno(part uint16) error {
	return s.write(func(b *pebble.Batch) error {
		l := &s.mu.seq
		pair := binary.BigEndian.AppendUint16(nil, part)
		pair = binary.BigEndian.AppendUint64(pair, 0)
		if err := b.Set(seqLogKey(l.next), pair, nil); err != nil {
			return err
		}
		// Taken before the commit: should it fail, the next checkpoint
		// leaves the partition out all the same, and a number skipped
		// in the log is harmless (its deletion deletes nothing).
		l.next++
		delete(l.seqs, part)
		return nil
	}, true)
}

// note records that a commit writes seq to partition p (a record without
// a sequence number sets none).
func (l *seqLog) note(p uint16, seq uint64) {
	if seq == 0 {
		return
	}
	if int(p) >= len(l.batch) {
		l.batch = append(l.batch, make([]uint64, int(p)+1-len(l.batch))...)
	}
	if l.batch[p] == 0 {
		l.touched = append(l.touched, p)
	}
	l.batch[p] = max(l.batch[p], seq)
}

// write adds the commit's 'w' record to b: the touched partitions' pairs,
// or, when the log is due one, a checkpoint of every partition with
// deletions of the records before it. It writes nothing for a commit that
// touched no partition (purges only, none of them void).
func (l *seqLog) write(b *pebble.Batch) (checkpoint bool, err error) {
	if len(l.touched) == 0 {
		return false, nil
	}
	checkpoint = l.next-l.first >= l.every
	l.buf = l.buf[:0]
	for _, p := range l.touched {
		l.buf = binary.BigEndian.AppendUint16(l.buf, p)
		l.buf = binary.BigEndian.AppendUint64(l.buf, l.batch[p])
	}
	if checkpoint {
		for p, seq := range l.seqs {
			if int(p) >= len(l.batch) || l.batch[p] == 0 {
				l.buf = binary.BigEndian.AppendUint16(l.buf, p)
				l.buf = binary.BigEndian.AppendUint64(l.buf, seq)
			}
		}
		for n := l.first; n < l.next; n++ {
			if err := b.Delete(seqLogKey(n), nil); err != nil {
				return false, err
			}
		}
	}
	return checkpoint, b.Set(seqLogKey(l.next), l.buf, nil)
}

// committed takes the commit's sequence numbers into the log's state once
// its batch is committed.
func (l *seqLog) committed(checkpoint bool) {
	if len(l.touched) == 0 {
		return
	}
	for _, p := range l.touched {
		l.seqs[p] = l.batch[p]
	}
	if checkpoint {
		l.first = l.next
	}
	l.next++
}

// endBatch clears a commit's scratch space, whether it committed or not.
func (l *seqLog) endBatch() {
	for _, p := range l.touched {
		l.batch[p] = 0
	}
	l.touched = l.touched[:0]
}

func (s *pebbleStorage) commitOne(r record) error { return s.commit([]record{r}) }

// probe writes the reserve again if it was spent, then a small record.
func (s *pebbleStorage) probe() error {
	return s.write(func(b *pebble.Batch) error { return b.Set(metaKey(metaProbe), []byte{1}, nil) }, true)
}

// get returns a copy of the value stored at k, or nil when there is none.
// The caller holds life (or owns the store alone).
func (s *pebbleStorage) get(k []byte) ([]byte, error) {
	v, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := bytes.Clone(v)
	return out, closer.Close()
}

func (s *pebbleStorage) doc(k docKey) (*Document, error) {
	exit, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer exit()
	v, closer, err := s.db.Get(pebbleDocKey(k))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, k.key)
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return decodeDoc(k.cid, k.key, v) // copies the value
}

// docs reads keys through one iterator, seeking forward from key to key:
// sorted seeks reuse the iterator's position (pebble steps on rather than
// descending from the top of each level again) and read each data block
// once, where point reads pay an iterator's set-up and a random descent
// each.
func (s *pebbleStorage) docs(keys []docKey) (_ []*Document, err error) {
	out := make([]*Document, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	exit, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer exit()
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: pebbleDocKey(keys[0]),
		UpperBound: append(pebbleDocKey(keys[len(keys)-1]), 0),
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for i, k := range keys {
		want := pebbleDocKey(k)
		if !it.SeekGE(want) {
			if err := it.Error(); err != nil {
				return nil, err
			}
			break // nothing at or after k: the later keys are not stored either
		}
		if !bytes.Equal(it.Key(), want) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		if out[i], err = decodeDoc(k.cid, k.key, v); err != nil { // copies the value
			return nil, err
		}
	}
	return out, it.Error()
}

// each calls fn with every key and value whose key starts with the prefix
// p (the prefix stripped), in key order, stopping at fn's first error. The
// bytes are valid only during the call.
func (s *pebbleStorage) each(p byte, fn func(k, v []byte) error) (err error) {
	exit, err := s.enter()
	if err != nil {
		return err
	}
	defer exit()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{p}, UpperBound: prefixEnd(p)})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := fn(it.Key()[1:], v); err != nil {
			return err
		}
	}
	return it.Error()
}

func (s *pebbleStorage) scan(fn func(*Document) error) error {
	return s.each(pfxDoc, func(k, v []byte) error {
		d, err := decodeDocRecord(k, v)
		if err != nil {
			return err
		}
		return fn(d)
	})
}

func (s *pebbleStorage) docsAfter(after docKey, from bool, n int, out []*Document) (_ []*Document, err error) {
	exit, err := s.enter()
	if err != nil {
		return out, err
	}
	defer exit()
	lower := []byte{pfxDoc}
	if from {
		lower = append(pebbleDocKey(after), 0) // the smallest key after it
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(pfxDoc)})
	if err != nil {
		return out, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for ok := it.First(); ok && n > 0; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return out, err
		}
		d, err := decodeDocRecord(it.Key()[1:], v) // copies the key and value
		if err != nil {
			return out, err
		}
		out = append(out, d)
		n--
	}
	return out, it.Error()
}

func (s *pebbleStorage) scanKeys(fn func(docKey) error) error {
	return s.each(pfxDoc, func(k, _ []byte) error {
		dk, err := docKeyOf(k)
		if err != nil {
			return err
		}
		return fn(dk)
	})
}

// keys reads in chunks, as the bbolt store does (keysFirstChunk keys, then
// twice as many each time up to keysMaxChunk), each chunk with its own
// iterator: an open iterator pins the memtables and tables it reads (they
// cannot be freed or compacted away), so none is kept open while the
// caller's loop body runs.
func (s *pebbleStorage) keys(cid CollectionID, r keyRange) iter.Seq2[string, error] {
	return chunkedKeys(r, &s.keysRead, func(r keyRange, n int, chunk []string) ([]string, error) {
		return s.readKeys(cid, r, n, chunk)
	})
}

// readKeys appends to out up to n keys of collection cid within r, in r's
// order. The bounds are pebble's (lower inclusive, upper exclusive): the
// smallest key after k is k followed by a zero byte.
func (s *pebbleStorage) readKeys(cid CollectionID, r keyRange, n int, out []string) (_ []string, err error) {
	exit, err := s.enter()
	if err != nil {
		return out, err
	}
	defer exit()
	prefix := pebbleDocKey(docKey{cid: cid})
	lower := append(bytes.Clone(prefix), r.lo...)
	if r.loOpen {
		lower = append(lower, 0)
	}
	var upper []byte
	switch {
	case r.hasHi:
		upper = append(bytes.Clone(prefix), r.hi...)
		if !r.hiOpen {
			upper = append(upper, 0)
		}
	case cid == math.MaxUint32:
		upper = prefixEnd(pfxDoc)
	default:
		upper = pebbleDocKey(docKey{cid: cid + 1})
	}
	if bytes.Compare(lower, upper) >= 0 {
		return out, nil // an empty range
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return out, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	valid := it.First()
	if r.desc {
		valid = it.Last()
	}
	for ; valid && len(out) < n; valid = pebbleStep(it, r.desc) {
		out = append(out, string(it.Key()[len(prefix):]))
	}
	return out, it.Error()
}

// pebbleStep moves it one key on in the scan's order.
func pebbleStep(it *pebble.Iterator, desc bool) bool {
	if desc {
		return it.Prev()
	}
	return it.Next()
}

// pebbleCountBelow is the size of a store's document range below which
// estimateKeys counts its keys rather than estimating them.
const pebbleCountBelow = 8 << 20

// estimateKeys estimates the stored documents (ep_warmup_estimated_key_count)
// without reading a large store's keys: from the sstables' properties, the
// entries less the deletions of every table within the documents' range,
// and of a table that spans other ranges too (the two at each level's ends
// of the range) the share its bytes in the range suggest. Open flushes
// what the write-ahead log held, so at warm-up nothing stored is left out;
// what the estimate overcounts is compaction's debt: a document written
// again, or purged, since the tables holding its older versions were last
// compacted counts once per version (exact after a compaction, too high by
// the versions not yet compacted away). A small store, whose documents
// take less than pebbleCountBelow, is often one table holding every range,
// where a share of bytes is a poor guess: its keys are counted, exactly.
func (s *pebbleStorage) estimateKeys() (int64, error) {
	exit, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer exit()
	lo, hi := []byte{pfxDoc}, prefixEnd(pfxDoc)
	levels, err := s.db.SSTables(pebble.WithProperties(), pebble.WithKeyRangeFilter(lo, hi), pebble.WithApproximateSpanBytes())
	if err != nil {
		return 0, fmt.Errorf("engine: estimate documents: %w", err)
	}
	var n float64
	var size uint64
	for _, level := range levels {
		for _, t := range level {
			size += t.ApproximateSpanBytes
			if t.Properties == nil || t.Properties.NumEntries <= t.Properties.NumDeletions {
				continue
			}
			live := float64(t.Properties.NumEntries - t.Properties.NumDeletions)
			if t.Size > 0 && t.ApproximateSpanBytes < t.Size {
				live *= float64(t.ApproximateSpanBytes) / float64(t.Size)
			}
			n += live
		}
	}
	if size >= pebbleCountBelow {
		return int64(math.Round(n)), nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, fmt.Errorf("engine: count documents: %w", err)
	}
	var c int64
	for ok := it.First(); ok; ok = it.Next() {
		c++
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("engine: count documents: %w", err)
	}
	return c, nil
}

// memHeld returns the bytes the store's block cache and memtables hold now,
// as pebble reports them; 0 once the store is closed.
func (s *pebbleStorage) memHeld() int64 {
	exit, err := s.enter()
	if err != nil {
		return 0
	}
	defer exit()
	m := s.db.Metrics()
	return m.BlockCache.Size + int64(m.MemTable.Size)
}

// memBudget is the most memHeld may reach (as pebble sizes memtables, a
// large batch may briefly pass it).
func (s *pebbleStorage) memBudget() int64 { return s.sizes.budget() }

func (s *pebbleStorage) expiries(fn func(expItem) error) error {
	return s.each(pfxExp, func(k, _ []byte) error {
		if len(k) < 13 {
			return fmt.Errorf("engine: corrupt expiry key %x", k)
		}
		return fn(expItem{
			exp: int64(binary.BigEndian.Uint64(k)),
			key: docKey{cid: CollectionID(binary.BigEndian.Uint32(k[8:])), key: string(k[12:])},
		})
	})
}

// seqnos reads the sequence numbers from the store (not from the log's
// state in memory: the checks compare what is on disk).
func (s *pebbleStorage) seqnos() (map[uint16]uint64, error) {
	exit, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer exit()
	l, err := s.readSeqLog()
	return l.seqs, err
}

func (s *pebbleStorage) meta() (storedMeta, error) {
	m := storedMeta{sys: make(map[string][]byte)}
	err := s.each(pfxMeta, func(k, v []byte) error {
		switch string(k) {
		case string(metaCAS):
			if len(v) == 8 {
				m.cas = binary.BigEndian.Uint64(v)
			}
		case string(metaConsumers):
			if err := json.Unmarshal(v, &m.consumers); err != nil {
				return fmt.Errorf("engine: corrupt consumer list: %w", err)
			}
		case string(metaFailover):
			h, err := decodeHistory(v)
			if err != nil {
				return err
			}
			m.history = h
		case string(metaClean):
			m.clean = true
		}
		return nil
	})
	if err != nil {
		return m, err
	}
	err = s.each(pfxSys, func(k, v []byte) error {
		m.sys[string(k)] = bytes.Clone(v)
		return nil
	})
	return m, err
}

// write commits one small batch built by fill, under the write lock; with
// reclaim set it first takes back the reserve if it was spent (the probe,
// metadata writes), else it fails while the reserve is spent.
func (s *pebbleStorage) write(fill func(b *pebble.Batch) error, reclaim bool) error {
	exit, err := s.enter()
	if err != nil {
		return err
	}
	defer exit()
	s.mu.Lock()
	defer s.mu.Unlock()
	if reclaim {
		if err := s.reclaimLocked(); err != nil {
			return err
		}
	}
	if s.full.Load() {
		return errReserveGone
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := fill(b); err != nil {
		return err
	}
	return b.Commit(s.sync)
}

func (s *pebbleStorage) putSys(key string, value []byte) error {
	return s.write(func(b *pebble.Batch) error {
		if value == nil {
			return b.Delete(sysKey(key), nil)
		}
		return b.Set(sysKey(key), value, nil)
	}, true)
}

func (s *pebbleStorage) putConsumers(names []string) error {
	v, err := json.Marshal(names)
	if err != nil {
		return err
	}
	return s.write(func(b *pebble.Batch) error { return b.Set(metaKey(metaConsumers), v, nil) }, true)
}

func (s *pebbleStorage) begin(history []FailoverEntry) error {
	enc, err := encodeHistory(history)
	if err != nil {
		return err
	}
	return s.write(func(b *pebble.Batch) error {
		if err := b.Set(metaKey(metaFailover), enc, nil); err != nil {
			return err
		}
		return b.Delete(metaKey(metaClean), nil)
	}, true)
}

func (s *pebbleStorage) raiseCAS(cas uint64) error {
	exit, err := s.enter()
	if err != nil {
		return err
	}
	defer exit()
	s.mu.Lock()
	defer s.mu.Unlock()
	if cas <= s.mu.cas {
		return nil
	}
	if err := s.db.Set(metaKey(metaCAS), binary.BigEndian.AppendUint64(nil, cas), pebble.Sync); err != nil {
		return err
	}
	s.mu.cas = cas
	return nil
}

// close closes the store; a second close does nothing.
func (s *pebbleStorage) close(clean bool) error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.life.closed {
		return nil
	}
	s.life.closed = true
	var err error
	if clean {
		// The marker is synced whatever NoSync says: a clean close promises
		// that everything before it is on disk.
		s.mu.Lock()
		if err = s.reclaimLocked(); err == nil {
			err = s.db.Set(metaKey(metaClean), []byte{1}, pebble.Sync)
		}
		s.mu.Unlock()
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
	s.mu.Lock()
	if s.mu.batch != nil {
		s.mu.batch.Close()
		s.mu.batch = nil
	}
	s.mu.Unlock()
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// holdWrites keeps every commit waiting until release is called, by holding
// the store's write lock (tests look at writes queued but not yet on disk).
func (s *pebbleStorage) holdWrites() (release func(), err error) {
	s.mu.Lock()
	return s.mu.Unlock, nil
}
