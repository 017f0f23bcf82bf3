package engine

import (
	"context"
	"sync/atomic"
)

// mutate applies one mutation to key. fn sees the current live document (nil if
// missing, deleted or expired) and the time, and returns the new version with
// Value, Type, Flags, Expiration and Deleted/DeletedAt set; mutate fills in the
// rest, publishes it, updates the expiry index and the change feed, and waits
// until it is durable.
func (b *Bucket) mutate(ctx context.Context, k docKey, fn func(old *Document, now int64) (*Document, error)) (*Document, error) {
	if err := validateKey(k.key); err != nil {
		return nil, err
	}
	p := b.partitionFor(k.key)
	p.mu.Lock()
	if b.isClosed() {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	now := b.clock.Now()
	prev := p.mu.docs[k]
	live := prev
	if live != nil && (live.Deleted || live.ExpiredAt(now)) {
		live = nil
	}
	d, err := fn(live, now)
	if err != nil {
		p.mu.Unlock()
		return nil, err
	}
	cb, err := b.publishLocked(p, k, prev, d, now)
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := cb.wait(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// publishLocked stamps d as the next version of k after prev and makes it
// current: memory, expiry index, counters, change feed, and the disk queue.
//
// Expirations (tombstones with Expired set) are made durable lazily: only the
// sequence number and CAS they used go to disk, and the document's record
// stays as it was, expired. After a restart it is an expired, unpurged
// document again, which the next pager run purges (with a new sequence
// number, so view indexes stay right). Couchbase does not make expiry durable
// either; this keeps a pager run from rewriting a disk page per document. The
// metadata purge removes the stale record.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) publishLocked(p *partition, k docKey, prev, d *Document, now int64) (*commitBatch, error) {
	d.Key, d.Collection, d.Partition = k.key, k.cid, p.id
	d.CAS = b.nextCAS(now)
	p.mu.seq++
	d.Seq = p.mu.seq
	var memOldExp, diskOldExp int64
	if prev != nil {
		d.RevSeq = prev.RevSeq + 1
		if !prev.Deleted {
			memOldExp = prev.Expiration
		}
		// On disk, a live document or an expiration (whose live record is
		// still there) holds an expiry entry; a deleted one holds none, and
		// its Expiration is 0.
		diskOldExp = prev.Expiration
	} else {
		d.RevSeq = 1
	}
	if d.Deleted {
		d.Value = nil
		if !d.Expired {
			d.Expiration = 0
		}
	}
	newExp := d.Expiration
	if d.Deleted {
		newExp = 0
	}
	p.mu.docs[k] = d
	p.appendLogLocked(d.Seq, k)
	b.exps.update(k, memOldExp, newExp)
	wasLive := prev != nil && !prev.Deleted
	d.Created = !d.Deleted && (!wasLive || prev.ExpiredAt(now))
	switch {
	case wasLive && d.Deleted:
		b.currItems.Add(-1)
		b.tombs.Add(1)
	case !wasLive && !d.Deleted:
		b.currItems.Add(1)
		if prev != nil {
			b.tombs.Add(-1)
		}
	case prev == nil && d.Deleted:
		b.tombs.Add(1)
	}
	var cb *commitBatch
	if b.store != nil {
		r := record{key: k, part: p.id, seq: d.Seq, cas: d.CAS}
		if d.Expired {
			r.seqOnly = true
		} else {
			r.enc, r.oldExp, r.newExp = encodeDoc(d), diskOldExp, newExp
		}
		var err error
		if cb, err = b.store.enqueue(r); err != nil {
			return nil, err
		}
	}
	b.changed()
	return cb, nil
}

// expire deletes k as an expiration if it is still live with the given
// expiration and has expired, and counts it in counter.
func (b *Bucket) expire(ctx context.Context, k docKey, expiration int64, counter *atomic.Int64) error {
	cb, _, err := b.expireQueued(k, expiration, counter)
	if err != nil {
		return err
	}
	return cb.wait(ctx)
}

// expireQueued is expire without waiting for disk. It reports whether it
// expired the document.
func (b *Bucket) expireQueued(k docKey, expiration int64, counter *atomic.Int64) (*commitBatch, bool, error) {
	p := b.partitionFor(k.key)
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.isClosed() {
		return nil, false, ErrClosed
	}
	now := b.clock.Now()
	prev := p.mu.docs[k]
	if prev == nil || prev.Deleted || prev.Expiration != expiration {
		b.exps.update(k, expiration, 0) // a stale entry: drop it
		return nil, false, nil
	}
	if !prev.ExpiredAt(now) {
		return nil, false, nil
	}
	cb, err := b.publishLocked(p, k, prev, &Document{Deleted: true, Expired: true, Expiration: prev.Expiration, DeletedAt: now, Type: prev.Type}, now)
	if err != nil {
		return nil, false, err
	}
	counter.Add(1)
	return cb, true, nil
}

// ExpireBatch purges up to limit documents that have expired by now, in
// expiry order, each as an expiration (a tombstone and a change-feed entry),
// counted as ExpiredPager. It returns how many it purged and whether more are
// due. Each document is one short critical section, so readers and writers
// are never held up for long. It does not wait for disk: expirations are not
// durable writes (as in Couchbase), and not waiting lets group commit gather
// a whole pager run into few transactions; call Sync to wait.
func (b *Bucket) ExpireBatch(ctx context.Context, limit int) (purged int, more bool, err error) {
	now := b.clock.Now()
	due := b.exps.due(now, limit+1)
	if len(due) > limit {
		more = true
		due = due[:limit]
	}
	for _, it := range due {
		if err := ctx.Err(); err != nil {
			return purged, true, err
		}
		_, ok, err := b.expireQueued(it.key, it.exp, &b.stats.expiredPager)
		if err != nil {
			return purged, true, err
		}
		if ok {
			purged++
		}
	}
	return purged, more, nil
}

// Sync waits until every mutation made so far is on disk (at once for a
// bucket that keeps nothing on disk).
func (b *Bucket) Sync(ctx context.Context) error {
	if b.store == nil {
		return nil
	}
	return b.store.last().wait(ctx)
}
