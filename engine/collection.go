package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// Collection is a handle on one collection of a bucket. It is cheap to make
// and safe for concurrent use.
type Collection struct {
	b  *Bucket
	id CollectionID
}

// ID returns the collection's ID.
func (c *Collection) ID() CollectionID { return c.id }

// Bucket returns the collection's bucket.
func (c *Collection) Bucket() *Bucket { return c.b }

// WriteOptions are the per-call options of a mutation. A nil *WriteOptions is
// valid and means no expiry, no flags, no CAS check.
type WriteOptions struct {
	// Expiry is the expiry as a client gives it: 0 none, 1..2592000 relative
	// seconds, larger an absolute Unix time, negative expired at once. The
	// effective maxTTL then applies.
	Expiry int64
	// PreserveExpiry keeps a live document's current expiration instead of
	// resetting it; for a new document Expiry applies.
	PreserveExpiry bool
	// CAS, if non-zero, must equal the document's current CAS.
	CAS uint64
	// Flags are the client's opaque flags, stored with the value.
	Flags uint32
	// Durability is the level the client asks for; the bucket's
	// durabilityMinLevel raises it, never lowers it. DurabilityUnset takes
	// the bucket's minimum. A level that is none of the four names, or
	// one that persists (majorityAndPersistActive, persistToMajority) on
	// a bucket that keeps nothing on disk, fails the write with
	// ErrInvalidDurability.
	Durability Durability
	// Resident asks for the write to be done from memory alone, for a
	// caller that must not wait for the disk (an event loop serving many
	// connections): when it would read the store first (the ejected value
	// a touch builds on, the metadata of a key out of memory whole or not
	// loaded by the warm-up yet, which the Bloom filter does not rule
	// out) it returns ErrWouldBlock having changed nothing, and the same
	// write, called where it may wait, does it. So does a write at none
	// or majority that would wait for its commit because the writes
	// acknowledged from memory have reached their bound (MaxAckedBytes,
	// a whole batch queued): that wait is as long as the disk's; and so
	// does every write of a bucket whose writes are replicated
	// (Bucket.Replicated), which waits for its log entry's commit. Waiting
	// for the write's own commit at a durable level is not a read:
	// Resident does not change it.
	Resident bool
}

func (o *WriteOptions) get() WriteOptions {
	if o == nil {
		return WriteOptions{}
	}
	return *o
}

// Get returns a live document. A missing, deleted or expired document is
// ErrNotFound; an expired one is deleted on the way (lazy expiry) and the
// error is an *ExpiredError (errors.Is ErrExpired, which wraps ErrNotFound).
// On a collection with IdleTTL or MaxLifetime, Get also slides the
// document's expiration (see CollectionSettings) without waiting for disk:
// it returns the version it found, and the extension, queued for the next
// group commit, is visible once committed.
func (c *Collection) Get(ctx context.Context, key string) (*Document, error) {
	return c.get(ctx, key, false)
}

// GetResident is Get answered from memory alone, for a caller that must not
// wait for the disk (an event loop serving many connections): when the
// answer needs the store (a value ejected from memory, a key the warm-up
// has not loaded yet or one out of memory whole that the Bloom filter does
// not rule out) it returns ErrWouldBlock, having read and changed
// nothing, and Get, called where it may wait, answers. An expired document
// is answered as Get does: its deletion does not wait for disk.
func (c *Collection) GetResident(ctx context.Context, key string) (*Document, error) {
	return c.get(ctx, key, true)
}

// get is Get, or GetResident when resident.
func (c *Collection) get(ctx context.Context, key string, resident bool) (*Document, error) {
	if err := validateKey(key); err != nil {
		return nil, err
	}
	if c.b.isClosed() {
		return nil, ErrClosed
	}
	k := docKey{cid: c.id, key: key}
	p := c.b.partitionFor(key)
	var d *Document
	var err error
	// Read before the look in memory: a key the warm-up loads after the
	// look is not in it, and is found by readMiss.
	allIn := c.b.itemsResident()
	if resident {
		// readCommitted's look in memory; every way of Get's to the
		// store must answer ErrWouldBlock here.
		p.mu.RLock()
		d = p.readTouchLocked(k, memMode(c.b.mem.mode.Load()).evicts())
		p.mu.RUnlock()
		if (d != nil && d.ejected && !d.ExpiredAt(c.b.clock.Now())) || (d == nil && !allIn && c.b.mayBeStored(p, k)) {
			return nil, ErrWouldBlock
		}
	} else if d, err = c.b.readCommitted(ctx, p, k, true); err != nil {
		return nil, err
	}
	if d == nil {
		if hook := c.b.eng.opts.beforeMiss; hook != nil {
			hook(key)
		}
		if d, err = c.b.readMiss(ctx, p, k, true, allIn); err != nil {
			return nil, err
		}
	}
	if d == nil || d.Deleted {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if now := c.b.clock.Now(); d.ExpiredAt(now) {
		// The expiration decides the answer, and leaves the counts at once
		// (expireQueued): the read does not wait for its commit (a get on
		// the memcached port's event loop would hold up the loop's other
		// connections meanwhile).
		if _, _, err := c.b.expireQueued(k, d.Expiration, &c.b.stats.expiredAccess); err != nil {
			return nil, err
		}
		return nil, &ExpiredError{Doc: d}
	}
	c.extend(p, k, d)
	return d, nil
}

// Peek returns a live document without side effects: a missing, deleted or
// expired document is ErrNotFound, and an expired one is left in place for the
// expiry pager (views' include_docs reads this way, so a query never purges).
// An ejected value is read back from the store, as Get reads it.
func (c *Collection) Peek(key string) (*Document, error) {
	if c.b.isClosed() {
		return nil, ErrClosed
	}
	p := c.b.partitionFor(key)
	k := docKey{cid: c.id, key: key}
	allIn := c.b.itemsResident() // before the look: see get
	d, err := c.b.readCommitted(context.Background(), p, k, false)
	if err != nil {
		return nil, err
	}
	if d == nil {
		if d, err = c.b.readMiss(context.Background(), p, k, false, allIn); err != nil {
			return nil, err
		}
	}
	if d == nil || d.Deleted || d.ExpiredAt(c.b.clock.Now()) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return d, nil
}

// Insert stores a new document; ErrKeyExists if a live one has the key.
func (c *Collection) Insert(ctx context.Context, key string, value []byte, opts *WriteOptions) (*Document, error) {
	o := opts.get()
	return c.store(ctx, key, value, o, func(old *Document) error {
		if old != nil {
			return fmt.Errorf("%w: %s", ErrKeyExists, key)
		}
		return nil
	})
}

// Upsert stores a document whether or not one exists (subject to opts.CAS).
func (c *Collection) Upsert(ctx context.Context, key string, value []byte, opts *WriteOptions) (*Document, error) {
	return c.store(ctx, key, value, opts.get(), nil)
}

// Replace stores a document over an existing live one; ErrNotFound if none.
func (c *Collection) Replace(ctx context.Context, key string, value []byte, opts *WriteOptions) (*Document, error) {
	return c.store(ctx, key, value, opts.get(), func(old *Document) error {
		if old == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return nil
	})
}

func (c *Collection) store(ctx context.Context, key string, value []byte, o WriteOptions, check func(old *Document) error) (*Document, error) {
	if len(value) > MaxValueLen {
		return nil, fmt.Errorf("%w: value is %d bytes, the limit is %d", ErrValueTooLarge, len(value), MaxValueLen)
	}
	val := append([]byte(nil), value...)
	typ := DetectType(val)
	return c.b.mutate(ctx, docKey{cid: c.id, key: key}, o.Durability, o.Resident, func(old *Document, now int64) (*Document, error) {
		cs, maxTTL := c.b.ttlFor(c.id)
		var dttl int64
		if cs.DefaultTTL != 0 {
			var err error
			if dttl, err = DocTTL(val, typ); err != nil {
				return nil, err
			}
		}
		if check != nil {
			if err := check(old); err != nil {
				return nil, err
			}
		}
		if err := checkCAS(key, old, o.CAS); err != nil {
			return nil, err
		}
		created := now
		if old != nil && old.CreatedAt != 0 {
			created = old.CreatedAt
		}
		d := &Document{Value: val, Type: typ, Flags: o.Flags, TS: now, CreatedAt: created, CAS: o.CAS}
		if o.PreserveExpiry && old != nil {
			d.Expiration, d.ExpiryPinned = old.Expiration, old.ExpiryPinned
		} else {
			d.Expiration, d.ExpiryPinned = writeExpiration(now, created, o.Expiry, dttl, cs, maxTTL)
		}
		return d, nil
	})
}

// Delete deletes a live document, leaving a tombstone; ErrNotFound if none.
// opts.CAS, if set, must match.
func (c *Collection) Delete(ctx context.Context, key string, opts *WriteOptions) (*Document, error) {
	o := opts.get()
	return c.b.mutate(ctx, docKey{cid: c.id, key: key}, o.Durability, o.Resident, func(old *Document, now int64) (*Document, error) {
		if old == nil {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		if err := checkCAS(key, old, o.CAS); err != nil {
			return nil, err
		}
		return &Document{Deleted: true, DeletedAt: now, Type: old.Type, CAS: o.CAS}, nil
	})
}

// Touch sets a live document's expiry and leaves its value and flags alone.
// The effective maxTTL caps it, and on a collection with IdleTTL or
// MaxLifetime so does the sliding rule, as for a write's explicit expiry. It is a mutation: new CAS and sequence number.
// The expiration it sets is pinned: defaultTTL re-evaluations and sliding
// reads leave it alone until the document's next write.
func (c *Collection) Touch(ctx context.Context, key string, expiry int64) (*Document, error) {
	return c.TouchWith(ctx, key, &WriteOptions{Expiry: expiry})
}

// TouchWith is Touch with the expiry, the durability level and Resident
// of opts (its other fields do not count).
func (c *Collection) TouchWith(ctx context.Context, key string, opts *WriteOptions) (*Document, error) {
	o := opts.get()
	expiry := o.Expiry
	return c.b.mutateValue(ctx, docKey{cid: c.id, key: key}, o.Durability, o.Resident, func(old *Document, now int64) (*Document, error) {
		if old == nil {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		cs, maxTTL := c.b.ttlFor(c.id)
		created := old.CreatedAt
		if created == 0 {
			created = now // a record from before CreatedAt was kept
		}
		// As a write's explicit expiry: maxTTL caps it, and on a sliding
		// collection so does min(now + idleTTL, created + maxLifetime), so
		// no touch carries a document past its cap (a touch to 0, which
		// removes the expiration, included).
		exp := LimitExpiry(now, AbsoluteExpiry(now, expiry), maxTTL)
		if s := slide(now, created, cs); s != 0 {
			exp = earliest(exp, LimitExpiry(now, s, maxTTL))
		}
		return &Document{
			Value: old.Value, Type: old.Type, Flags: old.Flags,
			Expiration: exp,
			TS:         old.TS, CreatedAt: old.CreatedAt, ExpiryPinned: true,
		}, nil
	})
}

// GetAndTouch touches a live document and returns it, in one step.
func (c *Collection) GetAndTouch(ctx context.Context, key string, expiry int64) (*Document, error) {
	return c.Touch(ctx, key, expiry)
}

func checkCAS(key string, old *Document, cas uint64) error {
	if cas == 0 {
		return nil
	}
	if old == nil {
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if old.CAS != cas {
		return fmt.Errorf("%w: %s", ErrCASMismatch, key)
	}
	return nil
}

// collectionIDs returns the IDs of the bucket's collections, in no order.
func (b *Bucket) collectionIDs() []CollectionID {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return slices.Collect(maps.Keys(b.mu.byID))
}

// Flush deletes every live document of every collection of the bucket, as
// memcached's flush_all does, leaving tombstones so views drop their rows. It
// returns how many it deleted. A bucket whose writes are replicated refuses
// it (ErrInvalidOp): its cluster flushes it, each partition by its leader
// (StartFlush).
func (b *Bucket) Flush(ctx context.Context) (int, error) {
	if b.localWritesOff() {
		return 0, fmt.Errorf("%w: a replicated bucket is flushed by its cluster, each partition by its leader, not by one node", ErrInvalidOp)
	}
	if err := b.WaitWarm(ctx); err != nil {
		return 0, err
	}
	release, err := b.allKeysIn(ctx, b.collectionIDs())
	if err != nil {
		return 0, err
	}
	defer release()
	n := 0
	var last *commitBatch
	for _, p := range b.parts {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		p.mu.Lock()
		if b.isClosed() {
			p.mu.Unlock()
			return n, ErrClosed
		}
		now := b.clock.Now()
		keys := p.keysLocked(nil)
		for _, k := range keys {
			d := p.latestLocked(k)
			if d.Deleted {
				continue
			}
			cb, err := b.publishLocked(p, k, d, &Document{Deleted: true, DeletedAt: now, Type: d.Type}, now)
			if err != nil {
				p.mu.Unlock()
				return n, err
			}
			if cb != nil {
				last = cb
			}
			n++
		}
		p.mu.Unlock()
	}
	return n, last.wait(ctx)
}
