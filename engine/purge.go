package engine

import (
	"context"
	"fmt"
	"slices"
)

// RegisterConsumer records, durably for a persistent bucket, that the named
// change-feed consumer (a view index, say) depends on seeing every deletion:
// from now on, and after every restart until DropConsumer, no tombstone is
// purged before the consumer has acknowledged it with AckChanges. A consumer
// registered again keeps its acknowledged position.
func (b *Bucket) RegisterConsumer(ctx context.Context, name string) error {
	b.consumersMu.Lock()
	defer b.consumersMu.Unlock()
	if _, ok := b.consumers[name]; ok && b.durableConsumers[name] {
		return nil
	}
	names := append(b.durableNamesLocked(), name)
	if err := b.store.putConsumers(names); err != nil {
		return fmt.Errorf("engine: register consumer %q: %w", name, err)
	}
	b.durableConsumers[name] = true
	if _, ok := b.consumers[name]; !ok {
		b.consumers[name] = make([]uint64, len(b.parts))
	}
	return nil
}

// AckChanges records that the named change-feed consumer (a view index, say)
// has durably consumed every change up to seqs. Tombstones are purged only
// once every registered consumer has passed them.
func (b *Bucket) AckChanges(consumer string, seqs []uint64) error {
	if len(seqs) != len(b.parts) {
		return fmt.Errorf("%w: sequence vector has %d partitions, the bucket %d", ErrInvalidSetting, len(seqs), len(b.parts))
	}
	b.consumersMu.Lock()
	defer b.consumersMu.Unlock()
	b.consumers[consumer] = append([]uint64(nil), seqs...)
	return nil
}

// DropConsumer forgets a change-feed consumer (a deleted design document),
// durably for a persistent bucket.
func (b *Bucket) DropConsumer(ctx context.Context, name string) error {
	b.consumersMu.Lock()
	defer b.consumersMu.Unlock()
	if b.durableConsumers[name] {
		delete(b.durableConsumers, name)
		if err := b.store.putConsumers(b.durableNamesLocked()); err != nil {
			b.durableConsumers[name] = true
			return fmt.Errorf("engine: drop consumer %q: %w", name, err)
		}
	}
	delete(b.durableConsumers, name)
	delete(b.consumers, name)
	return nil
}

// Consumers lists the registered change-feed consumers, sorted.
func (b *Bucket) Consumers() []string {
	b.consumersMu.Lock()
	defer b.consumersMu.Unlock()
	return b.durableNamesLocked()
}

// durableNamesLocked lists the registered consumers, sorted.
//
// REQUIRES: b.consumersMu held.
func (b *Bucket) durableNamesLocked() []string {
	names := make([]string, 0, len(b.durableConsumers))
	for n := range b.durableConsumers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// consumedUpTo returns, per partition, the lowest sequence number every
// consumer has reached (all of them when there are no consumers).
func (b *Bucket) consumedUpTo() []uint64 {
	b.consumersMu.Lock()
	defer b.consumersMu.Unlock()
	low := make([]uint64, len(b.parts))
	for i := range low {
		low[i] = ^uint64(0)
	}
	for _, seqs := range b.consumers {
		for i, s := range seqs {
			low[i] = min(low[i], s)
		}
	}
	return low
}

// PurgeTombstones removes up to limit tombstones made at or before olderThan
// (Unix seconds) that every change-feed consumer has consumed, and returns how
// many it removed and whether more were eligible. This is the metadata purge.
func (b *Bucket) PurgeTombstones(ctx context.Context, olderThan int64, limit int) (purged int, more bool, err error) {
	if err := b.WaitWarm(ctx); err != nil {
		return 0, false, err
	}
	low := b.consumedUpTo()
	if b.itemsOut.Load() {
		// Tombstones out of memory whole come back for their purge (and
		// its horizon), and nothing leaves memory until it is queued.
		b.passes.Add(1)
		defer b.passes.Add(-1)
		if err := b.tombstonesIn(ctx, olderThan, limit, low); err != nil {
			return 0, false, err
		}
	}
	horizon, err := b.raisePurgedCAS(ctx, olderThan, low)
	if err != nil {
		return 0, false, err
	}
	var last *commitBatch
	for _, p := range b.parts {
		if err := ctx.Err(); err != nil {
			return purged, true, err
		}
		p.mu.Lock()
		if b.isClosed() {
			p.mu.Unlock()
			return purged, false, ErrClosed
		}
		var failed error
		t := &p.mu.docs
		t.each(func(i uint32) bool {
			v := t.version(i)
			if !v.deleted || v.seq > low[p.id] || v.cas > horizon || t.deletedAt(i) > olderThan {
				return true
			}
			k := t.key(i)
			if p.mu.pending[k] != nil {
				return true
			}
			if purged == limit {
				more = true
				return false
			}
			purged++
			// The tombstone leaves memory once its removal is committed
			// (applyRecordLocked). A tombstone, a delete's or an
			// expiration's, holds no expiry entry.
			r := record{purge: true, key: k, part: p.id, seq: v.seq}
			cb, err := b.store.enqueue(r)
			if err != nil {
				failed = err
				return false
			}
			if cb.committed() {
				b.applyRecordLocked(p, &r)
			}
			last = cb
			return true
		})
		if failed != nil {
			p.mu.Unlock()
			return purged - 1, true, failed
		}
		p.mu.Unlock()
		if more {
			break
		}
	}
	return purged, more, last.wait(ctx)
}

// tombstonesIn puts back into memory up to limit+1 stored tombstones that
// left it whole (evict.go) and that the metadata purge may remove (made at
// or before olderThan, at most at low's sequence number of their
// partition), so that the purge, which walks memory, finds them.
// It reads the whole store, a chunk at a time: the cost of a purge run
// while items are out of memory.
func (b *Bucket) tombstonesIn(ctx context.Context, olderThan int64, limit int, low []uint64) error {
	var buf []*Document
	var after docKey
	from, n := false, 0
	for n <= limit {
		var err error
		if buf, err = b.store.st.docsAfter(after, from, warmChunk, buf[:0]); err != nil {
			if b.isClosed() {
				return ErrClosed
			}
			return fmt.Errorf("%w: read tombstones: %w", ErrStorage, err)
		}
		for _, d := range buf {
			if !d.Deleted || int(d.Partition) >= len(b.parts) || d.Seq > low[d.Partition] || d.DeletedAt > olderThan {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			p := b.parts[d.Partition]
			p.mu.Lock()
			_, err := b.fetchMissLocked(p, docKey{cid: d.Collection, key: d.Key}, false)
			p.mu.Unlock()
			if err != nil {
				return err
			}
			if n++; n > limit {
				break
			}
		}
		if len(buf) < warmChunk {
			break
		}
		last := buf[len(buf)-1]
		after, from = docKey{cid: last.Collection, key: last.Key}, true
	}
	return nil
}
