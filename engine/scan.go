package engine

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync/atomic"
)

// ListOptions selects the documents Collection.List yields, and their order.
// The zero value lists every live document of the collection in byte order
// of key.
type ListOptions struct {
	// Start and End bound the keys, in the order of reading: with
	// Descending, Start is the highest key and End the lowest. Nil is no
	// bound. Start is always included; End is unless ExclusiveEnd.
	Start, End *string
	// ExclusiveEnd leaves out a document whose key is End (CouchDB's
	// inclusive_end=false).
	ExclusiveEnd bool
	// Descending reads from the highest key down.
	Descending bool
	// Skip passes over that many documents of the range first.
	Skip int
	// Limit stops after that many documents; 0 or less is no limit.
	Limit int
	// Partitions, indexed by partition number, limits the listing to the
	// documents of the partitions set (a cluster node's share of a
	// listing); nil lists every partition. Skip and Limit count the
	// documents listed.
	Partitions []bool

	// metaOnly yields ejected versions as they are (Keys reads the values
	// of its page only).
	metaOnly bool
}

// keyRange returns the bounds of o as a store scan takes them.
func (o *ListOptions) keyRange() keyRange {
	r := keyRange{desc: o.Descending}
	lo, hi := o.Start, o.End
	if o.Descending {
		lo, hi = o.End, o.Start
	}
	if lo != nil {
		r.lo = *lo
		r.loOpen = o.Descending && o.ExclusiveEnd
	}
	if hi != nil {
		r.hi, r.hasHi = *hi, true
		r.hiOpen = !o.Descending && o.ExclusiveEnd
	}
	return r
}

// List returns an iterator over the collection's live documents that o
// selects, in byte order of key (reverse order when o.Descending). Deleted
// and expired documents are never yielded (an expired one is left for the
// expiry pager, as Peek leaves it); a document is seen as last committed,
// as Get and Peek see it, with its value (an ejected value is read back
// from the store for each document yielded, not for those skipped). An error (a closed bucket, ctx's end, a failed
// read of the store) is yielded once, with a nil document, and ends the
// iteration.
//
// On a bucket whose store keeps documents (couchbase), the store's key
// order drives the listing: it reads the keys of the range in order, in
// chunks, and stops when the caller stops pulling, so a page costs what it
// returns plus what it skips, whatever the size of the collection. The
// iteration holds no lock nor read transaction while the caller's loop body
// runs. A document written during the iteration may or may not be yielded;
// one committed before it began and left alone is yielded exactly once,
// and no key is yielded twice.
//
// A bucket kept in memory only (ephemeral, memcached) has no ordered
// index: List visits each partition under its read lock and keeps the
// first Skip+Limit documents of the range (a bounded heap; without a limit,
// the range, sorted), so it costs the size of the bucket in time and the
// page in memory. An ordered
// key set kept up to date by every write would cost every write a shared,
// ordered insert (writers of such buckets commit inline, under their
// partition's lock alone) and heap for each key, against a budget of 100
// bytes a document; listing a cache is administration, not a hot path.
func (c *Collection) List(ctx context.Context, o ListOptions) iter.Seq2[*Document, error] {
	return func(yield func(*Document, error) bool) {
		if c.b.isClosed() {
			yield(nil, ErrClosed)
			return
		}
		if err := ctx.Err(); err != nil {
			yield(nil, err)
			return
		}
		// A listing reads memory for each key: it waits for the warm-up.
		if err := c.b.WaitWarm(ctx); err != nil {
			yield(nil, err)
			return
		}
		skip, limit := o.Skip, o.Limit
		// emit yields d unless skip passes over it, and says whether the
		// iteration goes on.
		emit := func(d *Document) bool {
			if skip > 0 {
				skip--
				return true
			}
			if d.ejected && !o.metaOnly {
				var err error
				if d, err = c.withValueOf(ctx, d); err != nil {
					yield(nil, err)
					return false
				}
				if d == nil {
					return true // gone while its value was read
				}
			}
			if !yield(d, nil) {
				return false
			}
			limit--
			return limit != 0
		}
		if c.b.store.st.durable() {
			c.listStored(ctx, o.keyRange(), o.Partitions, emit, yield)
			return
		}
		keep := 0 // how many of the range's first documents the listing needs (0: all)
		if o.Limit > 0 {
			keep = max(o.Skip, 0) + o.Limit
		}
		docs, err := c.listMemory(ctx, o.keyRange(), o.Partitions, keep)
		if err != nil {
			yield(nil, err)
			return
		}
		for _, d := range docs {
			if !emit(d) {
				return
			}
		}
	}
}

// listStored lists r from the store's ordered keys, calling emit with each
// live document until it returns false; an error goes to yield.
//
// The store holds a record of every key whose committed version memory
// holds, live or not: the flusher publishes a batch (store.onCommit, which
// makes its versions the committed ones in the partitions) only after the
// storage committed it; a bucket's load publishes what the store holds; a
// dropped collection's documents leave memory before their purge reaches
// the store. So the store's keys are a superset of memory's committed keys,
// in order, and memory says which of them are live: a key the store holds
// and memory does not is a commit not yet published or a purge on its way
// (left out, as Get leaves it out), and a stored version newer than
// memory's is one not yet published (memory's is the one shown). The one
// kind of key the store may not hold yet is a write acknowledged from memory
// (durability none or majority) whose flush is still on its way: the
// partitions' acked keys of the range, taken when the listing starts, are
// merged into the store's key walk in order (a key both hold is listed
// once), and each key shows the version reads see (partition.readLocked: an
// acknowledged version before the committed one), so a listing reads its
// own acknowledged writes as Get does. The values come from memory's
// versions (an ejected one read back from the store by emit). A key that
// memory lacks once items left memory whole (evict.go) is read from the
// store, without going back into memory (a listing would fill it).
func (c *Collection) listStored(ctx context.Context, r keyRange, in []bool, emit func(*Document) bool, yield func(*Document, error) bool) {
	now := c.b.clock.Now()
	acked := c.ackedKeys(r, in)
	// show emits key's version as reads see it, if live and of a partition
	// in in, and says whether the listing goes on.
	show := func(key string) bool {
		p := c.b.partitionFor(key)
		if !included(in, p.id) {
			return true
		}
		k := docKey{cid: c.id, key: key}
		// Read before the look in memory, as a get does (Collection.get):
		// a key the warm-up loads, finishing, after the look is not in it,
		// and is read from the store. (List waits for the warm-up, after
		// which this only turns false; the order keeps show right
		// without that wait.)
		allIn := c.b.itemsResident()
		p.mu.RLock()
		d := p.readLocked(k)
		p.mu.RUnlock()
		if hook := c.b.eng.opts.beforeMiss; d == nil && hook != nil {
			hook(key)
		}
		if d == nil && !allIn {
			sd, err := c.b.fetchStored(k)
			switch {
			case errors.Is(err, ErrNotFound):
			case err != nil:
				yield(nil, err)
				return false
			default:
				c.b.countFetch(true) // listed with its value
				p.mu.RLock()
				if d = p.readLocked(k); d == nil { // (read back meanwhile: memory's)
					d = sd
				}
				p.mu.RUnlock()
			}
		}
		if d == nil || d.Deleted || d.ExpiredAt(now) {
			return true
		}
		return emit(d)
	}
	// first reports whether a comes before b in r's order.
	first := func(a, b string) bool { return a != b && a < b != r.desc }
	n := 0
	for key, err := range c.b.store.st.keys(c.id, r) {
		if err != nil {
			yield(nil, fmt.Errorf("%w: list: %w", ErrStorage, err))
			return
		}
		if n++; n%256 == 0 {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			if c.b.isClosed() {
				yield(nil, ErrClosed)
				return
			}
		}
		for len(acked) > 0 && first(acked[0], key) {
			if !show(acked[0]) {
				return
			}
			acked = acked[1:]
		}
		if len(acked) > 0 && acked[0] == key {
			acked = acked[1:]
		}
		if !show(key) {
			return
		}
	}
	for _, key := range acked {
		if !show(key) {
			return
		}
	}
}

// ackedKeys returns the collection's keys within r that have a version
// acknowledged from memory and not yet committed, in r's order. It visits
// every partition's acked set (those in in: see included): the writes on
// their way to disk, few.
func (c *Collection) ackedKeys(r keyRange, in []bool) []string {
	var keys []string
	for _, p := range c.b.parts {
		if !included(in, p.id) {
			continue
		}
		p.mu.RLock()
		for k := range p.mu.acked {
			if k.cid == c.id && r.contains(k.key) {
				keys = append(keys, k.key)
			}
		}
		p.mu.RUnlock()
	}
	slices.Sort(keys)
	if r.desc {
		slices.Reverse(keys)
	}
	return keys
}

// listMemory returns the collection's live documents within r, sorted in
// r's order, visiting every partition; with keep > 0, only the first keep
// of them, found with a bounded heap (memory for keep documents, not for
// the range).
func (c *Collection) listMemory(ctx context.Context, r keyRange, in []bool, keep int) ([]*Document, error) {
	now := c.b.clock.Now()
	// before reports whether a comes before b in r's order.
	before := func(a, b *Document) bool { return a.Key < b.Key != r.desc }
	var found []*Document // with keep: a heap whose root is the last in order
	for _, p := range c.b.parts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !included(in, p.id) {
			continue
		}
		p.mu.RLock()
		t := &p.mu.docs
		t.each(func(i uint32) bool {
			v := t.version(i)
			if v.cid != c.id || v.deleted || isExpired(v.exp, now) {
				return true
			}
			key := t.keyOf(i)
			if !r.contains(key) {
				return true
			}
			switch {
			case keep <= 0:
				found = append(found, t.doc(i))
			case len(found) < keep:
				found = append(found, t.doc(i))
				siftUp(found, len(found)-1, before)
			case key < found[0].Key != r.desc:
				found[0] = t.doc(i)
				siftDown(found, 0, before)
			}
			return true
		})
		p.mu.RUnlock()
	}
	slices.SortFunc(found, func(a, b *Document) int {
		if r.desc {
			a, b = b, a
		}
		return strings.Compare(a.Key, b.Key)
	})
	return found, nil
}

// siftUp restores the heap h (root: the last in order) after h[i] changed.
func siftUp(h []*Document, i int, before func(a, b *Document) bool) {
	for i > 0 {
		parent := (i - 1) / 2
		if !before(h[parent], h[i]) {
			return
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

// siftDown restores the heap h (root: the last in order) after h[i] changed.
func siftDown(h []*Document, i int, before func(a, b *Document) bool) {
	for {
		last := i
		for _, child := range []int{2*i + 1, 2*i + 2} {
			if child < len(h) && before(h[last], h[child]) {
				last = child
			}
		}
		if last == i {
			return
		}
		h[i], h[last] = h[last], h[i]
		i = last
	}
}

// Keys returns the collection's live documents whose keys lie between start
// and end, both included (end "" means no upper bound), in byte order of key:
// skip of them are passed over and at most limit returned (limit <= 0: all).
// total counts every live document in the range, skipped or not. It lists
// with List, reading the whole range to count it: its cost follows the size
// of the range, not of the page asked for.
func (c *Collection) Keys(ctx context.Context, start, end string, skip, limit int) (docs []*Document, total int, err error) {
	return c.KeysIn(ctx, start, end, skip, limit, nil)
}

// KeysIn is Keys for the documents of the partitions in (ListOptions.
// Partitions; nil: all): a cluster node's share of a listing.
func (c *Collection) KeysIn(ctx context.Context, start, end string, skip, limit int, in []bool) (docs []*Document, total int, err error) {
	o := ListOptions{Start: &start, metaOnly: true, Partitions: in}
	if end != "" {
		o.End = &end
	}
	for d, err := range c.List(ctx, o) {
		if err != nil {
			return nil, 0, err
		}
		if total >= skip && (limit <= 0 || len(docs) < limit) {
			docs = append(docs, d)
		}
		total++
	}
	page := docs[:0] // the page's values only
	for _, d := range docs {
		if d.ejected {
			if d, err = c.withValueOf(ctx, d); err != nil {
				return nil, 0, err
			}
			if d == nil {
				continue // gone while its value was read
			}
		}
		page = append(page, d)
	}
	return page, total, nil
}

// withValueOf returns live document d of the collection with its value
// read back from the store when it was ejected: the key's committed version
// then, or nil when that is no longer live.
func (c *Collection) withValueOf(ctx context.Context, d *Document) (*Document, error) {
	d, err := c.b.readCommitted(ctx, c.b.parts[d.Partition], docKey{cid: c.id, key: d.Key}, false)
	if err != nil || d == nil || d.Deleted || d.ExpiredAt(c.b.clock.Now()) {
		return nil, err
	}
	return d, nil
}

// Count returns how many documents of the collection are live, counting
// those whose expiration has passed until the expiry pager (or a read)
// purges them, as curr_items counts them. It costs one atomic load.
func (c *Collection) Count() int64 {
	if v, ok := c.b.live.Load(c.id); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// countLive keeps the collection's count of live documents (Collection.Count,
// and p's for Collection.CountIn) as cur replaces old as the committed
// version of a key of p (either may be absent).
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) countLive(p *partition, old, cur version) {
	wasLive, isLive := old.live(), cur.live()
	if wasLive == isLive {
		return
	}
	cid, delta := cur.cid, int64(1)
	if wasLive {
		cid, delta = old.cid, -1
	}
	b.addLive(p, cid, delta)
}

// addLive adds delta to collection cid's count of live documents, the
// bucket's and p's.
//
// REQUIRES: p.mu held for writing.
func (b *Bucket) addLive(p *partition, cid CollectionID, delta int64) {
	v, ok := b.live.Load(cid)
	if !ok {
		v, _ = b.live.LoadOrStore(cid, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(delta)
	if p.mu.live == nil {
		p.mu.live = make(map[CollectionID]int64)
	}
	if p.mu.live[cid] += delta; p.mu.live[cid] == 0 {
		delete(p.mu.live, cid)
	}
}

// included reports whether partition id is in the set in (ListOptions.
// Partitions): nil holds every partition.
func included(in []bool, id uint16) bool {
	return in == nil || int(id) < len(in) && in[id]
}

// ItemsIn is curr_items for the documents of the partitions in (nil:
// all), every collection's: a cluster node's share of a bucket's item
// count.
func (b *Bucket) ItemsIn(in []bool) int64 {
	var n int64
	for _, p := range b.parts {
		if included(in, p.id) {
			p.mu.RLock()
			for _, c := range p.mu.live {
				n += c
			}
			p.mu.RUnlock()
		}
	}
	return n
}

// CountIn is Count for the documents of the partitions in (indexed by
// partition number; nil: all): a cluster node's share of a listing's
// total_rows (its other partitions are other nodes' to count).
func (c *Collection) CountIn(in []bool) int64 {
	if in == nil {
		return c.Count()
	}
	var n int64
	for _, p := range c.b.parts {
		if included(in, p.id) {
			p.mu.RLock()
			n += p.mu.live[c.id]
			p.mu.RUnlock()
		}
	}
	return n
}

// Meta returns the metadata of key's newest version as reads see it (a
// live document or a deletion's tombstone): every field but Value, which is
// nil. It reads nothing from disk for a key memory holds, its value ejected
// or not (an SDK's Exists, GET_META, needs no value: Couchbase answers it
// from the hash table); a key out of memory whole (full eviction, or not
// warmed up yet) is read from the store. A key missing, expired or whose
// tombstone the metadata purge removed is ErrNotFound.
func (c *Collection) Meta(key string) (*Document, error) {
	if err := validateKey(key); err != nil {
		return nil, err
	}
	if c.b.isClosed() {
		return nil, ErrClosed
	}
	p := c.b.partitionFor(key)
	k := docKey{cid: c.id, key: key}
	resident := c.b.itemsResident() // before the look (readMiss)
	p.mu.RLock()
	d := p.readLocked(k)
	p.mu.RUnlock()
	if d == nil {
		var err error
		if d, err = c.b.readMiss(context.Background(), p, k, false, resident); err != nil {
			return nil, err
		}
	}
	if d == nil || !d.Deleted && d.ExpiredAt(c.b.clock.Now()) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return d.copyMeta(), nil
}

// Tombstone returns the tombstone of a deleted document: its newest
// version when that is a deletion (acknowledged from memory or committed,
// as reads see it). A key that is live, expired or was never
// written (or whose tombstone the metadata purge removed) is ErrNotFound.
func (c *Collection) Tombstone(key string) (*Document, error) {
	if c.b.isClosed() {
		return nil, ErrClosed
	}
	p := c.b.partitionFor(key)
	k := docKey{cid: c.id, key: key}
	resident := c.b.itemsResident() // before the look (readMiss)
	p.mu.RLock()
	d := p.readLocked(k) // a deletion acknowledged from memory too, as Get reads it
	p.mu.RUnlock()
	if d == nil {
		// Out of memory whole, or not loaded yet: the store's. (A
		// tombstone is never ejected, so readMiss waits on nothing.)
		var err error
		if d, err = c.b.readMiss(context.Background(), p, k, false, resident); err != nil {
			return nil, err
		}
	}
	if d == nil || !d.Deleted {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return d, nil
}
