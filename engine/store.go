package engine

import (
	"context"
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
// queued and commits them in one batch, while the next batch fills. A
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
	log      *slog.Logger
	onCommit func([]record) // publishes a committed batch
	onFail   func()         // forgets what the failed commits held
	probeGap time.Duration  // time between probes of a failed store
	done     *commitBatch   // an empty, committed batch: what an inline commit returns

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

// newStore starts the group commit of st (nothing for a storage that is not
// durable). onCommit publishes each committed batch; onFail forgets what
// failed commits held.
func newStore(st storage, o *Options, onCommit func([]record), onFail func()) *store {
	s := &store{st: st, inline: !st.durable(), maxBatch: o.MaxBatchSize, log: o.Logger, onCommit: onCommit, onFail: onFail, probeGap: probeInterval,
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
	if s.inline {
		if err := s.st.commitOne(r); err != nil {
			s.commitFailed.Add(1)
			return nil, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		return s.done, nil
	}
	r.enc = s.st.encode(r) // in the writer, before the batch: see storage.encode
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
			if err := s.st.commit(cb.recs); err != nil {
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
		if !s.inline {
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
		close(s.kick)
		close(s.quit)
	}
	<-s.stopped
	s.probeDone.Wait()
}

// closeClean flushes what is queued, marks the storage cleanly closed (when
// every commit succeeded) and closes it.
func (s *store) closeClean() error {
	s.stop()
	return s.st.close(s.failure() == nil)
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
