package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
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

// Keys of bktMeta besides "cas".
var (
	metaConsumers = []byte("consumers") // JSON list of registered change-feed consumers
	metaFailover  = []byte("failover")  // JSON failover log, newest first
	metaClean     = []byte("clean")     // present: the file was closed cleanly
	metaProbe     = []byte("probe")     // written by the recovery probe of a failed store
)

// record is one mutation on its way to disk.
type record struct {
	doc     *Document // the version to publish once committed (nil for a purge)
	purge   bool      // removes the key's tombstone (metadata purge)
	seqOnly bool      // only the sequence number and CAS (a lazily persisted expiration)
	key     docKey
	enc     []byte // encoded document; nil removes the key (tombstone purge)
	oldExp  int64  // expiry-index entry to remove, 0 for none
	newExp  int64  // expiry-index entry to add, 0 for none
	part    uint16
	seq     uint64
	cas     uint64
}

// commitBatch is a group of records written in one bbolt transaction.
type commitBatch struct {
	recs []record
	done chan struct{}
	err  error
}

// wait blocks until the batch is on disk. If ctx ends first the write may
// still reach disk later.
func (cb *commitBatch) wait(ctx context.Context) error {
	if cb == nil {
		return nil
	}
	select {
	case <-cb.done:
		return cb.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// store persists one bucket in a bbolt file with a group-commit flusher: one
// goroutine takes whatever mutations are queued and writes them in one
// transaction, while the next batch fills.
//
// A commit that fails fails the store: the batch's writers and every writer
// queued behind it get the error (wrapping ErrStorage and the cause), later
// writes are refused at once with it, and onFail runs so that nothing the
// failed commits held stays visible. A probe then tries a small commit every
// probeInterval; once one succeeds (space was freed), writes are taken again.
type store struct {
	db       *bolt.DB
	maxBatch int
	log      *slog.Logger
	onCommit func([]record) // publishes a committed batch
	onFail   func()         // forgets what the failed commits held

	mu struct {
		sync.Mutex
		queue    []*commitBatch
		inflight *commitBatch // being committed now
		closed   bool
		failed   error // non-nil while the store refuses writes
		probing  bool  // the recovery probe runs
	}
	commitFailed atomic.Int64 // commits that failed (ep_item_commit_failed)
	kick         chan struct{}
	stopped      chan struct{}
	quit         chan struct{} // closed by stop: ends the probe
	probeDone    sync.WaitGroup
}

// probeInterval is how often a failed store tries to write again.
const probeInterval = time.Second

func openStore(path string, o *Options) (*store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: boltTimeout, NoFreelistSync: true, NoSync: o.NoSync})
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
	s := &store{db: db, maxBatch: o.MaxBatchSize, log: o.Logger, kick: make(chan struct{}, 1), stopped: make(chan struct{}), quit: make(chan struct{}),
		onCommit: func([]record) {}, onFail: func() {}}
	// The flusher reads onCommit and onFail only after a write was queued:
	// the opener sets them before it lets writes in.
	go s.flushLoop()
	return s, nil
}

// enqueue queues a record for the next commit and returns the batch to wait on.
// Callers enqueue while holding their partition's lock, so records of one key
// reach disk in order.
func (s *store) enqueue(r record) (*commitBatch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	if s.mu.failed != nil {
		return nil, s.mu.failed
	}
	n := len(s.mu.queue)
	if n == 0 || len(s.mu.queue[n-1].recs) >= s.maxBatch {
		s.mu.queue = append(s.mu.queue, &commitBatch{done: make(chan struct{})})
		n++
	}
	cb := s.mu.queue[n-1]
	cb.recs = append(cb.recs, r)
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return cb, nil
}

// last returns the batch that will be committed last of those queued or in
// flight now, or nil when nothing waits for disk.
func (s *store) last() *commitBatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.mu.queue); n > 0 {
		return s.mu.queue[n-1]
	}
	return s.mu.inflight
}

// pending returns how many mutations wait for disk, the batch being
// committed included (ep_queue_size).
func (s *store) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	if s.mu.inflight != nil {
		n = len(s.mu.inflight.recs)
	}
	for _, cb := range s.mu.queue {
		n += len(cb.recs)
	}
	return n
}

func (s *store) flushLoop() {
	defer close(s.stopped)
	for range s.kick {
		for {
			s.mu.Lock()
			if len(s.mu.queue) == 0 {
				closed := s.mu.closed
				s.mu.Unlock()
				if closed {
					return
				}
				break
			}
			cb := s.mu.queue[0]
			s.mu.queue = s.mu.queue[1:]
			s.mu.inflight = cb
			s.mu.Unlock()
			if err := s.commit(cb.recs); err != nil {
				s.fail(cb, err)
				continue
			}
			s.onCommit(cb.recs)
			s.mu.Lock()
			s.mu.inflight = nil
			s.mu.Unlock()
			close(cb.done)
		}
	}
}

// fail fails cb, whose commit returned err, and every batch queued behind it,
// and refuses writes until the probe finds the disk writable again.
func (s *store) fail(cb *commitBatch, err error) {
	err = fmt.Errorf("%w: %w", ErrStorage, err)
	s.commitFailed.Add(1)
	s.mu.Lock()
	s.mu.failed = err
	rest := s.mu.queue
	s.mu.queue = nil
	s.mu.inflight = nil
	startProbe := !s.mu.probing && !s.mu.closed
	s.mu.probing = s.mu.probing || startProbe
	s.mu.Unlock()
	// No write can be queued now: what is pending belongs to the failed
	// batches alone.
	s.onFail()
	n := len(cb.recs)
	for _, q := range append([]*commitBatch{cb}, rest...) {
		if q != cb {
			n += len(q.recs)
		}
		q.err = err
		close(q.done)
	}
	s.log.Error("commit failed: writes are refused until the disk takes writes again; reads go on", "err", err, "writes_failed", n)
	if startProbe {
		s.probeDone.Add(1)
		go s.probe()
	}
}

// probe tries a small commit every probeInterval until one succeeds, then
// lets writes in again; it ends early when the store stops.
func (s *store) probe() {
	defer s.probeDone.Done()
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			s.mu.Lock()
			s.mu.probing = false
			s.mu.Unlock()
			return
		case <-t.C:
		}
		err := s.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bktMeta).Put(metaProbe, []byte{1})
		})
		if err != nil {
			continue
		}
		s.mu.Lock()
		s.mu.failed = nil
		s.mu.probing = false
		s.mu.Unlock()
		s.log.Info("the disk takes writes again: writes resume")
		return
	}
}

// failure returns the error that fails the store's writes, or nil.
func (s *store) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.failed
}

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

func (s *store) commit(recs []record) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		docs, exp, vbseq, meta := tx.Bucket(bktDocs), tx.Bucket(bktExp), tx.Bucket(bktVBSeq), tx.Bucket(bktMeta)
		seqs := make(map[uint16]uint64)
		var maxCAS uint64
		docOps := make([]kvOp, 0, len(recs))
		var expOps []kvOp
		for _, r := range recs {
			// A purge removes an old tombstone: its sequence number is
			// not the partition's newest.
			if !r.purge && r.seq > seqs[r.part] {
				seqs[r.part] = r.seq
			}
			maxCAS = max(maxCAS, r.cas)
			if r.seqOnly {
				continue
			}
			docOps = append(docOps, kvOp{key: docDBKey(r.key), val: r.enc, del: r.purge, ord: len(docOps)})
			if r.oldExp != r.newExp {
				if r.oldExp != 0 {
					expOps = append(expOps, kvOp{key: expDBKey(r.oldExp, r.key), del: true, ord: len(expOps)})
				}
				if r.newExp != 0 {
					expOps = append(expOps, kvOp{key: expDBKey(r.newExp, r.key), ord: len(expOps)})
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
		if v := meta.Get([]byte("cas")); len(v) == 8 && binary.BigEndian.Uint64(v) >= maxCAS {
			maxCAS = 0
		}
		if maxCAS != 0 {
			if err := meta.Put([]byte("cas"), binary.BigEndian.AppendUint64(nil, maxCAS)); err != nil {
				return err
			}
		}
		return nil
	})
}

// close flushes what is queued and closes the file.
func (s *store) close() error {
	s.stop()
	return s.db.Close()
}

// stop flushes what is queued and stops the flusher and the probe.
func (s *store) stop() {
	s.mu.Lock()
	already := s.mu.closed
	s.mu.closed = true
	s.mu.Unlock()
	if !already {
		select {
		case s.kick <- struct{}{}:
		default:
		}
		close(s.kick)
		close(s.quit)
	}
	<-s.stopped
	s.probeDone.Wait()
}

// closeClean flushes what is queued, marks the file cleanly closed (when
// every commit succeeded) and closes it.
func (s *store) closeClean() error {
	s.stop()
	err := s.failure()
	if err == nil {
		err = s.putMeta(metaClean, []byte{1})
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// putSys writes (or, with nil value, deletes) a system document durably.
func (s *store) putSys(key string, value []byte) error {
	if err := s.failure(); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktSys)
		if value == nil {
			return b.Delete([]byte(key))
		}
		return b.Put([]byte(key), value)
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

// putMeta writes (or, with a nil value, deletes) a key of the meta bucket
// durably.
func (s *store) putMeta(key, value []byte) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktMeta)
		if value == nil {
			return b.Delete(key)
		}
		return b.Put(key, value)
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

// loaded is what a store held when opened.
type loaded struct {
	consumers []string
	history   []FailoverEntry
	clean     bool
	docs      []*Document
	seqs      map[uint16]uint64
	exps      []expItem
	sys       map[string][]byte
	maxCAS    uint64
}

func (s *store) load() (*loaded, error) {
	l := &loaded{seqs: make(map[uint16]uint64), sys: make(map[string][]byte)}
	err := s.db.View(func(tx *bolt.Tx) error {
		err := tx.Bucket(bktDocs).ForEach(func(k, v []byte) error {
			if len(k) < 5 {
				return fmt.Errorf("engine: corrupt document key %x", k)
			}
			d, err := decodeDoc(CollectionID(binary.BigEndian.Uint32(k)), string(k[4:]), v)
			if err != nil {
				return err
			}
			l.docs = append(l.docs, d)
			return nil
		})
		if err != nil {
			return err
		}
		err = tx.Bucket(bktExp).ForEach(func(k, _ []byte) error {
			if len(k) < 13 {
				return fmt.Errorf("engine: corrupt expiry key %x", k)
			}
			l.exps = append(l.exps, expItem{
				exp: int64(binary.BigEndian.Uint64(k)),
				key: docKey{cid: CollectionID(binary.BigEndian.Uint32(k[8:])), key: string(k[12:])},
			})
			return nil
		})
		if err != nil {
			return err
		}
		err = tx.Bucket(bktVBSeq).ForEach(func(k, v []byte) error {
			if len(k) == 2 && len(v) == 8 {
				l.seqs[binary.BigEndian.Uint16(k)] = binary.BigEndian.Uint64(v)
			}
			return nil
		})
		if err != nil {
			return err
		}
		meta := tx.Bucket(bktMeta)
		if v := meta.Get([]byte("cas")); len(v) == 8 {
			l.maxCAS = binary.BigEndian.Uint64(v)
		}
		if v := meta.Get(metaConsumers); v != nil {
			if err := json.Unmarshal(v, &l.consumers); err != nil {
				return fmt.Errorf("engine: corrupt consumer list: %w", err)
			}
		}
		if v := meta.Get(metaFailover); v != nil {
			h, err := decodeHistory(v)
			if err != nil {
				return err
			}
			l.history = h
		}
		l.clean = meta.Get(metaClean) != nil
		return tx.Bucket(bktSys).ForEach(func(k, v []byte) error {
			l.sys[string(k)] = append([]byte(nil), v...)
			return nil
		})
	})
	return l, err
}
