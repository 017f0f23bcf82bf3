package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Expiry in a replicated bucket (issue 22). An expiration is a write like
// any other there: the node that leads a partition decides it (its pager,
// or a read that found the document expired) and proposes it to the
// partition's group as a tombstone whose deletion reason is expiry,
// conditioned on the very version that expired (replWrite.holds); every
// replica applies it through ApplyReplicated with the same sequence
// number and CAS, and it leaves curr_items and the collection's count on
// each. A key written, touched or deleted between the decision and the
// apply keeps what that write made. A node that does not lead a partition
// expires nothing in it: its reads answer an expired document missing,
// and the expiration reaches it from the leader.

// replExpiryInFlight bounds the expirations one pager batch (or the reads
// of one node) has proposed and not yet seen applied: each is a round trip
// to a majority, so a batch proposes them at once rather than one by one.
const replExpiryInFlight = 64

// accessExpiryWait bounds how long a read's expiration may take to be
// proposed and applied before it is given up (the pager expires the
// document later).
const accessExpiryWait = 30 * time.Second

// accessExpiries is the set of keys whose expiration a read has proposed
// and not yet seen applied, so that many reads of one expired document
// propose it once, each with the cancel of its proposal, for a closing
// bucket.
type accessExpiries struct {
	mu     sync.Mutex
	keys   map[docKey]context.CancelFunc
	closed bool
	wg     sync.WaitGroup
}

// add claims k for a proposal that cancel stops, reporting false if k is
// claimed already, too many are, or the bucket is closing.
func (a *accessExpiries) add(k docKey, cancel context.CancelFunc) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.keys[k]; ok || a.closed || len(a.keys) >= replExpiryInFlight {
		return false
	}
	if a.keys == nil {
		a.keys = make(map[docKey]context.CancelFunc)
	}
	a.keys[k] = cancel
	a.wg.Add(1)
	return true
}

// done releases k, claimed by add.
func (a *accessExpiries) done(k docKey) {
	a.mu.Lock()
	delete(a.keys, k)
	a.mu.Unlock()
	a.wg.Done()
}

// close cancels the proposals in flight, waits for them to return, and
// refuses new ones.
func (a *accessExpiries) close() {
	a.mu.Lock()
	a.closed = true
	for _, cancel := range a.keys {
		cancel()
	}
	a.mu.Unlock()
	a.wg.Wait()
}

// expireOnAccess proposes, in the background, the expiration of k (found
// expired with the given expiration by a read) if this node leads its
// partition; the read answers not-found without waiting for it, as on one
// node. Failures are left to the pager.
func (b *Bucket) expireOnAccess(r Replicator, k docKey, expiration int64) {
	b.onLeader(r, k, func(ctx context.Context, _ int) {
		item := []expItem{{key: k, exp: expiration}}
		if _, err := b.proposeExpirations(ctx, r, b.clock.Now(), item, &b.stats.expiredAccess); err != nil {
			b.eng.log.Debug("expiration on access not replicated; the pager will retry", "bucket", b.name, "err", err)
		}
	})
}

// onLeader runs propose in the background, for a write a read of k decided
// (its expiration, or a sliding extension), if this node leads k's
// partition (a follower writes nothing: the leader decides it). One such
// write per key at a time, 64 at most (accessExpiries), each given at most
// accessExpiryWait; a closing bucket cancels them.
func (b *Bucket) onLeader(r Replicator, k docKey, propose func(ctx context.Context, part int)) {
	ctx, cancel := context.WithTimeout(context.Background(), accessExpiryWait)
	if !b.repl.access.add(k, cancel) {
		cancel()
		return
	}
	go func() {
		defer b.repl.access.done(k)
		defer cancel()
		part := int(partitionOf(k.key, len(b.parts)))
		if leads(ctx, r, part) {
			propose(ctx, part)
		}
	}()
}

// expireBatchReplicated is ExpireBatch for a bucket whose writes are
// replicated: it picks up to limit due documents in the partitions this
// node leads (others are the leaders' to expire), proposes their
// expirations at once, and returns how many were applied. A document
// written meanwhile is kept and not counted.
func (b *Bucket) expireBatchReplicated(ctx context.Context, r Replicator, limit int) (int, bool, error) {
	now := b.clock.Now()
	led := make(map[uint16]bool) // by partition, asked once a batch
	var picked []expItem
	_, more, err := b.walkDue(ctx, now, limit, func(it expItem) (bool, error) {
		part := partitionOf(it.key.key, len(b.parts))
		mine, seen := led[part]
		if !seen {
			mine = leads(ctx, r, int(part))
			led[part] = mine
		}
		if mine {
			picked = append(picked, it)
		}
		return mine, nil
	})
	if err != nil {
		return 0, true, err
	}
	n, err := b.proposeExpirations(ctx, r, now, picked, &b.stats.expiredPager)
	return n, more || err != nil, err
}

// proposeExpirations proposes the expiration at now of each item still
// due (its document live with that expiration, expired, no newer version
// on its way to disk), up to replExpiryInFlight at once, and waits for
// them. It counts in counter, and returns, those applied; an expiration
// overtaken by another write of its key, or refused because this node no
// longer leads the partition, is not counted and is no failure.
func (b *Bucket) proposeExpirations(ctx context.Context, r Replicator, now int64, items []expItem, counter *atomic.Int64) (int, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		n     int
		first error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
	}
	slots := make(chan struct{}, replExpiryInFlight)
	for _, it := range items {
		part, entry, err := b.decideExpiration(it.key, it.exp, now)
		if err != nil {
			fail(err)
			break
		}
		if entry == nil {
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			fail(ctx.Err())
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			res, err := r.Replicate(ctx, part, entry)
			switch {
			case errors.Is(err, ErrNotMyVBucket):
				// Leadership moved: the new leader expires it.
			case err != nil:
				fail(err)
			case res.Err == nil && res.Doc != nil:
				counter.Add(1)
				mu.Lock()
				n++
				mu.Unlock()
			case errors.Is(res.Err, errReplConflict), errors.Is(res.Err, errReplApplied):
				// The key changed before the expiration applied: that
				// write stands.
			case errors.Is(res.Err, ErrCollectionNotFound):
				// Its collection was dropped: the document went with it.
			case res.Err != nil:
				fail(res.Err)
			}
		}()
	}
	wg.Wait()
	return n, first
}

// decideExpiration returns the partition of k and the entry that expires
// it at now, or a nil entry if it is no longer due (see expirableLocked).
func (b *Bucket) decideExpiration(k docKey, expiration, now int64) (int, []byte, error) {
	p := b.partitionFor(k.key)
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.isClosed() {
		return 0, nil, ErrClosed
	}
	prev, err := b.expirableLocked(p, k, expiration, now)
	if prev == nil || err != nil {
		return 0, nil, err
	}
	w := replWrite{prevSeq: prev.Seq, now: now, doc: *expirationOf(prev, now)}
	w.doc.Key, w.doc.Collection = k.key, k.cid
	w.doc.CAS = b.nextCAS(now)
	w.doc.RevSeq = prev.RevSeq + 1
	return int(p.id), w.encode(), nil
}
