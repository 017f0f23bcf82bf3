package engine

import (
	"context"
	"fmt"
)

// AckChanges records that the named change-feed consumer (a view index, say)
// has durably consumed every change up to seqs. Tombstones are purged only
// once every registered consumer has passed them.
func (b *Bucket) AckChanges(consumer string, seqs []uint64) error {
	if len(seqs) != len(b.parts) {
		return fmt.Errorf("%w: sequence vector has %d partitions, the bucket %d", ErrInvalidSetting, len(seqs), len(b.parts))
	}
	b.consumersMu.Lock()
	defer b.consumersMu.Unlock()
	if b.consumers == nil {
		b.consumers = make(map[string][]uint64)
	}
	b.consumers[consumer] = append([]uint64(nil), seqs...)
	return nil
}

// DropConsumer forgets a change-feed consumer (a deleted design document).
func (b *Bucket) DropConsumer(consumer string) {
	b.consumersMu.Lock()
	defer b.consumersMu.Unlock()
	delete(b.consumers, consumer)
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
	low := b.consumedUpTo()
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
		for k, d := range p.mu.docs {
			if !d.Deleted || d.DeletedAt > olderThan || d.Seq > low[p.id] {
				continue
			}
			if purged == limit {
				more = true
				break
			}
			delete(p.mu.docs, k)
			b.tombs.Add(-1)
			b.stats.metaPurged.Add(1)
			purged++
			if b.store != nil {
				// An expiration's live record and expiry entry are still on
				// disk (see publishLocked); a delete's tombstone has no entry.
				cb, err := b.store.enqueue(record{key: k, oldExp: d.Expiration, part: p.id, seq: d.Seq})
				if err != nil {
					p.mu.Unlock()
					return purged, true, err
				}
				last = cb
			}
		}
		p.mu.Unlock()
		if more {
			break
		}
	}
	return purged, more, last.wait(ctx)
}
