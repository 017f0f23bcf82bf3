package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// commitBatch is a group of records committed together.
type commitBatch struct {
	recs []record
	done chan struct{}
	err  error
	// urgent says someone waits for the batch (a durable write, Sync): the
	// flusher commits it at once instead of gathering writes for up to the
	// flush interval. Guarded by store.mu.
	urgent bool
	born   time.Time // when its first record was queued
	// acked is the bytes (recordBytes) of its records acknowledged from
	// memory, counted in store.mu.acked until the batch's commit ends.
	// Guarded by store.mu.
	acked int64
}

// wait blocks until the batch is committed. If ctx ends first the write may
// still be committed later.
func (cb *commitBatch) wait(ctx context.Context) error {
	if cb == nil {
		return nil
	}
	if cb.committed() {
		// The usual answer for an inline store's batch, without the
		// select below, which locks the batch's channel (one that every
		// writer of the bucket shares).
		return cb.err
	}
	select {
	case <-cb.done:
		return cb.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// committed reports whether the batch's commit has ended. The flusher ends a
// batch only after it took the lock of every partition the batch holds a
// record of (to publish it, or to drop it on failure), so to a writer that
// holds its partition's lock, committed means that the store committed its
// record inline, and the writer publishes it.
func (cb *commitBatch) committed() bool {
	select {
	case <-cb.done:
		return true
	default:
		return false
	}
}

// store takes a bucket's mutations to its storage. For a durable storage it
// runs a group-commit flusher: one goroutine takes whatever mutations are
// queued and commits them in one batch, while the next batch fills. A batch
// that only holds writes acknowledged from memory (durability none or
// majority) waits up to the flush interval for more before its commit
// starts; one that a writer waits for is committed at once. A
// storage that is not durable is committed inline, by the writer, and the
// writer publishes its mutation at once (see queueLocked): nothing waits for
// a flusher that would only hand the write back.
//
// A queued commit that fails fails the store: the batch's writers and every
// writer queued behind it get the error (wrapping ErrStorage and the cause),
// later writes are refused at once with it, and onFail runs so that nothing
// the failed commits held stays visible. A probe then tries a small commit
// every probeInterval; once one succeeds (space was freed), writes are taken
// again. An inline commit that fails fails its own write only (nothing is
// queued behind it).
type store struct {
	st       storage
	inline   bool // commit in the writer: the storage is not durable
	maxBatch int
	maxAcked int64         // Options.MaxAckedBytes
	interval time.Duration // Options.FlushInterval
	log      *slog.Logger
	onCommit func([]record) // publishes a committed batch
	onFail   func()         // forgets what the failed commits held
	probeGap time.Duration  // time between probes of a failed store
	done     *commitBatch   // an empty, committed batch: what an inline commit returns
	// beforeCommit, when set (Options.CommitHook), is called before each
	// group commit; set before the first write.
	beforeCommit func()

	mu struct {
		sync.Mutex
		queue    []*commitBatch
		inflight *commitBatch // being committed now
		closed   bool
		failed   error // non-nil while the store refuses writes
		probing  bool  // the recovery probe runs
		// spare holds committed batches' record slices, emptied, for the
		// next batches: a batch's records would otherwise be grown by
		// append from nothing, about two records' bytes allocated per
		// write. It keeps two: the next batch is usually opened while
		// the one before it is in flight, before that one's slice is
		// back, so one spare served every other batch.
		spare [2][]record
		// acked is the bytes (recordBytes) of the queued and in-flight
		// records whose writers were answered before their commit: at
		// most maxAcked (enqueueAt).
		acked int64
	}
	// ackedPeak is the largest mu.acked has been, ackedWaits the writes
	// acknowledged from memory that waited for their commit because
	// mu.acked was full (a test's counters).
	ackedPeak    atomic.Int64
	ackedWaits   atomic.Int64
	commitFailed atomic.Int64 // commits that failed (ep_item_commit_failed)
	commitNum    atomic.Int64 // commits made (ep_commit_num)
	commitLast   atomic.Int64 // duration of the last commit, ns (ep_commit_time)
	commitTotal  atomic.Int64 // duration of every commit, ns (ep_commit_time_total)
	kick         chan struct{}
	stopped      chan struct{}
	quit         chan struct{} // closed by stop: ends the probe
	probeDone    sync.WaitGroup
}

// spareMax is the largest record slice a store keeps for its next batch
// (96 bytes a record): a bulk load's large batches are left to the collector.
const spareMax = 4096

// probeInterval is how often a failed store tries to write again.
const probeInterval = time.Second

// newStore starts the group commit of st (nothing for a storage that is not
// durable). onCommit publishes each committed batch; onFail forgets what
// failed commits held.
func newStore(st storage, o *Options, onCommit func([]record), onFail func()) *store {
	s := &store{st: st, inline: !st.durable(), maxBatch: o.MaxBatchSize, maxAcked: o.MaxAckedBytes, interval: o.FlushInterval, log: o.Logger, onCommit: onCommit, onFail: onFail, probeGap: probeInterval,
		done: &commitBatch{done: make(chan struct{})}, kick: make(chan struct{}, 1), stopped: make(chan struct{}), quit: make(chan struct{})}
	close(s.done.done)
	if s.inline {
		close(s.stopped)
	} else {
		go s.flushLoop()
	}
	return s
}

// enqueue queues a record for the next commit and returns the batch to wait on.
// Callers enqueue while holding their partition's lock, so records of one key
// reach disk in order. An inline store commits r at once and returns a
// committed batch: the caller publishes r itself (the flusher could not
// take the partition lock the caller holds).
func (s *store) enqueue(r record) (*commitBatch, error) {
	cb, _, err := s.enqueueAt(r, true, false)
	return cb, err
}

// enqueueAt is enqueue for a write whose writer waits for disk (persist) or
// is acknowledged from memory (not persist). It reports whether the writer
// must wait for the batch all the same: always when persist, and, so that
// writes acknowledged from memory cannot outrun the disk without bound,
// whenever a whole batch (MaxBatchSize records) is already queued or the
// bytes acknowledged from memory and not on disk yet would pass
// MaxAckedBytes with this one. With refuseWait, a write acknowledged from
// memory that would have to wait so is not queued: ErrWouldBlock, for a
// writer that must not wait (WriteOptions.Resident).
func (s *store) enqueueAt(r record, persist, refuseWait bool) (*commitBatch, bool, error) {
	if s.inline {
		if err := s.st.commitOne(r); err != nil {
			s.commitFailed.Add(1)
			return nil, true, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		return s.done, true, nil
	}
	r.enc = s.st.encode(r) // in the writer, before the batch: see storage.encode
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, true, ErrClosed
	}
	if s.mu.failed != nil {
		return nil, true, s.mu.failed
	}
	// A write acknowledged from memory waits for its commit when the queue
	// is past one batch (or r fills it), or when its bytes would take the
	// writes acknowledged from memory past MaxAckedBytes.
	size := recordBytes(&r)
	batchWait := persist || s.queueFullLocked()
	bytesWait := !batchWait && s.mu.acked+size > s.maxAcked
	if refuseWait && !persist && (batchWait || bytesWait) {
		return nil, true, ErrWouldBlock
	}
	n := len(s.mu.queue)
	kick := n == 0 // a new batch: the flusher starts its clock
	if n == 0 || len(s.mu.queue[n-1].recs) >= s.maxBatch {
		s.mu.queue = append(s.mu.queue, &commitBatch{recs: s.takeSpareLocked(), done: make(chan struct{}), born: time.Now()}) // wall clock: the flush interval is real time, not the expiry clock
		n++
		kick = true
	}
	cb := s.mu.queue[n-1]
	cb.recs = append(cb.recs, r)
	wait := batchWait || bytesWait
	switch {
	case bytesWait:
		s.ackedWaits.Add(1)
	case !wait:
		s.mu.acked += size
		cb.acked += size
		if s.mu.acked > s.ackedPeak.Load() {
			s.ackedPeak.Store(s.mu.acked) // under s.mu: no other writer
		}
	}
	if wait && !cb.urgent {
		cb.urgent = true
		kick = true
	}
	if kick {
		s.kickLocked()
	}
	return cb, wait, nil
}

// queueFullLocked reports whether a record queued now would find more than
// one batch in the queue, or fill its batch: a write acknowledged from
// memory then waits for its commit (enqueueAt).
//
// REQUIRES: s.mu held.
func (s *store) queueFullLocked() bool {
	n, fill := len(s.mu.queue), 0
	if n == 0 || len(s.mu.queue[n-1].recs) >= s.maxBatch {
		n++ // the record opens a batch
	} else {
		fill = len(s.mu.queue[n-1].recs)
	}
	return n > 1 || fill+1 >= s.maxBatch
}

// recordOverhead is what a queued write holds beside its key and value: the
// record, its Document and its entries in the partition's pending and acked
// maps, about.
const recordOverhead = 256

// recordBytes is what r holds in memory until its commit, about: its key,
// its value and recordOverhead.
func recordBytes(r *record) int64 {
	n := int64(len(r.key.key) + recordOverhead)
	if r.doc != nil {
		n += int64(len(r.doc.Value))
	}
	return n
}

// takeSpareLocked returns a spare record slice for a new batch (nil when
// none is kept).
//
// REQUIRES: s.mu held.
func (s *store) takeSpareLocked() []record {
	for i, r := range s.mu.spare {
		if r != nil {
			s.mu.spare[i] = nil
			return r
		}
	}
	return nil
}

// putSpareLocked keeps recs, emptied, for a later batch, in place of the
// smaller of the spares when both are taken.
//
// REQUIRES: s.mu held.
func (s *store) putSpareLocked(recs []record) {
	i := 0
	if cap(s.mu.spare[1]) < cap(s.mu.spare[0]) {
		i = 1
	}
	if cap(recs) > cap(s.mu.spare[i]) {
		s.mu.spare[i] = recs
	}
}

// kickLocked wakes the flusher.
//
// REQUIRES: s.mu held, the store not closed.
func (s *store) kickLocked() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// flushNow returns the batch that will be committed last of those queued or
// in flight now (nil when nothing waits for disk), and has the queued ones
// committed at once, without waiting for the flush interval.
func (s *store) flushNow() *commitBatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.mu.queue)
	if n == 0 {
		return s.mu.inflight
	}
	cb := s.mu.queue[n-1]
	if !cb.urgent && !s.mu.closed {
		cb.urgent = true
		s.kickLocked()
	}
	return cb
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
// committed included.
func (s *store) pending() int {
	queued, todo := s.backlog()
	return queued + todo
}

// backlog returns how many mutations are queued for the next commits
// (ep_queue_size) and how many the commit in flight is writing
// (ep_flusher_todo).
func (s *store) backlog() (queued, todo int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.inflight != nil {
		todo = len(s.mu.inflight.recs)
	}
	for _, cb := range s.mu.queue {
		queued += len(cb.recs)
	}
	return queued, todo
}

// flushLoop commits the queued batches, in order, one at a time. A lone
// batch nobody waits for is left to gather writes until it is
// FlushInterval old; a stop commits everything queued at once.
func (s *store) flushLoop() {
	defer close(s.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		s.mu.Lock()
		if len(s.mu.queue) == 0 {
			closed := s.mu.closed
			s.mu.Unlock()
			if closed {
				return
			}
			<-s.kick // closed by stop: the loop then finds closed set
			continue
		}
		cb := s.mu.queue[0]
		if !cb.urgent && !s.mu.closed && len(s.mu.queue) == 1 {
			if wait := s.interval - time.Since(cb.born); wait > 0 {
				s.mu.Unlock()
				timer.Reset(wait)
				select {
				case <-s.kick:
				case <-timer.C:
				}
				timer.Stop()
				continue
			}
		}
		s.mu.queue = s.mu.queue[1:]
		s.mu.inflight = cb
		s.mu.Unlock()
		if s.beforeCommit != nil {
			s.beforeCommit()
		}
		start := time.Now() // wall clock: ep_commit_time
		if err := s.st.commit(cb.recs); err != nil {
			s.fail(cb, err)
			continue
		}
		took := time.Since(start)
		s.commitNum.Add(1)
		s.commitLast.Store(int64(took))
		s.commitTotal.Add(int64(took))
		s.onCommit(cb.recs)
		recs := cb.recs
		clear(recs) // the documents are the table's now
		s.mu.Lock()
		s.mu.inflight = nil
		s.mu.acked -= cb.acked
		cb.recs = nil // its writers read only done and err
		if cap(recs) <= spareMax {
			s.putSpareLocked(recs[:0])
		}
		s.mu.Unlock()
		close(cb.done)
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
	s.mu.acked = 0 // the failed batches' writes are forgotten (onFail)
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
	t := time.NewTicker(s.probeGap)
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
		if err := s.st.probe(); err != nil {
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

// close flushes what is queued and closes the storage, without marking it
// cleanly closed.
func (s *store) close() error {
	s.stop()
	return s.st.close(false)
}

// stop flushes what is queued and stops the flusher and the probe.
func (s *store) stop() {
	s.mu.Lock()
	already := s.mu.closed
	s.mu.closed = true
	s.mu.Unlock()
	if !already {
		close(s.kick)
		close(s.quit)
	}
	<-s.stopped
	s.probeDone.Wait()
}

// closeClean flushes what is queued, records cas, the highest CAS the
// bucket handed out (storage.raiseCAS), marks the storage cleanly closed
// (when every commit succeeded and cas is recorded) and closes it.
func (s *store) closeClean(cas uint64) error {
	s.stop()
	if s.failure() != nil {
		return s.st.close(false)
	}
	if err := s.st.raiseCAS(cas); err != nil {
		// Not clean: the bucket could open below a CAS handed out.
		return errors.Join(fmt.Errorf("%w: record the CAS: %w", ErrStorage, err), s.st.close(false))
	}
	return s.st.close(true)
}

// putSys writes (or, with nil value, deletes) a system document durably.
func (s *store) putSys(key string, value []byte) error {
	if err := s.failure(); err != nil {
		return err
	}
	if err := s.st.putSys(key, value); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

// putConsumers durably replaces the list of registered consumers.
func (s *store) putConsumers(names []string) error {
	if err := s.st.putConsumers(names); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}
