package engine

import (
	"context"
	"fmt"
)

// HighSeqnos returns every partition's high sequence number in the change
// feed: that of its last committed mutation (on disk for a persistent bucket).
// Every acknowledged write is at or below it.
func (b *Bucket) HighSeqnos() []uint64 {
	out := make([]uint64, len(b.parts))
	for i, p := range b.parts {
		p.mu.RLock()
		out[i] = p.mu.durable
		p.mu.RUnlock()
	}
	return out
}

// Changes returns the committed version of every document (tombstones included,
// all collections) changed after since — one sequence number per partition,
// nil meaning all zero — at most limit of them, and the sequence vector the
// caller has now seen (ErrWarmup while the bucket warms up). A document changed twice appears once, at its latest
// version, as a DCP stream after deduplication shows it. Pass the returned
// vector back to get what follows.
//
// Where the change log no longer leads to every document after since (a
// fullEviction bucket's documents out of memory whole, evict.go), those
// partitions are first read from the store in key order up to a snapshot of
// their committed sequence numbers (a backfill, backfill.go), and the
// returned vector is at the snapshot's end for them: a backfill is returned
// whole, beyond limit if it must be, as a DCP disk snapshot is all or
// nothing; its documents come first, not in sequence order, and a document
// changed meanwhile may come twice (its newer version from the log).
func (b *Bucket) Changes(since []uint64, limit int) ([]*Document, []uint64, error) {
	if since != nil && len(since) != len(b.parts) {
		return nil, nil, fmt.Errorf("%w: sequence vector has %d partitions, the bucket %d", ErrInvalidSetting, len(since), len(b.parts))
	}
	if !b.warm() {
		return nil, nil, ErrWarmup
	}
	if limit <= 0 {
		limit = int(^uint(0) >> 1)
	}
	pos := make([]uint64, len(b.parts))
	copy(pos, since)
	var out []*Document
	var err error
	if bf := b.startBackfill(pos); bf != nil {
		if out, err = b.readBackfill(bf, pos, out); err != nil {
			return nil, nil, err
		}
	}
	next := make([]uint64, len(b.parts))
	for i, p := range b.parts {
		if len(out) >= limit {
			next[i] = pos[i]
			continue
		}
		from := len(out)
		var behind bool
		out, next[i], behind = p.changesAfter(pos[i], limit-len(out), out)
		for behind {
			// A version after the backfill's snapshot left memory too.
			bf := newBackfill(pos)
			p.mu.RLock()
			bf.upTo[i] = p.mu.durable
			p.mu.RUnlock()
			if out, err = b.readBackfill(bf, pos, out); err != nil {
				return nil, nil, err
			}
			from = len(out)
			out, next[i], behind = p.changesAfter(pos[i], limit-len(out), out)
		}
		full, _, err := b.withValues(context.Background(), out[from:])
		if err != nil {
			return nil, nil, err
		}
		kept := out[:from]
		for _, d := range full {
			if d != nil { // nil: superseded, its newer version comes after next[i]
				kept = append(kept, d)
			}
		}
		clear(out[len(kept):])
		out = kept
	}
	return out, next, nil
}

// readBackfill appends every document of backfill bf to out and moves pos
// to the snapshot's end.
func (b *Bucket) readBackfill(bf *backfill, pos []uint64, out []*Document) ([]*Document, error) {
	if _, err := bf.read(b, func(d *Document) bool {
		out = append(out, d)
		return true
	}); err != nil {
		return out, err
	}
	bf.finish(pos)
	return out, nil
}

// WaitChanges blocks until the bucket is warm (WaitWarm) and some
// partition's high sequence number passes since, the bucket closes
// (ErrClosed), or ctx ends.
func (b *Bucket) WaitChanges(ctx context.Context, since []uint64) error {
	return b.waitChanges(ctx, nil, since)
}

// waitChanges is WaitChanges that also ends when the history is no longer
// *uuid (uuid not nil).
func (b *Bucket) waitChanges(ctx context.Context, uuid *uint64, since []uint64) error {
	if err := b.WaitWarm(ctx); err != nil {
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		ch := b.feedWait()
		if b.isClosed() {
			return ErrClosed
		}
		if uuid != nil && b.UUID() != *uuid {
			return nil
		}
		for i, s := range b.HighSeqnos() {
			var old uint64
			if since != nil {
				old = since[i]
			}
			if s > old {
				return nil
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// feedWait returns a channel closed at the next mutation.
func (b *Bucket) feedWait() <-chan struct{} {
	b.feedMu.Lock()
	defer b.feedMu.Unlock()
	if b.feedCh == nil {
		b.feedCh = make(chan struct{})
	}
	return b.feedCh
}

// changed wakes every feed waiter.
func (b *Bucket) changed() {
	b.feedMu.Lock()
	if b.feedCh != nil {
		close(b.feedCh)
		b.feedCh = nil
	}
	b.feedMu.Unlock()
}

// PartitionSeqnos returns partition part's sequence numbers on this node
// (OBSERVE_SEQNO answers them): current, that of the newest version this
// node's copy holds (in memory; a replicated bucket's, the log index of
// the last entry applied here), and persisted, that of the last one its
// store has committed (on disk for a persistent bucket). persisted is
// never above current.
func (b *Bucket) PartitionSeqnos(part int) (current, persisted uint64, err error) {
	if part < 0 || part >= len(b.parts) {
		return 0, 0, fmt.Errorf("%w: partition %d: the bucket has partitions 0 to %d", ErrNotMyVBucket, part, len(b.parts)-1)
	}
	p := b.parts[part]
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.mu.seq, p.mu.durable, nil
}
