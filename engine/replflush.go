package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Flush in a replicated bucket. On one node Flush tombstones every live
// document itself; a bucket whose writes are replicated makes no write of
// its own, so a flush there is a set of replicated deletions, each
// partition's proposed by the node that leads it, the way a TTL
// re-evaluation is (replttl.go).
//
// A flush is asked once, for the whole cluster, and every node learns of
// it (cmd/mayfly keeps it in etcd, with a counter, its revision): each
// node then starts a pass (StartFlush) over the partitions it leads, and
// looks again every flushCatchUp for partitions it has come to lead
// since, until some node has finished every partition. What is shared
// between the nodes is a FlushLedger: for each partition the cut its
// first leader fixed, and which partitions are finished.
//
// What a flush covers: in each partition, the documents whose newest
// version's sequence number is at or below the partition's cut. The cut is
// fixed by the first node that takes the partition up as its leader: its
// copy made current (MakeCurrent: every write acknowledged before is
// applied there), the cut is its sequence number then; the ledger keeps
// the first one recorded, and every later leader (a leadership move, a
// node restarted mid-flush) deletes up to that same cut. So a write
// acknowledged before the flush was asked is deleted; a write
// acknowledged after its partition's cut was fixed, and so every write
// acknowledged after the flush answered, is kept, however late a
// catch-up comes; a write in between (during the flush) may go either
// way, as on Couchbase. Sequence numbers are log indexes, the same on
// every replica, so the cut needs no clock.
//
// Each deletion is proposed conditioned on the version its leader saw:
// a live one as a client's delete (its live sequence number), one
// expired already as the pager's expiration (the exact version: it leaves
// the counts as an expiration does); every replica applies it through
// ApplyReplicated, with the same sequence number and CAS, and its counts
// and views drop as a delete's do. A key written between the decision
// and the apply keeps that write: its new version is past the cut.

// flushCatchUp is how often a flush pass looks for partitions this node
// has come to lead that no node has finished.
const flushCatchUp = time.Second

// ErrFlushSuperseded is a FlushLedger's answer once a later flush of the
// bucket has replaced the one it records: the pass stops (the later
// flush's pass covers what it would have deleted).
var ErrFlushSuperseded = errors.New("engine: a later flush of the bucket replaced this one")

// ErrFlushPending is a cluster flush that did not finish in time: every
// node goes on with it in the background, and the documents it covers go
// as their partitions' leaders get to them. It wraps ErrTempFail (503
// over HTTP).
var ErrFlushPending = fmt.Errorf("%w: the flush did not finish in time; it goes on in the background", ErrTempFail)

// FlushLedger is the cluster's shared record of one flush of a replicated
// bucket (cmd/mayfly keeps it in etcd). It is safe for concurrent use.
type FlushLedger interface {
	// FixCuts records, for each partition of proposed that has no cut yet
	// in this flush, the one proposed, and returns the cut of each
	// partition of proposed: the first recorded, this node's or
	// another's. ErrFlushSuperseded once a later flush replaced this one.
	FixCuts(ctx context.Context, proposed map[int]uint64) (map[int]uint64, error)
	// Finish records that this node finished partitions parts.
	// ErrFlushSuperseded as FixCuts.
	Finish(ctx context.Context, parts []int) error
	// Finished returns, one flag a partition, those some node has
	// finished (nil or shorter: the rest not known finished).
	Finished() []bool
}

// flushPasses holds a bucket's flush pass: one at a time, a later flush
// cancelling an earlier one.
type flushPasses struct {
	mu     sync.Mutex
	cur    *flushPass
	closed bool
	wg     sync.WaitGroup
	// catchUp, when set, replaces flushCatchUp (tests).
	catchUp time.Duration
}

// flushPass is one flush's background pass on this node.
type flushPass struct {
	rev     uint64
	cancel  context.CancelFunc
	exited  chan struct{}
	deleted atomic.Int64 // documents this node's proposals deleted
}

// StartFlush starts this node's background pass of the cluster's flush
// with revision rev, recorded in l, unless a pass of that flush or a
// later one was started already (applying the same flush again changes
// nothing). An earlier flush's pass is cancelled. The pass deletes, in
// each partition this node leads and no node has finished, the documents
// up to the partition's cut (see the comment at the top), and looks again
// every second for partitions it has come to lead, until every partition
// is finished, a later flush replaces it, or the bucket closes.
func (b *Bucket) StartFlush(rev uint64, l FlushLedger) {
	t := &b.repl.flush
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || (t.cur != nil && t.cur.rev >= rev) {
		return
	}
	old := t.cur
	ctx, cancel := context.WithCancel(context.Background())
	p := &flushPass{rev: rev, cancel: cancel, exited: make(chan struct{})}
	t.cur = p
	every := t.catchUp
	if every <= 0 {
		every = flushCatchUp
	}
	t.wg.Go(func() {
		defer close(p.exited)
		defer cancel()
		if old != nil {
			old.cancel()
			<-old.exited
		}
		p.run(ctx, b, l, every)
	})
}

// FlushDeleted returns how many documents this node's pass of the flush
// with revision rev has deleted so far (0 when its pass is not the
// latest).
func (b *Bucket) FlushDeleted(rev uint64) int64 {
	t := &b.repl.flush
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur == nil || t.cur.rev != rev {
		return 0
	}
	return t.cur.deleted.Load()
}

// close cancels the pass, waits for it to return, and starts no more.
func (t *flushPasses) close() {
	t.mu.Lock()
	t.closed = true
	if t.cur != nil {
		t.cur.cancel()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// run is the pass: a look at once, then one every interval, each
// flushing the partitions this node leads that no node has finished, and
// recording those it finished.
func (p *flushPass) run(ctx context.Context, b *Bucket, l FlushLedger, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	mine := make([]bool, len(b.parts)) // finished here
	var unrecorded []int               // finished here, not yet in the ledger
	for {
		r := b.replicator()
		if r == nil {
			return // the bucket writes locally now: a local Flush is its own
		}
		done := merged(l.Finished(), mine)
		if !allTrue(done) && leadsAnyOf(ctx, r, done) {
			n, finished, err := b.flushReplicated(ctx, r, l, done)
			p.deleted.Add(int64(n))
			for _, part := range finished {
				mine[part] = true
			}
			unrecorded = append(unrecorded, finished...)
			switch {
			case ctx.Err() != nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrFlushSuperseded):
				return
			case err != nil:
				b.eng.log.Debug("flush: partitions left for the next look", "bucket", b.name, "err", err)
			}
		}
		if len(unrecorded) > 0 {
			switch err := l.Finish(ctx, unrecorded); {
			case err == nil:
				unrecorded = nil
			case ctx.Err() != nil || errors.Is(err, ErrFlushSuperseded):
				return
			default:
				b.eng.log.Debug("flush: recording the finished partitions, tried again at the next look", "bucket", b.name, "err", err)
			}
		}
		if len(unrecorded) == 0 && allTrue(merged(l.Finished(), mine)) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// merged returns a flag a partition (as many as mine), set where either
// finished (which may be shorter, or nil) or mine is.
func merged(finished, mine []bool) []bool {
	out := make([]bool, len(mine))
	for i := range out {
		out[i] = mine[i] || (i < len(finished) && finished[i])
	}
	return out
}

// flushReplicated flushes the partitions this node leads that are not
// marked in done: it makes its copies of them current, has l fix their
// cuts, and proposes the deletion of every document up to its partition's
// cut, at most replExpiryInFlight at once. It returns how many deletions
// were applied and the partitions it finished (every key decided, none of
// its proposals failed or was refused for leadership); a partition whose
// leadership moved or whose proposal failed is left for the next look.
func (b *Bucket) flushReplicated(ctx context.Context, r Replicator, l FlushLedger, done []bool) (int, []int, error) {
	if err := b.WaitWarm(ctx); err != nil {
		return 0, nil, err
	}
	var parts []int
	for part, d := range done {
		if !d && leads(ctx, r, part) {
			parts = append(parts, part)
		}
	}
	if len(parts) == 0 {
		return 0, nil, nil
	}
	// Every write acknowledged before is applied here: the cut (this
	// copy's sequence number) covers it.
	if err := b.MakeCurrent(ctx, parts); err != nil {
		return 0, nil, err
	}
	proposed := make(map[int]uint64, len(parts))
	for _, part := range parts {
		p := b.parts[part]
		p.mu.RLock()
		proposed[part] = p.mu.seq
		p.mu.RUnlock()
	}
	cuts, err := l.FixCuts(ctx, proposed)
	if err != nil {
		return 0, nil, err
	}
	release, err := b.allKeysIn(ctx, b.collectionIDs())
	if err != nil {
		return 0, nil, err
	}
	defer release()
	return proposeByPartition(ctx, false, func(yield func(*partition, []docKey) bool) error {
		for _, part := range parts {
			if _, ok := cuts[part]; !ok {
				continue // no cut: left for the next look
			}
			p := b.parts[part]
			p.mu.Lock()
			keys := p.keysLocked(nil)
			p.mu.Unlock()
			if !yield(p, keys) {
				return nil
			}
		}
		return nil
	}, func(p *partition, k docKey) (bool, error) { return b.flushKey(ctx, r, p, k, cuts[int(p.id)]) })
}

// flushKey proposes the deletion of k if its newest version is live (or
// expired) at or below cut, and reports whether one was applied. A key
// written before the deletion applied is decided again on its newer
// version (past the cut: kept).
func (b *Bucket) flushKey(ctx context.Context, r Replicator, p *partition, k docKey, cut uint64) (bool, error) {
	applied, settled, err := proposeDecided(ctx, r, p, func() ([]byte, error) { return b.decideFlush(p, k, cut) })
	if err == nil && !settled {
		err = fmt.Errorf("%w: %q changed %d times during the flush", ErrTempFail, k.key, maxReplConflicts)
	}
	return applied, err
}

// decideFlush returns the entry that deletes k, nil when there is none to
// delete: no version, a tombstone, a version past cut, or a dropped
// collection (its documents go with it). A live version is deleted as a
// client's delete is (conditioned on its live sequence number); an
// expired one as the pager expires it (conditioned on that exact version),
// so the counts drop as for an expiration.
func (b *Bucket) decideFlush(p *partition, k docKey, cut uint64) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := b.writable(k.cid); err != nil {
		if errors.Is(err, ErrCollectionNotFound) {
			return nil, nil
		}
		return nil, err
	}
	if _, err := b.fetchMissLocked(p, k, false); err != nil {
		return nil, err
	}
	cur := p.latestLocked(k)
	if cur == nil || cur.Deleted || cur.Seq > cut {
		return nil, nil
	}
	now := b.clock.Now()
	w := replWrite{prevSeq: cur.Seq, now: now}
	if cur.ExpiredAt(now) {
		w.doc = *expirationOf(cur, now)
	} else {
		w.doc = Document{Deleted: true, DeletedAt: now, Type: cur.Type}
	}
	w.doc.Key, w.doc.Collection = k.key, k.cid
	w.doc.CAS = b.nextCAS(now)
	w.doc.RevSeq = cur.RevSeq + 1
	return w.encode(), nil
}
