package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// The overhead --memory-overhead-mb auto (the default) adds to what the
// buckets hold: a fixed part and a share of it. The overhead is what the
// server's Go memory holds beside its buckets' documents: the documents'
// own slack (chunks grown, versions readers still hold), a view build's
// batches and mapped rows, JavaScript runtimes, search indexes,
// connections, and the runtime's own (stacks, metadata, the collector's
// overshoot while it marks). Chosen by measurement (BENCHMARKS.md, "The
// memory overhead's default, measured"): a 1,000,000-document bucket with
// a 256 MiB quota held 330-400 MiB of live heap after its load and its
// view build and 500-770 MiB at the build's write-backs, and the engine's
// heap runs 1.5-1.8 times its mem_used during a load. An overhead of an
// eighth of the quotas (a limit 70-90 MiB above that live heap) kept the
// collector running and made the build twice as slow as the old fixed
// 1 GiB; half of the quotas builds within the noise of it and lowers
// the load's peak. What a burst leaves free is given back once the server
// goes quiet (idlemem.go), so a generous limit no longer leaves it
// resident.
const (
	autoOverheadBase  = 128 << 20
	autoOverheadShare = 2 // half of what the buckets hold
)

// autoMemoryOverhead returns the overhead --memory-overhead-mb auto adds
// to buckets that hold held bytes (each the larger of its quota and its
// mem_used).
func autoMemoryOverhead(held int64) int64 {
	return autoOverheadBase + held/autoOverheadShare
}

// memLimit keeps Go's soft memory limit (debug.SetMemoryLimit) at the sum of
// the buckets' memory quotas plus an overhead (stated, or scaled with the
// buckets: autoMemoryOverhead) and a fixed part (the view page cache), so that the collector
// works harder as the process nears what its buckets are allowed, rather than
// letting the heap grow to twice the live data. It is an engine service:
// attached buckets count, and a bucket's settings changes (ramQuotaMB)
// update it. A couchbase bucket ejects only values (keys and metadata stay
// in memory), so it can hold more than its quota; a bucket counts
// max(quota, mem_used), sampled by refresh, so that the limit never
// sits below what the buckets hold (the collector would run without end).
//
// A bucket's store may hold memory of its own beside mem_used (a pebble
// store's block cache and memtables, engine.Bucket.StorageMemBudget). pebble
// allocates it with C's malloc in a cgo build, outside the Go runtime and so
// outside what its memory limit governs: adding it there would only let the
// heap grow by as much. In a build without cgo pebble allocates it in the
// Go heap, and the limit adds each bucket's budget (storageInHeap).
type memLimit struct {
	overhead      int64                   // bytes, beside the buckets' (and the automatic overhead)
	auto          bool                    // add autoMemoryOverhead of what the buckets hold
	storageInHeap bool                    // the stores' own memory is in the Go heap: count it
	set           func(limit int64) int64 // debug.SetMemoryLimit
	readLive      func() uint64           // the live heap (readLiveHeap), for the auto limit's floor
	log           *slog.Logger

	mu      sync.Mutex
	buckets map[string]*limitedBucket
	limit   int64 // last set
	lives   liveWindow
	stopped bool // restore ran: the limit is no longer this memLimit's
}

// limitedBucket is what memLimit keeps of one bucket.
type limitedBucket struct {
	b       *engine.Bucket
	quota   int64 // bytes
	storage int64 // the store's own memory at most (StorageMemBudget), bytes
	unwatch func()
}

// newMemLimit returns a memLimit of the buckets plus overheadMB, plus
// autoMemoryOverhead of the buckets if auto.
func newMemLimit(overheadMB int64, auto bool, set func(int64) int64, log *slog.Logger) *memLimit {
	return &memLimit{overhead: overheadMB << 20, auto: auto, storageInHeap: storageMemInGoHeap, set: set, readLive: readLiveHeap, log: log, buckets: make(map[string]*limitedBucket)}
}

// AttachBucket counts b's quota and follows its changes.
func (m *memLimit) AttachBucket(_ context.Context, b *engine.Bucket) error {
	lb := &limitedBucket{b: b, quota: b.Settings().RAMQuotaMB << 20, storage: b.StorageMemBudget()}
	lb.unwatch = b.WatchSettings(func(_, updated engine.BucketSettings) {
		m.mu.Lock()
		lb.quota = updated.RAMQuotaMB << 20
		m.applyLocked()
		m.mu.Unlock()
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buckets[b.Name()] = lb
	m.applyLocked()
	return nil
}

// DetachBucket stops counting b.
func (m *memLimit) DetachBucket(_ context.Context, b *engine.Bucket, _ bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if lb, ok := m.buckets[b.Name()]; ok && lb.b == b {
		lb.unwatch()
		delete(m.buckets, b.Name())
		m.applyLocked()
	}
	return nil
}

// refresh re-reads the buckets' mem_used every interval until ctx ends,
// and the live heap every liveFloorInterval (the automatic limit's floor).
func (m *memLimit) refresh(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	live := time.NewTicker(liveFloorInterval)
	defer live.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-live.C:
			if !m.auto {
				continue
			}
			m.mu.Lock()
			m.lives.note(m.readLive())
			m.applyLocked()
			m.mu.Unlock()
			continue
		}
		m.mu.Lock()
		m.applyLocked()
		m.mu.Unlock()
	}
}

// total returns the limit the buckets call for now.
//
// REQUIRES: m.mu held.
func (m *memLimit) totalLocked() int64 {
	var held, storage int64
	for _, lb := range m.buckets {
		held += max(lb.quota, lb.b.Stats().MemUsed)
		if m.storageInHeap {
			storage += lb.storage
		}
	}
	total := held + storage + m.overhead
	if m.auto {
		total += scaledMemoryOverhead(held)
		total = max(total, liveFloor(m.lives.least()))
	}
	return total
}

// restore puts Go's memory limit back to prev and stops m from setting it
// again: the engine detaches its buckets when it closes, after serve has
// restored the limit, and each detach would set it anew.
func (m *memLimit) restore(prev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
	m.set(prev)
}

// applyLocked sets Go's memory limit when the total changed, unless m has
// been stopped.
//
// REQUIRES: m.mu held.
func (m *memLimit) applyLocked() {
	if m.stopped {
		return
	}
	total := m.totalLocked()
	if total == m.limit {
		return
	}
	m.limit = total
	m.set(total)
	m.log.Debug("go memory limit set", "bytes", total, "buckets", len(m.buckets), "overhead_bytes", m.overhead)
}
