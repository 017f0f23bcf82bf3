package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Reads of values that are not in memory. A couchbase bucket's memory
// owner ejects the values of committed versions (memory.go, ejectLocked); every
// path that hands a Document out of the engine, or builds a new version on
// an old one's value, reads the value back from the store here first, so
// no caller ever sees an ejected version.

// errReplaced says that the version whose value was asked for is no longer
// its key's committed version: the caller reads the key again, or, reading
// the change feed, steps over the version as superseded (the newer one
// comes later in the feed).
var errReplaced = errors.New("engine: version replaced")

// fetchStored reads k's stored version from the bucket's store: a read
// from the store on a miss. It returns an error wrapping ErrNotFound when
// the store holds none, ErrStorage when the read fails.
func (b *Bucket) fetchStored(k docKey) (*Document, error) {
	if hook := b.eng.opts.FetchHook; hook != nil {
		hook(b.name, k.key)
	}
	d, err := b.store.st.doc(k)
	switch {
	case err == nil:
		return d, nil
	case errors.Is(err, ErrNotFound):
		return nil, err
	case b.isClosed():
		return nil, ErrClosed
	}
	return nil, fmt.Errorf("%w: read %q: %w", ErrStorage, k.key, err)
}

// withValue returns d, a committed version read from its partition's map,
// with its value: d itself when the value is resident; else a copy carrying
// the value read from the store (counted in ep_bg_fetched), which, with
// keep, also goes back into memory in d's place while the bucket is below
// its high-water mark (a client's read keeps it; a change-feed reader, which
// reads each document once, as an index build does, does not). It returns
// errReplaced when d stopped being its key's committed version meanwhile.
func (b *Bucket) withValue(ctx context.Context, d *Document, keep bool) (*Document, error) {
	if !d.ejected {
		return d, nil
	}
	k := docKey{cid: d.Collection, key: d.Key}
	p := b.parts[d.Partition]
	for synced := false; ; synced = true {
		sd, err := b.fetchStored(k)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if err == nil && sd.Seq == d.Seq && sd.CAS == d.CAS && !sd.Deleted {
			b.mem.bgFetched.Add(1)
			full := d.withValue(sd.Value)
			if keep {
				b.restore(p, k, d, full)
			}
			return full, nil
		}
		p.mu.RLock()
		i, ok := p.mu.docs.find(k)
		replaced := !ok || p.mu.docs.recs[i].seq != d.Seq
		p.mu.RUnlock()
		if replaced {
			return nil, errReplaced // (a copy of d read back is d still)
		}
		if synced {
			return nil, fmt.Errorf("%w: document %q: the store holds another version than the committed one (seq %d)", ErrStorage, k.key, d.Seq)
		}
		// The store already holds a newer version that the flusher has not
		// published yet: wait for it, then look again.
		if err := b.Sync(ctx); err != nil {
			return nil, err
		}
	}
}

// withValues is withValue(ctx, d, false) for each of docs, committed
// versions read from their partitions' maps (a batch of the change feed),
// reading the values of the ejected ones from the store together, in key
// order, in one read (storage.docs) rather than one random point read each.
// full[i] is docs[i] with its value, or nil when docs[i] was replaced
// meanwhile (superseded). A version the batched read finds at another
// version than docs[i] (a newer one the flusher has not published yet, or
// none) goes through withValue alone, which waits or steps over it as it
// would have. n is how many of docs were dealt with: all of them, or, on
// err, those before the first version whose value could not be read, so
// that a feed reader stops before that version and skips nothing.
func (b *Bucket) withValues(ctx context.Context, docs []*Document) (full []*Document, n int, err error) {
	full = make([]*Document, len(docs))
	var ejected []int
	for i, d := range docs {
		if d.ejected {
			ejected = append(ejected, i)
		} else {
			full[i] = d
		}
	}
	if len(ejected) > 0 {
		first := ejected[0]
		slices.SortFunc(ejected, func(x, y int) int {
			return compareDocKeys(docKey{cid: docs[x].Collection, key: docs[x].Key}, docKey{cid: docs[y].Collection, key: docs[y].Key})
		})
		keys := make([]docKey, len(ejected))
		for j, i := range ejected {
			keys[j] = docKey{cid: docs[i].Collection, key: docs[i].Key}
		}
		stored, err := b.store.st.docs(keys)
		if err != nil {
			if b.isClosed() {
				return full, first, ErrClosed
			}
			return full, first, fmt.Errorf("%w: read %d values: %w", ErrStorage, len(keys), err)
		}
		for j, i := range ejected {
			d, sd := docs[i], stored[j]
			if sd != nil && sd.Seq == d.Seq && sd.CAS == d.CAS && !sd.Deleted {
				b.mem.bgFetched.Add(1)
				full[i] = d.withValue(sd.Value)
			}
		}
	}
	for i, d := range docs {
		if full[i] != nil {
			continue
		}
		f, err := b.withValue(ctx, d, false)
		switch {
		case errors.Is(err, errReplaced):
		case err != nil:
			return full, i, err
		default:
			full[i] = f
		}
	}
	return full, len(docs), nil
}

// restore puts full, ejected version d with its value read back, in d's
// place, if d is still k's committed version and the bucket is below its
// high-water mark (a read never makes the bucket evict).
func (b *Bucket) restore(p *partition, k docKey, d, full *Document) {
	if b.memUsed()+int64(len(full.Value)) > b.mem.high() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	i, ok := p.mu.docs.find(k)
	if !ok || !p.mu.docs.same(i, d) || b.isClosed() {
		return
	}
	slot, old := p.mu.docs.put(k, full)
	b.published(p, slot, old, p.mu.docs.version(slot))
}

// readCommitted returns the version of k that reads see (nil if none;
// tombstones included: partition.readLocked, the committed version unless a
// newer one was acknowledged from memory) with its value, reading the key
// again when its version was replaced while its value was read. With
// touch, the committed version found is marked recently used (a client's
// read, for eviction's second chance).
func (b *Bucket) readCommitted(ctx context.Context, p *partition, k docKey, touch bool) (*Document, error) {
	for {
		p.mu.RLock()
		d := p.readTouchLocked(k, touch && memMode(b.mem.mode.Load()).evicts())
		p.mu.RUnlock()
		if d == nil || !d.ejected || d.ExpiredAt(b.clock.Now()) {
			// An expired version is answered from its metadata: every
			// reader takes it for absent, so its value is not read.
			return d, nil
		}
		full, err := b.withValue(ctx, d, true)
		if !errors.Is(err, errReplaced) {
			return full, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// withValueLocked is withValue for a caller holding p's lock for writing
// that found d as the newest version of its key (nothing pending): the
// store then holds d's version, so the value is read under the lock, once.
// It is not put back into memory.
//
// REQUIRES: p.mu held for writing, d the newest version of its key.
func (b *Bucket) withValueLocked(d *Document) (*Document, error) {
	if !d.ejected {
		return d, nil
	}
	k := docKey{cid: d.Collection, key: d.Key}
	sd, err := b.fetchStored(k)
	if err == nil && (sd.Seq != d.Seq || sd.CAS != d.CAS || sd.Deleted) {
		err = fmt.Errorf("%w: document %q: the store holds another version than the committed one (seq %d, stored %d)", ErrStorage, k.key, d.Seq, sd.Seq)
	}
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			err = fmt.Errorf("%w: document %q (seq %d) is not in the store: %w", ErrStorage, k.key, d.Seq, err)
		}
		return nil, err
	}
	b.mem.bgFetched.Add(1)
	return d.withValue(sd.Value), nil
}
