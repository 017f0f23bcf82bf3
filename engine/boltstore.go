package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"slices"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bbolt buckets of a couchbase bucket's data file.
var (
	bktDocs  = []byte("docs")  // be32(cid)|key → encoded Document
	bktExp   = []byte("exp")   // be64(expiration)|be32(cid)|key → nil
	bktVBSeq = []byte("vbseq") // be16(partition) → be64(high seq)
	bktMeta  = []byte("meta")  // "cas" → be64(last cas)
	bktSys   = []byte("sys")   // system document key → value (design documents…)
)

// Keys of bktMeta.
var (
	metaCAS       = []byte("cas")       // be64 highest CAS committed
	metaConsumers = []byte("consumers") // JSON list of registered change-feed consumers
	metaFailover  = []byte("failover")  // JSON failover log, newest first
	metaClean     = []byte("clean")     // present: the file was closed cleanly
	metaProbe     = []byte("probe")     // written by the recovery probe of a failed store
)

// boltTimeout bounds how long Open waits for another process's lock on a file.
const boltTimeout = 2 * time.Second

// boltMmapSize is the address space a bucket's file is mapped with from the
// start. bbolt must remap a file that grows past its mapping, and a remap
// waits for every read transaction to end: with room mapped ahead, the
// warm-up's long scan (a read transaction) does not hold up the commits of
// the writes made meanwhile (until the file outgrows it). It reserves
// address space only: the file grows with what it holds.
const boltMmapSize = 1 << 30

// boltStorage keeps a couchbase bucket in one bbolt file.
type boltStorage struct {
	db *bolt.DB
	// keysRead counts the document keys read by keys scans (tests check
	// that a listing stops reading when its caller stops).
	keysRead atomic.Int64
}

func openBoltStorage(path string, o *Options) (*boltStorage, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: boltTimeout, NoFreelistSync: true, NoSync: o.NoSync, InitialMmapSize: boltMmapSize})
	if err != nil {
		return nil, fmt.Errorf("engine: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bktDocs, bktExp, bktVBSeq, bktMeta, bktSys} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("engine: init %s: %w", path, err)
	}
	return &boltStorage{db: db}, nil
}

func (s *boltStorage) durable() bool { return true }

func docDBKey(k docKey) []byte {
	b := make([]byte, 4+len(k.key))
	binary.BigEndian.PutUint32(b, uint32(k.cid))
	copy(b[4:], k.key)
	return b
}

func expDBKey(exp int64, k docKey) []byte {
	b := make([]byte, 12+len(k.key))
	binary.BigEndian.PutUint64(b, uint64(exp))
	binary.BigEndian.PutUint32(b[8:], uint32(k.cid))
	copy(b[12:], k.key)
	return b
}

// kvOp is one change to a bbolt bucket in a commit: put val at key, or
// delete key when del is set.
type kvOp struct {
	key, val []byte
	del      bool
	ord      int // position in the commit: orders the changes of one key
}

// applyOps applies ops to bkt in key order, keeping the order of the ops of
// one key (by ord). bbolt inserts into an in-memory node by shifting everything after
// the insertion point, and splits nodes only at commit: a batch of random
// keys, or of expiry-index keys that share an expiration (they all land at
// the end of one node), would make a large commit quadratic. In key order,
// each insertion lands at or near the end of the node it goes to.
func applyOps(bkt *bolt.Bucket, ops []kvOp) error {
	slices.SortFunc(ops, func(a, b kvOp) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return a.ord - b.ord
	})
	for _, op := range ops {
		var err error
		if op.del {
			err = bkt.Delete(op.key)
		} else {
			err = bkt.Put(op.key, op.val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *boltStorage) encode(r record) []byte {
	if r.purge {
		return nil
	}
	return encodeDoc(r.doc)
}

func (s *boltStorage) commit(recs []record) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		docs, exp, vbseq, meta := tx.Bucket(bktDocs), tx.Bucket(bktExp), tx.Bucket(bktVBSeq), tx.Bucket(bktMeta)
		seqs := make(map[uint16]uint64)
		var maxCAS uint64
		docOps := make([]kvOp, 0, len(recs))
		var expOps []kvOp
		for i := range recs {
			r := &recs[i]
			// A purge removes an old tombstone (or a dropped collection's
			// document): its sequence number is not the partition's
			// newest, unless it is a void write's (countsSeq).
			if r.countsSeq() && r.seq > seqs[r.part] {
				seqs[r.part] = r.seq
			}
			maxCAS = max(maxCAS, r.cas)
			op := kvOp{key: docDBKey(r.key), del: r.purge, ord: len(docOps)}
			if !r.purge {
				if r.enc == nil {
					r.enc = s.encode(*r)
				}
				op.val = r.enc
			}
			docOps = append(docOps, op)
			if newExp := r.newExp(); r.oldExp != newExp {
				if r.oldExp != 0 {
					expOps = append(expOps, kvOp{key: expDBKey(r.oldExp, r.key), del: true, ord: len(expOps)})
				}
				if newExp != 0 {
					expOps = append(expOps, kvOp{key: expDBKey(newExp, r.key), ord: len(expOps)})
				}
			}
		}
		if err := applyOps(docs, docOps); err != nil {
			return err
		}
		if err := applyOps(exp, expOps); err != nil {
			return err
		}
		// bbolt keeps references to keys and values until commit: fresh
		// buffers for each.
		for p, seq := range seqs {
			if err := vbseq.Put(binary.BigEndian.AppendUint16(nil, p), binary.BigEndian.AppendUint64(nil, seq)); err != nil {
				return err
			}
		}
		// A sliding extension keeps its document's older CAS: the stored
		// CAS only ever rises.
		if v := meta.Get(metaCAS); len(v) == 8 && binary.BigEndian.Uint64(v) >= maxCAS {
			maxCAS = 0
		}
		if maxCAS != 0 {
			if err := meta.Put(metaCAS, binary.BigEndian.AppendUint64(nil, maxCAS)); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *boltStorage) commitOne(r record) error { return s.commit([]record{r}) }

func (s *boltStorage) probe() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktMeta).Put(metaProbe, []byte{1})
	})
}

func (s *boltStorage) doc(k docKey) (*Document, error) {
	var d *Document
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bktDocs).Get(docDBKey(k))
		if v == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, k.key)
		}
		var err error
		d, err = decodeDoc(k.cid, k.key, v)
		return err
	})
	return d, err
}

// docs reads keys in one read transaction through one cursor, seeking
// forward from key to key (neighbouring keys share their pages).
func (s *boltStorage) docs(keys []docKey) ([]*Document, error) {
	out := make([]*Document, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktDocs).Cursor()
		for i, k := range keys {
			want := docDBKey(k)
			ck, v := c.Seek(want)
			if ck == nil {
				return nil // nothing at or after k: the later keys are not stored either
			}
			if !bytes.Equal(ck, want) {
				continue
			}
			var err error
			if out[i], err = decodeDoc(k.cid, k.key, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *boltStorage) scan(fn func(*Document) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktDocs).ForEach(func(k, v []byte) error {
			d, err := decodeDocRecord(k, v)
			if err != nil {
				return err
			}
			return fn(d)
		})
	})
}

func (s *boltStorage) docsAfter(after docKey, from bool, n int, out []*Document) ([]*Document, error) {
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktDocs).Cursor()
		k, v := c.First()
		if from {
			seek := docDBKey(after)
			if k, v = c.Seek(seek); k != nil && bytes.Equal(k, seek) {
				k, v = c.Next()
			}
		}
		for ; k != nil && n > 0; k, v = c.Next() {
			d, err := decodeDocRecord(k, v)
			if err != nil {
				return err
			}
			out = append(out, d)
			n--
		}
		return nil
	})
	return out, err
}

func (s *boltStorage) scanKeys(fn func(docKey) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktDocs).ForEach(func(k, _ []byte) error {
			dk, err := docKeyOf(k)
			if err != nil {
				return err
			}
			return fn(dk)
		})
	})
}

// keys reads r in chunks (see chunkedKeys), each in its own read
// transaction that ends before the chunk's keys are yielded: a long listing
// never holds back a commit (bbolt's remap, when the file grows, waits for
// every open read transaction) and keeps no old pages alive.
func (s *boltStorage) keys(cid CollectionID, r keyRange) iter.Seq2[string, error] {
	return chunkedKeys(r, &s.keysRead, func(r keyRange, n int, chunk []string) ([]string, error) {
		err := s.db.View(func(tx *bolt.Tx) error {
			var err error
			chunk, err = readKeys(tx.Bucket(bktDocs).Cursor(), cid, r, n, chunk)
			return err
		})
		return chunk, err
	})
}

// readKeys appends to out up to n keys of collection cid within r, in r's
// order, read with c.
func readKeys(c *bolt.Cursor, cid CollectionID, r keyRange, n int, out []string) ([]string, error) {
	prefix := binary.BigEndian.AppendUint32(nil, uint32(cid))
	// key decodes a bbolt key of the collection (ok false past it).
	key := func(k []byte) (string, bool) {
		if k == nil || !bytes.HasPrefix(k, prefix) {
			return "", false
		}
		return string(k[4:]), true
	}
	var k []byte
	if !r.desc {
		k, _ = c.Seek(append(prefix, r.lo...))
	} else {
		if r.hasHi {
			k, _ = c.Seek(append(prefix, r.hi...))
		} else if cid == math.MaxUint32 {
			k = nil
		} else {
			k, _ = c.Seek(binary.BigEndian.AppendUint32(nil, uint32(cid)+1))
		}
		if k == nil {
			k, _ = c.Last()
		} else if kk, ok := key(k); !ok || !r.contains(kk) {
			k, _ = c.Prev() // Seek landed past the range's high end
		}
	}
	for ; len(out) < n; k = step(c, r.desc) {
		kk, ok := key(k)
		if !ok {
			return out, nil
		}
		if !r.contains(kk) {
			if r.desc && kk > r.lo || !r.desc && kk <= r.lo {
				continue // lo itself, left out (loOpen); or hi, with hiOpen
			}
			return out, nil
		}
		out = append(out, kk)
	}
	return out, nil
}

// step moves c one key on in the scan's order.
func step(c *bolt.Cursor, desc bool) []byte {
	if desc {
		k, _ := c.Prev()
		return k
	}
	k, _ := c.Next()
	return k
}

// estimateKeys counts the stored documents from the B+tree's pages, without
// decoding them (ep_warmup_estimated_key_count).
func (s *boltStorage) estimateKeys() (int64, error) {
	var n int64
	err := s.db.View(func(tx *bolt.Tx) error {
		n = int64(tx.Bucket(bktDocs).Stats().KeyN)
		return nil
	})
	return n, err
}

func (s *boltStorage) expiries(fn func(expItem) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktExp).ForEach(func(k, _ []byte) error {
			if len(k) < 13 {
				return fmt.Errorf("engine: corrupt expiry key %x", k)
			}
			return fn(expItem{
				exp: int64(binary.BigEndian.Uint64(k)),
				key: docKey{cid: CollectionID(binary.BigEndian.Uint32(k[8:])), key: string(k[12:])},
			})
		})
	})
}

func (s *boltStorage) seqnos() (map[uint16]uint64, error) {
	seqs := make(map[uint16]uint64)
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktVBSeq).ForEach(func(k, v []byte) error {
			if len(k) == 2 && len(v) == 8 {
				seqs[binary.BigEndian.Uint16(k)] = binary.BigEndian.Uint64(v)
			}
			return nil
		})
	})
	return seqs, err
}

func (s *boltStorage) forgetSeqno(part uint16) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktVBSeq).Delete(binary.BigEndian.AppendUint16(nil, part))
	})
}

func (s *boltStorage) meta() (storedMeta, error) {
	m := storedMeta{sys: make(map[string][]byte)}
	err := s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bktMeta)
		if v := meta.Get(metaCAS); len(v) == 8 {
			m.cas = binary.BigEndian.Uint64(v)
		}
		if v := meta.Get(metaConsumers); v != nil {
			if err := json.Unmarshal(v, &m.consumers); err != nil {
				return fmt.Errorf("engine: corrupt consumer list: %w", err)
			}
		}
		if v := meta.Get(metaFailover); v != nil {
			h, err := decodeHistory(v)
			if err != nil {
				return err
			}
			m.history = h
		}
		m.clean = meta.Get(metaClean) != nil
		return tx.Bucket(bktSys).ForEach(func(k, v []byte) error {
			m.sys[string(k)] = append([]byte(nil), v...)
			return nil
		})
	})
	return m, err
}

func (s *boltStorage) putSys(key string, value []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktSys)
		if value == nil {
			return b.Delete([]byte(key))
		}
		return b.Put([]byte(key), value)
	})
}

func (s *boltStorage) putConsumers(names []string) error {
	v, err := json.Marshal(names)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bktMeta).Put(metaConsumers, v) })
}

func (s *boltStorage) begin(history []FailoverEntry) error {
	enc, err := encodeHistory(history)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bktMeta)
		if err := meta.Put(metaFailover, enc); err != nil {
			return err
		}
		return meta.Delete(metaClean)
	})
}

func (s *boltStorage) raiseCAS(cas uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bktMeta)
		if v := meta.Get(metaCAS); len(v) == 8 && binary.BigEndian.Uint64(v) >= cas {
			return nil
		}
		return meta.Put(metaCAS, binary.BigEndian.AppendUint64(nil, cas))
	})
}

func (s *boltStorage) close(clean bool) error {
	var err error
	if clean {
		err = s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bktMeta).Put(metaClean, []byte{1}) })
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// holdWrites keeps every commit waiting until release is called, by holding
// bbolt's writer lock with an open write transaction (tests look at writes
// queued but not yet on disk).
func (s *boltStorage) holdWrites() (release func(), err error) {
	tx, err := s.db.Begin(true)
	if err != nil {
		return nil, err
	}
	return func() { tx.Rollback() }, nil
}

// bktBuckets is the catalog file's one bbolt bucket: name → JSON catalogEntry.
var bktBuckets = []byte("buckets")

// boltCatalog keeps the engine's catalog in a bbolt file.
type boltCatalog struct {
	db *bolt.DB
	// first is set while the data directory's first start is not over:
	// the catalog is new, or firstStartKey is still in it.
	first bool
}

// firstStartKey, in bktCatalogMeta, marks a data directory whose first
// start (the catalog created, then its default bucket) has not finished.
var firstStartKey = []byte("firstStart")

// bktCatalogMeta is the catalog file's bbolt bucket of what is not a
// bucket's definition: the data directory's format (catalogFormatKey).
var bktCatalogMeta = []byte("meta")

// catalogFormatKey holds the data directory's format, a big-endian uint32.
var catalogFormatKey = []byte("format")

// catalogFormat is the format of a data directory this version writes, and
// the newest it reads. A version that changes what the directory holds
// (the catalog, a store's keys or records) so that an older one would
// misread it raises it: the older one then refuses the directory, rather
// than read part of it and rewrite the catalog without what it cannot read.
// A catalog without the key (written before it) is of format 1.
const catalogFormat = 1

func openBoltCatalog(path string) (*boltCatalog, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: boltTimeout})
	if err != nil {
		return nil, err
	}
	first := false
	err = db.Update(func(tx *bolt.Tx) error {
		isNew := tx.Bucket(bktBuckets) == nil
		if _, err := tx.CreateBucketIfNotExists(bktBuckets); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bktCatalogMeta)
		if err != nil {
			return err
		}
		if isNew {
			if err := meta.Put(firstStartKey, []byte{1}); err != nil {
				return err
			}
		}
		first = meta.Get(firstStartKey) != nil
		v := meta.Get(catalogFormatKey)
		if v == nil {
			return meta.Put(catalogFormatKey, binary.BigEndian.AppendUint32(nil, catalogFormat))
		}
		if len(v) != 4 {
			return fmt.Errorf("%w: %s: corrupt format record %x", ErrStorage, path, v)
		}
		if f := binary.BigEndian.Uint32(v); f > catalogFormat {
			return fmt.Errorf("%w: %s was written by a newer Mayfly (data directory format %d; this version reads format %d or older): run that version or a later one on it",
				ErrNewerFormat, path, f, catalogFormat)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &boltCatalog{db: db, first: first}, nil
}

func (c *boltCatalog) firstStart() bool { return c.first }

func (c *boltCatalog) endFirstStart() error {
	if !c.first {
		return nil
	}
	err := c.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bktCatalogMeta).Delete(firstStartKey) })
	if err == nil {
		c.first = false
	}
	return err
}

func (c *boltCatalog) entries() ([]catalogEntry, error) {
	var entries []catalogEntry
	err := c.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktBuckets).ForEach(func(_, v []byte) error {
			var ce catalogEntry
			if err := json.Unmarshal(v, &ce); err != nil {
				return fmt.Errorf("engine: corrupt catalog entry: %w", err)
			}
			entries = append(entries, ce)
			return nil
		})
	})
	return entries, err
}

func (c *boltCatalog) put(ce catalogEntry) error {
	v, err := json.Marshal(ce)
	if err != nil {
		return err
	}
	return c.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktBuckets).Put([]byte(ce.Settings.Name), v)
	})
}

func (c *boltCatalog) remove(name string) error {
	return c.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bktBuckets).Delete([]byte(name)) })
}

func (c *boltCatalog) close() error { return c.db.Close() }
