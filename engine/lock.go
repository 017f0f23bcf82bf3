package engine

import (
	"context"
	"errors"
	"fmt"
)

// Pessimistic locks (Couchbase's GET_LOCKED / UNLOCK_KEY, gocb's GetAndLock
// and Unlock).
//
// A lock is kept in memory beside the committed version of its document,
// never in the store, the change log or the feed: taking or releasing one
// changes nothing about the document, so it gets no sequence number and no
// view, search or feed update, and a restart drops every lock.
//
// A lock names the version it was taken on (docCAS). It holds while that
// version is still the newest one of its key and the engine clock is before
// its end; anything that makes a new version ends it with no bookkeeping: the
// holder's write, the expiry pager or a lazy expiry (Couchbase's expiry does
// not look at locks either: a locked document whose expiration passes expires
// and the lock goes with it), a memory eviction, a flush. Stale entries are
// dropped when next seen and swept when a partition holds many.
//
// While a lock holds, a write succeeds only with the lock CAS as its CAS
// (and so ends the lock); any other write, a touch included, is ErrLocked,
// which the front doors report as Couchbase's LOCKED. Reads see the real
// document: the KV port shows CAS all ones while Locked says so.

const (
	// DefaultLockTime is the lock time of a GetLocked asked for 0 seconds,
	// as Couchbase's default (15 s).
	DefaultLockTime = 15
	// MaxLockTime is the longest lock, in seconds, as Couchbase's maximum;
	// a longer one asked for gets DefaultLockTime, as Couchbase's does.
	MaxLockTime = 30
	// lockSweepAt is the number of lock entries in a partition above which
	// GetLocked drops the stale ones.
	lockSweepAt = 64
)

// docLock is a lock on one version of a document.
type docLock struct {
	cas    uint64 // the lock CAS: the holder writes or unlocks with it
	docCAS uint64 // the CAS of the version locked
	until  int64  // engine-clock seconds; the lock holds while now < until
}

// lockLocked returns the lock that holds on k now, whose newest version is
// latest (nil if none), and drops a stale entry.
//
// REQUIRES: p.mu held for writing.
func (p *partition) lockLocked(k docKey, latest *Document, now int64) (docLock, bool) {
	l, ok := p.mu.locks[k]
	if !ok {
		return docLock{}, false
	}
	if latest == nil || latest.Deleted || latest.CAS != l.docCAS || now >= l.until {
		delete(p.mu.locks, k)
		return docLock{}, false
	}
	return l, true
}

// lockViewLocked is the first half of mutate's lock check: while a lock
// holds on k, a write's fn sees the live version with the lock CAS in place
// of its own, so that a CAS check passes for the lock's holder only.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) lockViewLocked(p *partition, k docKey, live *Document, now int64) *Document {
	if live == nil {
		return nil
	}
	l, ok := p.lockLocked(k, live, now)
	if !ok {
		return live
	}
	return withCAS(live, l.cas)
}

// checkLockLocked is the second half of mutate's lock check, on the result
// of fn (d, err) given the version fn saw: while a lock holds on k, the
// write goes ahead only if fn accepted it and made it with the lock CAS
// (d.CAS, which fn sets to the write's CAS and stamping replaces); any other
// write, a CAS mismatch included, is ErrLocked. A write made by fn's own
// rules (ErrKeyExists for an insert, a bad value) keeps its error.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) checkLockLocked(p *partition, k docKey, latest *Document, now int64, d *Document, err error) error {
	if latest == nil || len(p.mu.locks) == 0 {
		return err
	}
	l, ok := p.lockLocked(k, latest, now)
	if !ok {
		return err
	}
	if err == nil && d.CAS == l.cas {
		return nil // the holder's write: its new version ends the lock
	}
	if err == nil || errors.Is(err, ErrCASMismatch) {
		return fmt.Errorf("%w: %s", ErrLocked, k.key)
	}
	return err
}

// GetLocked returns a live document and locks it for lockTime seconds (0:
// DefaultLockTime; more than MaxLockTime: DefaultLockTime too, as
// Couchbase's getl_max_timeout does). The document
// returned carries the lock CAS, a new CAS above every one handed out: until
// the lock ends, only a write with that CAS succeeds (and ends it), and
// Unlock with it ends it. A document already locked is ErrLocked; a
// missing, deleted or expired one ErrNotFound. Nothing is written: the lock
// is in memory only.
func (c *Collection) GetLocked(ctx context.Context, key string, lockTime int64) (*Document, error) {
	if err := validateKey(key); err != nil {
		return nil, err
	}
	if lockTime <= 0 || lockTime > MaxLockTime {
		lockTime = DefaultLockTime
	}
	k := docKey{cid: c.id, key: key}
	p := c.b.partitionFor(key)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p.mu.Lock()
		if c.b.isClosed() {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		if _, ok := p.mu.pending[k]; ok {
			// A write of k is on its way to disk: lock the version it
			// makes, once committed, never one a failed commit would lose.
			p.mu.Unlock()
			if err := c.b.Sync(ctx); err != nil {
				return nil, err
			}
			continue
		}
		// During the warm-up, a key not loaded yet is loaded from the
		// store first, as a read's or a write's is (fetchMissLocked).
		if _, err := c.b.fetchMissLocked(p, k, true); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		now := c.b.clock.Now()
		d := p.mu.docs.get(k)
		if d == nil || d.Deleted || d.ExpiredAt(now) {
			p.mu.Unlock()
			if d == nil || d.Deleted {
				return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
			}
			// Expired: purge it as a read would (ErrExpired), unless a
			// write made it live again meanwhile: then lock that.
			if _, err := c.Get(ctx, key); err != nil {
				return nil, err
			}
			continue
		}
		if _, ok := p.lockLocked(k, d, now); ok {
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %s", ErrLocked, key)
		}
		if p.mu.locks == nil {
			p.mu.locks = make(map[docKey]docLock)
		} else if len(p.mu.locks) >= lockSweepAt {
			p.sweepLocksLocked(now)
		}
		full, err := c.b.withValueLocked(d) // an ejected value read back
		if err != nil {
			p.mu.Unlock()
			return nil, err
		}
		l := docLock{cas: c.b.nextCAS(now), docCAS: d.CAS, until: now + lockTime}
		p.mu.locks[k] = l
		p.mu.Unlock()
		c.b.touch(p, k)
		c.b.maybeEvict(ctx) // an item read back into memory (fetchMissLocked) counts against the quota
		return withCAS(full, l.cas), nil
	}
}

// Unlock ends the lock on key taken with cas. A wrong cas is ErrLocked; a
// document with no lock holding is ErrNotLocked (Couchbase 7.6's
// NOT_LOCKED); a missing one ErrNotFound. An item read back into memory to
// find the lock counts against the quota: an eviction pass may follow (with
// no deadline of the caller's, as the flusher's pass in applyCommitted).
func (c *Collection) Unlock(key string, cas uint64) error {
	if err := validateKey(key); err != nil {
		return err
	}
	err := c.unlock(key, cas)
	c.b.maybeEvict(context.Background()) // fetchMissLocked may have read the item back, refused or not
	return err
}

// unlock is Unlock under the partition's lock.
func (c *Collection) unlock(key string, cas uint64) error {
	k := docKey{cid: c.id, key: key}
	p := c.b.partitionFor(key)
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.b.isClosed() {
		return ErrClosed
	}
	if _, err := c.b.fetchMissLocked(p, k, false); err != nil { // warm-up: see GetLocked
		return err
	}
	now := c.b.clock.Now()
	d := p.latestLocked(k)
	if d == nil || d.Deleted || d.ExpiredAt(now) {
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	l, ok := p.lockLocked(k, d, now)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotLocked, key)
	}
	if cas != l.cas {
		return fmt.Errorf("%w: %s", ErrLocked, key)
	}
	delete(p.mu.locks, k)
	return nil
}

// Locked reports whether a lock holds now on d, a version Get or Peek
// returned: the KV port then shows CAS all ones, as Couchbase does, so that
// no one but the holder can write with a CAS.
func (c *Collection) Locked(d *Document) bool {
	if d == nil {
		return false
	}
	k := docKey{cid: c.id, key: d.Key}
	p := c.b.partitionFor(d.Key)
	p.mu.RLock()
	defer p.mu.RUnlock()
	l, ok := p.mu.locks[k]
	if !ok || l.docCAS != d.CAS || c.b.clock.Now() >= l.until {
		return false
	}
	latest := p.latestLocked(k)
	return latest != nil && latest.CAS == d.CAS
}

// sweepLocksLocked drops the partition's stale lock entries.
//
// REQUIRES: p.mu held for writing.
func (p *partition) sweepLocksLocked(now int64) {
	for k := range p.mu.locks {
		p.lockLocked(k, p.latestLocked(k), now)
	}
}

// withCAS returns a copy of d with cas as its CAS: its value, resident or
// ejected, stays as it is (the memory owner's bits stay with d).
func withCAS(d *Document, cas uint64) *Document {
	v := d.copyMeta()
	v.Value, v.ejected, v.valueLen = d.Value, d.ejected, d.valueLen
	v.CAS = cas
	return v
}
