package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Warm-up, as Couchbase's ep-engine does it: a bucket opens its store, takes
// its sequence numbers, CAS and history from the store's metadata (cheap),
// and is open; its documents then load into memory in the background, while
// it serves:
//
//   - a read of a key not loaded yet reads the store (fetchMissLocked): a
//     key the store holds is never a false "not found";
//   - a write builds on the stored version, which it loads first, so CAS,
//     revision and expiry stay right (Couchbase answers writes with a
//     temporary failure until its keys are loaded; Mayfly need not, because
//     its store holds keys and values together and a key's read costs one
//     lookup);
//   - the loader skips every key already in memory: a version written, or
//     loaded by a read or a write, during the warm-up is newer than (or the
//     same as) the one its scan holds, so the loader never overwrites it;
//   - what needs every item waits for the load (WaitWarm): the change feed
//     and therefore view and search catch-ups, the expiry pager, the
//     metadata purge, listings, Flush, collection drops and TTL
//     re-evaluation, Check. Counters (curr_items, mem_used) count what is
//     loaded so far, and Stats says the warm-up is running.
//
// The phases, named as Couchbase's ep_warmup_state names them: initialize
// (the store opens), estimating database item count, loading keys (a
// couchbase bucket's keys, without values, into its Bloom filters, so that
// a read or write of a key not loaded yet that the store does not hold
// costs no read: bloom.go), loading k/v pairs (keys and values come
// together from the store), done. A fullEviction bucket's warm-up is the
// loading keys phase alone, which also counts the keys as items out of
// memory and loads none (warmkeys.go).

// Warm-up states (ep_warmup_state).
const (
	WarmupInitialize = "initialize"
	WarmupEstimating = "estimating database item count"
	// WarmupKeys reads the store's keys, without their values, into the
	// partitions' Bloom filters (bloom.go): from then on, a read of a key
	// that is not loaded yet and that the filter rules out reads nothing.
	WarmupKeys    = "loading keys"
	WarmupLoading = "loading k/v pairs"
	WarmupDone    = "done"
	// WarmupRetrying is Mayfly's own: a background load failed and waits
	// to be tried again (WarmupStats.Error says why).
	WarmupRetrying = "retrying after an error"
)

// A background warm-up whose load fails tries it again, after a back-off
// that doubles from warmupRetryFirst up to warmupRetryMax, until it succeeds
// or the bucket closes: what waits for the warm-up (the feed, the pager,
// the purge, listings) then goes on, rather than waiting for ever. A failed
// load is undone by nothing: the next one skips the keys already in memory.
const (
	warmupRetryFirst = time.Second
	warmupRetryMax   = time.Minute
)

// ErrWarmup is returned by a call that needs every item of a bucket while
// the bucket still loads them and cannot wait (it has no context): a
// temporary failure, as Couchbase's ETMPFAIL during warm-up.
var ErrWarmup = errors.New("engine: bucket is warming up; retry")

// WarmupStats is a bucket's warm-up progress, as cbstats warmup shows it.
type WarmupStats struct {
	// State is the phase (ep_warmup_state): WarmupInitialize,
	// WarmupEstimating, WarmupLoading or WarmupDone.
	State string
	// Running is whether the warm-up still runs (ep_warmup_thread
	// "running", else "complete").
	Running bool
	// KeyCount and ValueCount count the keys and values loaded so far
	// (ep_warmup_key_count, ep_warmup_value_count): the same number, as
	// keys and values load together, except in a valueOnly bucket whose
	// documents pass its low-water mark, whose warm-up leaves the values
	// past it on disk (ValueCount counts those it loaded), and in a
	// fullEviction bucket, whose warm-up counts keys out of memory
	// (KeyCount) and loads only the items that reads and writes ask for
	// meanwhile (ValueCount).
	KeyCount, ValueCount int64
	// EstimatedKeyCount is the store's estimate of its documents
	// (ep_warmup_estimated_key_count), -1 while unknown.
	EstimatedKeyCount int64
	// Time is how long the warm-up took, or has taken so far, in
	// microseconds (ep_warmup_time).
	Time int64
	// Error is why the warm-up failed: while it runs, why its last load
	// failed (it is retried; "" if none has), once it ended without
	// loading everything, why (the bucket closed).
	Error string
	// Retries counts the loads that failed and were tried again.
	Retries int64
}

// warmup is a bucket's warm-up state.
type warmup struct {
	state     atomic.Value // string: one of the Warmup* states
	keys      atomic.Int64
	keysOnly  atomic.Int64 // of keys, those counted without their value (warmkeys.go; a value left on disk, ejectAtWarmup)
	estimated atomic.Int64
	start     time.Time
	took      atomic.Int64 // µs, once done
	failed    atomic.Value // error, once the load failed
	lastErr   atomic.Value // error: the last failed load, while it is retried
	retries   atomic.Int64
	scan      keyScan // a fullEviction bucket's key-only load (warmkeys.go)
	done      chan struct{}
	cancel    context.CancelFunc
	stopped   sync.WaitGroup
}

// warm reports whether b's documents are all in memory.
func (b *Bucket) warm() bool {
	select {
	case <-b.warmup.done:
		return b.warmup.failed.Load() == nil
	default:
		return false
	}
}

// Warm reports whether the bucket's warm-up is done: every document it
// stores is in memory.
func (b *Bucket) Warm() bool { return b.warm() }

// WaitWarm blocks until the bucket's warm-up is done, ctx ends, or the
// bucket closes (ErrClosed) or failed to load (an error wrapping
// ErrStorage).
func (b *Bucket) WaitWarm(ctx context.Context) error {
	select {
	case <-b.warmup.done:
		if err, _ := b.warmup.failed.Load().(error); err != nil {
			return err
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WarmupStats returns the bucket's warm-up progress.
func (b *Bucket) WarmupStats() WarmupStats {
	w := &b.warmup
	s := WarmupStats{State: w.state.Load().(string), KeyCount: w.keys.Load(), EstimatedKeyCount: w.estimated.Load()}
	s.ValueCount = s.KeyCount - w.keysOnly.Load()
	select {
	case <-w.done:
		s.Time = w.took.Load()
	default:
		s.Running = true
		s.Time = time.Since(w.start).Microseconds()
	}
	if err, _ := w.failed.Load().(error); err != nil {
		s.Error = err.Error()
	} else if err, _ := w.lastErr.Load().(error); err != nil && s.Running {
		s.Error = err.Error()
	}
	s.Retries = w.retries.Load()
	return s
}

// keyEstimator is a store that can tell, cheaply, about how many documents
// it holds.
type keyEstimator interface {
	estimateKeys() (int64, error)
}

// startWarmup loads st's documents into b in the background (in the
// caller's goroutine, and before it returns, when background is false).
// b's store, sequence numbers, CAS and history are set already.
func (b *Bucket) startWarmup(st storage, background bool) {
	w := &b.warmup
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.stopped.Add(1)
	run := func() {
		defer w.stopped.Done()
		err := b.loadDocs(ctx, st)
		if background {
			err = b.retryWarmup(ctx, st, err)
		}
		if err != nil && ctx.Err() == nil {
			b.eng.log.Error("warm-up failed", "bucket", b.name, "err", err)
			w.failed.Store(fmt.Errorf("%w: bucket %s: warm-up: %w", ErrStorage, b.name, err))
		} else if err != nil {
			w.failed.Store(ErrClosed)
		}
		w.took.Store(time.Since(w.start).Microseconds())
		if err == nil {
			w.state.Store(WarmupDone)
			if n := w.keys.Load(); n > 0 {
				b.eng.log.Info("warm-up done", "bucket", b.name, "documents", n, "seconds", float64(w.took.Load())/1e6)
			}
		}
		if err == nil {
			// Memory holds every key: nothing will ask the filters once
			// the warm-up is done (a fullEviction bucket keeps them). A
			// miss until then reads the store.
			b.dropBloom()
		}
		close(w.done)
		if err == nil {
			b.maybeEvict(ctx) // a fullEviction bucket's items may leave memory whole now
		}
		b.changed() // feed waiters see the whole feed now
	}
	if background {
		go run()
	} else {
		run()
	}
}

// retryWarmup tries a background warm-up's failed load (err) again, with
// back-off, until one succeeds (nil) or ctx ends (its error).
func (b *Bucket) retryWarmup(ctx context.Context, st storage, err error) error {
	w := &b.warmup
	delay := warmupRetryFirst
	if d := b.eng.opts.warmupRetryFirst; d > 0 {
		delay = d
	}
	for err != nil && ctx.Err() == nil {
		w.lastErr.Store(fmt.Errorf("%w: %w", ErrStorage, err))
		w.state.Store(WarmupRetrying)
		b.eng.log.Error("warm-up failed; it is retried (reads go to disk meanwhile; the change feed, pager and purge wait)",
			"bucket", b.name, "failures", w.retries.Load()+1, "retry_in", delay, "err", err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		w.retries.Add(1)
		delay = min(2*delay, warmupRetryMax)
		err = b.loadDocs(ctx, st)
	}
	if err == nil && w.retries.Load() > 0 {
		b.eng.log.Info("warm-up succeeded after failures", "bucket", b.name, "retries", w.retries.Load())
	}
	return err
}

// stopWarmup ends a warm-up still running and waits for its loader.
func (b *Bucket) stopWarmup() {
	if b.warmup.cancel != nil {
		b.warmup.cancel()
	}
	b.warmup.stopped.Wait()
}

// loadDocs is the warm-up's loader: it loads every stored document that
// is not in memory yet, removes the documents of dropped collections, and
// rebuilds each partition's change log in sequence order.
func (b *Bucket) loadDocs(ctx context.Context, st storage) error {
	w := &b.warmup
	if est, ok := st.(keyEstimator); ok {
		w.state.Store(WarmupEstimating)
		n, err := est.estimateKeys()
		if err != nil {
			return err
		}
		w.estimated.Store(n)
		b.sizeBloom(n)
	}
	var orphans []record // documents of dropped collections whose removal did not reach disk
	if b.bloom.kept && b.Settings().EvictionPolicy == FullEviction {
		// Keys only: the filters and the counts, no item (warmkeys.go).
		w.state.Store(WarmupKeys)
		var err error
		if orphans, err = b.loadKeys(ctx, st); err != nil {
			return err
		}
		return b.endLoad(ctx, orphans)
	}
	if b.bloom.kept && !b.bloom.ready.Load() {
		w.state.Store(WarmupKeys)
		if err := b.loadBloom(ctx, st); err != nil {
			return err
		}
	}
	w.state.Store(WarmupLoading)
	hook := b.eng.opts.WarmupHook
	var later []*Document
	var n int64
	err := st.scan(func(d *Document) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if int(d.Partition) >= len(b.parts) {
			return fmt.Errorf("document %q in partition %d of %d", d.Key, d.Partition, len(b.parts))
		}
		// A dropped collection's document goes; one of a collection newer
		// than this node's manifest (a replicated write applied before the
		// manifest naming it arrived) stays, as ApplyReplicated keeps it.
		if b.collectionDropped(d.Collection) {
			r := record{purge: true, key: docKey{cid: d.Collection, key: d.Key}, part: d.Partition}
			if !d.Deleted {
				r.oldExp = d.Expiration
			}
			orphans = append(orphans, r)
			return nil
		}
		// The scan holds a read transaction of the store: it must not
		// wait on a partition's lock, whose holder may be reading the
		// store by key behind a commit that waits on this transaction.
		if p := b.parts[d.Partition]; p.mu.TryLock() {
			b.loadDocLocked(p, d)
			p.mu.Unlock()
		} else {
			later = append(later, d)
		}
		n++
		if hook != nil {
			hook(b.name, n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, d := range later {
		p := b.parts[d.Partition]
		p.mu.Lock()
		b.loadDocLocked(p, d)
		p.mu.Unlock()
	}
	return b.endLoad(ctx, orphans)
}

// endLoad ends a warm-up's load: it removes the documents of dropped
// collections the load found (orphans), rebuilds each partition's change
// log in sequence order, and evicts past the high-water mark.
func (b *Bucket) endLoad(ctx context.Context, orphans []record) error {
	if len(orphans) > 0 {
		var last *commitBatch
		for _, r := range orphans {
			p := b.parts[r.part]
			p.mu.Lock()
			cb, err := b.store.enqueue(r)
			p.mu.Unlock()
			if err != nil {
				return fmt.Errorf("remove documents of dropped collections: %w", err)
			}
			last = cb
		}
		if err := last.wait(ctx); err != nil {
			return fmt.Errorf("remove documents of dropped collections: %w", err)
		}
		b.eng.log.Info("removed documents of dropped collections", "bucket", b.name, "documents", len(orphans))
	}
	for _, p := range b.parts {
		p.mu.Lock()
		p.rebuildLogLocked()
		p.mu.Unlock()
	}
	// The load kept values up to the low-water mark, but the metadata of
	// the documents loaded after may have passed the high-water mark.
	b.maybeEvict(ctx)
	return nil
}

// hasCollection reports whether the bucket has a collection of ID cid.
func (b *Bucket) hasCollection(cid CollectionID) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, ok := b.mu.byID[cid]
	return ok
}

// loadDocLocked makes d, read from the store, the committed version of its
// key, unless memory holds one already (written, or loaded, since the store
// was read: it is as new or newer). It reports whether it loaded d. The
// change log is rebuilt when the warm-up ends.
//
// REQUIRES: p.mu held for writing, p d's partition.
func (b *Bucket) loadDocLocked(p *partition, d *Document) bool {
	k := docKey{cid: d.Collection, key: d.Key}
	if p.mu.docs.has(k) {
		return false
	}
	keyOnly := b.ejectAtWarmup(d)
	if keyOnly {
		d = d.withoutValue()
	}
	slot, old := p.mu.docs.put(k, d)
	b.published(p, slot, old, p.mu.docs.version(slot))
	raiseCAS(&b.cas, d.CAS)
	if d.Deleted {
		b.tombs.Add(1)
	} else {
		b.currItems.Add(1)
		if d.Expiration != 0 {
			b.exps.update(k, 0, d.Expiration, d.valueSize())
		}
	}
	b.warmup.keys.Add(1)
	if keyOnly {
		b.warmup.keysOnly.Add(1) // its value stays on disk: not a value loaded
	}
	return true
}

// raiseCAS raises c to at least v.
func raiseCAS(c *atomic.Uint64, v uint64) {
	for {
		cur := c.Load()
		if cur >= v || c.CompareAndSwap(cur, v) {
			return
		}
	}
}
