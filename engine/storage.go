package engine

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// storage is where a bucket keeps what it persists: the seam between the
// engine's in-memory state (partitions, expiry index, counters) and a medium.
// Three implementations: pebbleStorage and boltStorage (a couchbase bucket's
// pebble database or bbolt file, Options.Storage) and memStorage (ephemeral
// and memcached buckets: nothing outlives the process).
// The group-commit flusher (store) drives it; nothing else in the engine
// touches a medium.
//
// Documents are stored by key; a store that is not durable keeps none, nor
// their expiry entries (the partitions are their only copy), but keeps
// everything else (sequence numbers, CAS, metadata), so that the
// engine treats both the same way. Implementations are safe for concurrent
// use. A durable store's commits come from one goroutine at a time (the
// flusher); a store that is not durable is committed inline, by each writer.
type storage interface {
	// durable reports whether the store keeps documents, and everything it
	// is given, across a restart.
	durable() bool

	// encode returns r's document as commit will write it (nil when it
	// writes none, or when commit encodes it itself). The store calls it
	// in the writer's goroutine, so that writers encode in parallel and
	// the commit, which runs one at a time, does less; commit encodes a
	// record whose enc is nil itself.
	encode(r record) []byte
	// commit writes recs atomically, in order: a record's document (or
	// its removal, for a purge), its expiry-index entry, its partition's
	// sequence number (a purge's does not count, a void one's does:
	// record.countsSeq) and the bucket's CAS
	// (which only ever rises). Later records of one key win over earlier
	// ones. Nothing of a failed commit is kept.
	commit(recs []record) error
	// commitOne is commit of one record: how the writers of a store that
	// is not durable commit, inline (a record passed by value costs no
	// allocation, a batch would).
	commitOne(r record) error
	// probe writes something small, to tell whether the medium takes
	// writes again after a failed commit.
	probe() error

	// doc returns the stored version of k, or an error wrapping
	// ErrNotFound when the store holds none. A read by key, for values
	// that are not in memory.
	doc(k docKey) (*Document, error)
	// docs reads the stored versions of keys, which are in the stores' key
	// order (sortDocKeys: by collection, then key bytes; a key may repeat),
	// in one pass of one read transaction or iterator, rather than one
	// random point read each: out[i] is keys[i]'s stored version, nil when
	// the store holds none. A read error fails the whole call. For the
	// values of many ejected versions at once (a change-feed cursor, an
	// index build). A store that is not durable holds none.
	docs(keys []docKey) (out []*Document, err error)
	// scan calls fn with every stored document, in key order (warm-up,
	// checks), stopping at fn's first error.
	scan(fn func(*Document) error) error
	// scanKeys calls fn with the key of every stored document (tombstones
	// included), in key order, without decoding values (the warm-up's
	// Bloom filters), stopping at fn's first error. The key's bytes are
	// valid only during the call.
	scanKeys(fn func(docKey) error) error
	// docsAfter appends to out up to n stored documents (tombstones
	// included) in key order, from the first one after key after (from
	// the first of all when from is false), in one read transaction or
	// iterator that ends before it returns: a change-feed backfill reads
	// the store a chunk at a time with it (evict.go).
	docsAfter(after docKey, from bool, n int, out []*Document) ([]*Document, error)
	// keys returns an iterator over the keys of collection cid that the
	// store holds records of (live documents and tombstones alike) within
	// r, in byte order of key, or in reverse byte order when r.desc is
	// set. The contract, which every implementation keeps:
	//   - each key is yielded at most once, and the keys yielded strictly
	//     increase (strictly decrease with desc); no key of another
	//     collection, none outside r;
	//   - a key whose record is in the store from before the first pull
	//     until after the last one is yielded; a key written or removed
	//     during the iteration may or may not be (the iterator need not
	//     read one snapshot: it may read in chunks, each its own read
	//     transaction, resuming strictly past the last key it yielded);
	//   - it stops reading as soon as the caller stops pulling: rows read
	//     follow the keys pulled (plus at most one read-ahead chunk), not
	//     the size of the collection or of r;
	//   - it holds no lock nor read transaction while the caller's loop
	//     body runs, so that a slow consumer (an HTTP client) never holds
	//     back a commit or the growth of the file;
	//   - a read error is yielded once, as ("", err), and ends the
	//     iteration.
	// A store that is not durable holds no documents and yields nothing.
	keys(cid CollectionID, r keyRange) iter.Seq2[string, error]
	// expiries calls fn with every stored expiry-index entry, in
	// expiration order (its size is not stored), stopping at fn's first
	// error.
	expiries(fn func(expItem) error) error
	// seqnos returns each partition's committed high sequence number
	// (partitions that never committed are absent).
	seqnos() (map[uint16]uint64, error)
	// forgetSeqno sets partition part's committed high sequence number
	// back to 0 (a partition's copy dropped: DropPartition), durably.
	forgetSeqno(part uint16) error
	// meta returns the bucket's stored metadata.
	meta() (storedMeta, error)

	// putSys durably writes a system document, or removes it when value is
	// nil.
	putSys(key string, value []byte) error
	// putConsumers durably replaces the list of registered change-feed
	// consumers.
	putConsumers(names []string) error
	// raiseCAS durably raises the stored CAS to cas when it is below: a
	// clean close records the highest CAS the bucket handed out, a
	// document lock's included, which no record carries, so that the
	// bucket opens above every CAS a client or a change-feed position
	// holds.
	raiseCAS(cas uint64) error
	// begin records the failover log of the history the bucket opens with
	// and removes the clean-close marker, in one step.
	begin(history []FailoverEntry) error
	// close closes the store; with clean set it first marks it cleanly
	// closed (see storedMeta.clean).
	close(clean bool) error
}

// compareDocKeys orders keys as every store keeps documents: by
// collection, then by the bytes of the key (storage.docs).
func compareDocKeys(a, b docKey) int {
	if c := cmp.Compare(a.cid, b.cid); c != 0 {
		return c
	}
	return strings.Compare(a.key, b.key)
}

// keyRange bounds a scan of a collection's keys (storage.keys), whatever the
// direction of reading: lo is the lowest key taken and hi the highest.
type keyRange struct {
	lo     string // the lowest key ("" and !loOpen: from the first key)
	loOpen bool   // lo itself is left out
	hi     string // the highest key, when hasHi
	hiOpen bool   // hi itself is left out
	hasHi  bool   // without it the range runs to the collection's last key
	desc   bool   // read from the high end down
}

// contains reports whether k lies within r's bounds.
func (r keyRange) contains(k string) bool {
	if k < r.lo || r.loOpen && k == r.lo {
		return false
	}
	return !r.hasHi || k < r.hi || !r.hiOpen && k == r.hi
}

// past returns r narrowed to the keys after k in reading order: how a
// chunked scan resumes strictly past the last key it yielded.
func (r keyRange) past(k string) keyRange {
	if r.desc {
		r.hi, r.hiOpen, r.hasHi = k, true, true
	} else {
		r.lo, r.loOpen = k, true
	}
	return r
}

// storedMeta is a bucket's metadata as a store holds it.
type storedMeta struct {
	cas       uint64            // highest CAS committed
	consumers []string          // registered change-feed consumers
	history   []FailoverEntry   // failover log, newest first
	clean     bool              // the store was closed cleanly since begin
	sys       map[string][]byte // system documents (design documents…)
}

// record is one mutation on its way to a store.
type record struct {
	doc    *Document // the version to store and publish once committed (nil for a purge)
	enc    []byte    // doc as the store encodes it (see storage.encode), or nil
	purge  bool      // removes the key's stored record (metadata purge, dropped collection)
	key    docKey
	oldExp int64 // expiry entry the key's stored record holds (it goes), 0 for none
	part   uint16
	seq    uint64
	cas    uint64
	// void, with purge, is a replicated write to a dropped collection,
	// applied as nothing: its sequence number, unlike other purges', is
	// the partition's newest (countsSeq).
	void bool
}

// countsSeq reports whether r's sequence number is its partition's newest,
// which a store keeps: every record's but a purge's (which removes an old
// tombstone, or a dropped collection's document, at its old sequence
// number), unless the purge is a void write (record.void).
func (r *record) countsSeq() bool { return !r.purge || r.void }

// newExp returns the expiry-index entry a record leaves: a live document's
// expiration, or 0.
func (r *record) newExp() int64 {
	if r.purge || r.doc == nil || r.doc.Deleted {
		return 0
	}
	return r.doc.Expiration
}

// catalog is where an engine keeps its buckets' definitions.
type catalog interface {
	// entries returns every stored definition.
	entries() ([]catalogEntry, error)
	// put durably stores a bucket's definition, replacing any other of the
	// same name.
	put(ce catalogEntry) error
	// remove durably forgets the named bucket's definition.
	remove(name string) error
	// firstStart reports whether the data directory's first start is not
	// over: the catalog was created by this open, or by an earlier one
	// whose start did not reach endFirstStart.
	firstStart() bool
	// endFirstStart durably records that the first start is over.
	endFirstStart() error
	close() error
}

// boltFile is the file, in a bucket's folder, of its bbolt store.
const boltFile = "data.db"

// storageIn tells which store the bucket folder dir holds: the one it was
// created with (a bbolt file or a pebble folder), so that a data directory
// written before the default changed keeps working; or, for a folder that
// holds neither (a new bucket), the configured one.
func storageIn(dir, configured string) (string, error) {
	_, berr := os.Stat(filepath.Join(dir, boltFile))
	_, perr := os.Stat(filepath.Join(dir, pebbleDir))
	for _, err := range []error{berr, perr} {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
	switch {
	case berr == nil && perr == nil:
		return "", fmt.Errorf("%w: %s holds both a bbolt file (%s) and a pebble store (%s/): remove the one that is not the bucket's",
			ErrStorage, dir, boltFile, pebbleDir)
	case berr == nil:
		return StorageBolt, nil
	case perr == nil:
		return StoragePebble, nil
	}
	return configured, nil
}

// Chunks of a keys scan: the first is small (a page of a listing is
// usually a few dozen keys), each next one twice the last, up to the most.
const (
	keysFirstChunk = 64
	keysMaxChunk   = 4096
)

// chunkedKeys is a store's keys: it yields r's keys read in chunks by
// read(r, n, chunk), which appends at most n keys of r, in r's order, to
// chunk; a store's read holds its transaction or iterator for one chunk,
// never while the caller's loop body runs. read counts every key it reads.
func chunkedKeys(r keyRange, read *atomic.Int64, readChunk func(r keyRange, n int, chunk []string) ([]string, error)) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		chunk := make([]string, 0, keysFirstChunk)
		for n := keysFirstChunk; ; n = min(2*n, keysMaxChunk) {
			var err error
			chunk, err = readChunk(r, n, chunk[:0])
			read.Add(int64(len(chunk)))
			if err != nil {
				yield("", err)
				return
			}
			for _, k := range chunk {
				if !yield(k, nil) {
					return
				}
			}
			if len(chunk) < n {
				return // the range is exhausted
			}
			r = r.past(chunk[len(chunk)-1])
		}
	}
}
