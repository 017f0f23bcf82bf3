package engine

import (
	"context"
	"fmt"
	"iter"
)

// Consumer is what one named change-feed consumer (a view index, a search
// index) sees of a bucket: its registration, its acknowledged position, the
// bucket's history and the feed itself. It holds no state of its own beyond
// its name, so any number of handles of one name may exist; Bucket.Consumer
// makes one.
type Consumer struct {
	b    *Bucket
	name string
}

// Consumer returns the handle of the change-feed consumer called name. The
// consumer is not registered until Register.
func (b *Bucket) Consumer(name string) *Consumer { return &Consumer{b: b, name: name} }

// Name returns the consumer's name.
func (c *Consumer) Name() string { return c.name }

// Register records the consumer durably (see Bucket.RegisterConsumer): no
// tombstone is purged before it has acknowledged it.
func (c *Consumer) Register(ctx context.Context) error { return c.b.RegisterConsumer(ctx, c.name) }

// Drop forgets the consumer, durably (see Bucket.DropConsumer).
func (c *Consumer) Drop(ctx context.Context) error { return c.b.DropConsumer(ctx, c.name) }

// Ack records that the consumer has durably consumed every change up to seqs
// (see Bucket.AckChanges).
func (c *Consumer) Ack(seqs []uint64) error { return c.b.AckChanges(c.name, seqs) }

// CheckPosition reports whether the consumer, having seen every change up to
// seqs in the history uuid, can go on from there: nil, or an error wrapping
// ErrRollback (see Bucket.CheckPosition).
func (c *Consumer) CheckPosition(uuid uint64, seqs []uint64) error {
	return c.b.CheckPosition(uuid, seqs)
}

// RollbackPartitions tells the consumer, having seen every change up to
// seqs in the history uuid, which partitions it must forget and read again
// from sequence number 0 to go on in the current history, named now; an
// error wrapping ErrRollback when only starting over works (see
// Bucket.RollbackPartitions).
func (c *Consumer) RollbackPartitions(uuid uint64, seqs []uint64) ([]PartitionRollback, uint64, error) {
	return c.b.RollbackPartitions(uuid, seqs)
}

// UUID returns the UUID of the bucket's current history.
func (c *Consumer) UUID() uint64 { return c.b.UUID() }

// HighSeqnos returns every partition's high sequence number, the writes
// made and still on their way to disk included (acknowledged from memory at
// durability none or majority, an expiration a read queued): the target of
// a catch-up that must see every write made so far (stale=false), which
// waits for their commit (WaitCommitted) before the feed, which carries
// only committed versions, reaches it.
func (c *Consumer) HighSeqnos() []uint64 {
	return c.AppendHighSeqnos(make([]uint64, 0, len(c.b.parts)))
}

// AppendHighSeqnos appends HighSeqnos to dst and returns the extended
// slice: for a caller that asks often (a view answer saying how far its
// index is behind), into a buffer it reuses rather than a new slice each
// time.
//
// It takes no partition's lock: each number is read on its own, so a write
// in a partition read already may be missed, as it could be by a caller
// asking a moment earlier.
func (c *Consumer) AppendHighSeqnos(dst []uint64) []uint64 {
	for _, p := range c.b.parts {
		dst = append(dst, p.seqNow.Load())
	}
	return dst
}

// WaitCommitted blocks until the feed reaches target (HighSeqnos) in every
// partition: the writes up to it committed, or lost to a failed commit (the
// partition's sequence numbers then go on from the last committed one). The
// writes it waits for are committed at once rather than after the flush
// interval. It ends early with ErrClosed when the bucket closes, or ctx's
// error.
func (c *Consumer) WaitCommitted(ctx context.Context, target []uint64) error {
	b := c.b
	for urged := false; ; urged = true {
		ch := b.feedWait()
		if b.isClosed() {
			return ErrClosed
		}
		reached := true
		for i, p := range b.parts {
			if i >= len(target) {
				break
			}
			p.mu.RLock()
			done := p.mu.durable >= target[i] || p.mu.seq < target[i]
			p.mu.RUnlock()
			if !done {
				reached = false
				break
			}
		}
		if reached {
			return nil
		}
		if !urged {
			b.store.flushNow()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// NumPartitions returns the number of partitions: the length of every
// sequence vector.
func (c *Consumer) NumPartitions() int { return len(c.b.parts) }

// Wait blocks until some partition's high sequence number passes since, the
// bucket's history is no longer the one named uuid (a partition's copy
// dropped: the consumer may have partitions to roll back, see
// RollbackPartitions), the bucket closes (ErrClosed), or ctx ends.
func (c *Consumer) Wait(ctx context.Context, uuid uint64, since []uint64) error {
	return c.b.waitChanges(ctx, &uuid, since)
}

// WaitWarm blocks until the bucket's warm-up is done (see Bucket.WaitWarm):
// a catch-up that reads the feed before then could end early.
func (c *Consumer) WaitWarm(ctx context.Context) error { return c.b.WaitWarm(ctx) }

// Changes returns a cursor over the feed after since (nil: from the
// beginning); ErrWarmup while the bucket warms up.
func (c *Consumer) Changes(since []uint64) (*Cursor, error) {
	if !c.b.warm() {
		return nil, ErrWarmup
	}
	if since != nil && len(since) != len(c.b.parts) {
		return nil, fmt.Errorf("%w: sequence vector has %d partitions, the bucket %d", ErrInvalidSetting, len(since), len(c.b.parts))
	}
	pos := make([]uint64, len(c.b.parts))
	copy(pos, since)
	return &Cursor{b: c.b, pos: pos}, nil
}

// Cursor reads the change feed forward from a position, partition by
// partition, as Bucket.Changes does (each document at its latest committed
// version, in sequence order), without materialising what it reads: it holds
// a partition's lock only to copy a few entries at a time, so a document
// changed while the cursor reads may come again, at its newer version,
// further on. A Cursor is not safe for concurrent use.
//
// A version whose value was ejected is yielded with its value read back from
// the store (a consumer indexes values, so the feed fetches them rather than
// pinning every value in memory until each consumer acknowledged it): the
// cursor reads a batch's versions (see cursorMaxBatch) first, then their
// ejected values together, in key order through one store iterator, so an
// index build over a mostly non-resident bucket is a forward pass over the
// store rather than one random read per document; one replaced meanwhile is
// stepped over, as superseded. A read that fails ends
// the iteration before that version, and Err says why.
//
// Where the change log no longer leads to every document after the
// cursor's position (a fullEviction bucket's documents out of memory
// whole: evict.go), the cursor first reads those partitions' documents
// from the store, in key order, up to a snapshot of their committed
// sequence numbers (a backfill, as a DCP stream's disk snapshot), then goes
// on from the log; while a backfill runs, Position stays where it began
// for its partitions (a consumer that starts again from it reads the
// backfill again), and moves to the snapshot's end once it is done.
type Cursor struct {
	b      *Bucket
	pos    []uint64
	err    error
	bf     *backfill // the backfill under way, nil if none
	behind bool      // the last batch stopped before a partition that needs one
}

// Err returns the error that ended the last iteration early (a value that
// could not be read from the store), or nil. The cursor stays before the
// version it could not read.
func (c *Cursor) Err() error { return c.err }

// cursorChunk is how many documents a cursor copies under a partition's lock
// at a time.
const cursorChunk = 256

// A cursor reads the values of ejected versions a batch at a time, in key
// order (Bucket.withValues): a batch is what Next's caller asks for (the
// feed runtime's BatchSize: views.DefaultBatchSize, search's), at most
// cursorMaxBatch versions, and it ends early once the ejected values it
// holds come to cursorMaxBytes, so that a batch of large documents pins
// no more than that.
const (
	cursorMaxBatch = 20000
	cursorMaxBytes = 32 << 20
)

// Position returns a copy of the sequence vector the cursor has reached:
// everything up to it has been yielded (or was superseded).
func (c *Cursor) Position() []uint64 { return append([]uint64(nil), c.pos...) }

// Next yields the next changes, at most limit of them (limit <= 0: no
// limit), and advances the cursor past each as it is yielded; stopping the
// iteration early leaves the cursor after the last document yielded. When it
// ends without reaching limit, the cursor is at the feed's end as it stood.
func (c *Cursor) Next(limit int) iter.Seq[*Document] {
	return func(yield func(*Document) bool) {
		if limit <= 0 {
			limit = int(^uint(0) >> 1)
		}
		if !c.b.warm() {
			return // the change log is incomplete until the warm-up is done
		}
		n := 0
		c.err = nil
		if c.bf != nil && !c.backfill(&n, limit, yield) {
			return
		}
		var buf []*Document
		var segs []cursorSeg
		for part := 0; part < len(c.b.parts) && n < limit; {
			if c.behind {
				c.behind = false
				if !c.backfill(&n, limit, yield) {
					return
				}
				continue
			}
			buf, segs, part = c.batch(part, min(limit-n, cursorMaxBatch), buf[:0], segs[:0])
			full, done, err := c.b.withValues(context.Background(), buf)
			for _, sg := range segs {
				for j := sg.from; j < min(sg.to, done); j++ {
					c.pos[sg.part] = buf[j].Seq
					if full[j] == nil {
						continue // superseded: the newer version comes later
					}
					n++
					if !yield(full[j]) {
						return
					}
				}
				if done < sg.to {
					break
				}
				if sg.atEnd {
					c.pos[sg.part] = max(c.pos[sg.part], sg.end) // the partition's end
				}
			}
			if err != nil {
				c.err = err
				return
			}
		}
	}
}

// cursorSeg is one partition's share of a cursor's batch: buf[from:to],
// and whether it reaches the partition's end, which is end.
type cursorSeg struct {
	part     int
	from, to int
	end      uint64
	atEnd    bool
}

// batch appends to buf the next changes after the cursor's position, from
// partition part on, partition by partition as Next yields them: at most
// want of them, and as many as fit in cursorMaxBytes of ejected values
// (at least one chunk), copied cursorChunk at a time under their
// partition's lock. A batch spans partitions so that its values, read
// together in key order, are as dense in the store's key space as the
// batch size allows (a partition's keys are scattered over all of it). It
// returns the partition the next batch starts from.
func (c *Cursor) batch(part, want int, buf []*Document, segs []cursorSeg) ([]*Document, []cursorSeg, int) {
	var bytes int64
	for ; part < len(c.b.parts); part++ {
		p := c.b.parts[part]
		sg := cursorSeg{part: part, from: len(buf)}
		since := c.pos[part]
		for {
			if len(buf) == want || bytes >= cursorMaxBytes {
				sg.to = len(buf)
				return buf, append(segs, sg), part
			}
			from := len(buf)
			chunk := min(cursorChunk, want-from)
			var behind bool
			buf, sg.end, behind = p.changesAfter(since, chunk, buf)
			if behind { // the store first (backfill); then this partition again
				c.behind = true
				sg.to = len(buf)
				return buf, append(segs, sg), part
			}
			for _, d := range buf[from:] {
				if d.ejected {
					bytes += d.valueSize()
				}
			}
			if len(buf)-from < chunk {
				sg.atEnd = true
				break
			}
			since = buf[len(buf)-1].Seq
		}
		sg.to = len(buf)
		segs = append(segs, sg)
	}
	return buf, segs, part
}

// startBackfill returns the backfill that a cursor at pos needs, nil if
// none does: one for every partition with a version out of memory whole
// after pos, up to its committed sequence number now.
func (b *Bucket) startBackfill(pos []uint64) *backfill {
	if !b.itemsOut.Load() {
		return nil
	}
	var bf *backfill
	for i, p := range b.parts {
		p.mu.RLock()
		ev, end := p.mu.evictedMax, p.mu.durable
		p.mu.RUnlock()
		if pos[i] < ev {
			if bf == nil {
				bf = newBackfill(pos)
			}
			bf.upTo[i] = end
		}
	}
	return bf
}

// backfill reads on, or starts, the cursor's backfill (backfill.go),
// yielding each document with its value, counting into *n up to limit.
// Once the store is read to its end, the partitions' positions move to the
// snapshot's end. It reports whether the caller goes on (the backfill is
// done; false: yield stopped, the limit was reached, a read failed (c.err),
// or no partition needed one after all).
func (c *Cursor) backfill(n *int, limit int, yield func(*Document) bool) bool {
	if c.bf == nil {
		if c.bf = c.b.startBackfill(c.pos); c.bf == nil {
			// The log said a partition is behind, and none is: end this
			// iteration rather than read the log again in a loop.
			return false
		}
	}
	bf := c.bf
	if *n >= limit {
		return false
	}
	stopped := false
	done, err := bf.read(c.b, func(d *Document) bool {
		*n++
		if !yield(d) || *n == limit {
			stopped = true
			return false
		}
		return true
	})
	if err != nil {
		c.err = err
		return false
	}
	if !done || stopped {
		return false
	}
	bf.finish(c.pos)
	c.bf = nil
	return true
}
