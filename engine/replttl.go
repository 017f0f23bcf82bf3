package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// The TTL re-evaluation in a replicated bucket (issue 22). On one node,
// UpdateCollection re-writes the expiration of every live, unpinned
// document whose collection's new settings derive another one, as a touch
// (same value, meta.ts and creation, a new CAS, revision and sequence
// number). In a replicated bucket each such touch is a replicated write:
// the node that leads a partition decides it on the key's live version
// and proposes it conditioned on that version (replWrite's usual
// condition), a new CAS from the proposer as a touch's; every replica
// applies it with the same sequence number and CAS. A key written between
// the decision and the apply keeps that write: the touch is refused, and
// decided again on the newer version, which (written under the new
// settings) usually needs none. Proposals go out replExpiryInFlight at a
// time, as the pager's do.
//
// A cluster keeps the settings in the bucket's manifest (Manifest.
// UpdateCollection counts a TTLRev); every node that applies a manifest
// changing a collection's settings re-evaluates, in the background, the
// partitions it leads then (ApplyManifest; a node leading none proposes
// nothing). What a leader change or a crash during the pass leaves: the
// partitions a node stopped leading mid-pass, or led when it died, keep
// the expirations not yet re-written until each document's next write (or
// a sliding read), which derives its expiration under the new settings;
// the pager expires by the expiration documents have. Applying the
// settings again (a PATCH with the same settings counts a new TTLRev)
// re-runs the pass on every node, and a document already right proposes
// nothing.

// ttlPasses are a bucket's re-evaluations started by applied manifests,
// one a collection: a later one for the collection cancels the earlier.
type ttlPasses struct {
	mu     sync.Mutex
	passes map[CollectionID]*ttlPass
	closed bool
	wg     sync.WaitGroup
}

// ttlPass is one background re-evaluation.
type ttlPass struct {
	uid    uint64 // the manifest UID that started it
	cancel context.CancelFunc
	done   chan struct{} // closed when n and err are set
	n      int
	err    error
}

// start re-evaluates collection cid of b in the background, for manifest
// uid, after cancelling (and waiting out) the collection's earlier pass.
func (t *ttlPasses) start(b *Bucket, cid CollectionID, uid uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if t.passes == nil {
		t.passes = map[CollectionID]*ttlPass{}
	}
	old := t.passes[cid]
	ctx, cancel := context.WithCancel(context.Background())
	p := &ttlPass{uid: uid, cancel: cancel, done: make(chan struct{})}
	t.passes[cid] = p
	t.wg.Go(func() {
		defer cancel()
		if old != nil {
			old.cancel()
			<-old.done
		}
		p.n, p.err = b.reevaluate(ctx, cid)
		close(p.done)
		if p.err != nil && ctx.Err() == nil && !errors.Is(p.err, ErrCollectionNotFound) && !errors.Is(p.err, ErrClosed) {
			b.eng.log.Warn("TTL re-evaluation stopped; the documents not re-written keep their expiration until their next write",
				"bucket", b.name, "collection", uint32(cid), "reevaluated", p.n, "err", p.err)
		}
	})
}

// forget cancels the pass of a dropped collection.
func (t *ttlPasses) forget(cid CollectionID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.passes[cid]; p != nil {
		p.cancel()
		delete(t.passes, cid)
	}
}

// close cancels the passes, waits for them to return, and starts no more.
func (t *ttlPasses) close() {
	t.mu.Lock()
	t.closed = true
	for _, p := range t.passes {
		p.cancel()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// WaitReevaluation waits for this node's re-evaluation of collection cid
// started by applying a manifest with UID uid or later (ApplyManifest)
// and returns how many documents it re-wrote here: on a replicated
// bucket, those of the partitions this node leads. It returns 0 and no
// error when no such pass was started since the bucket opened.
func (b *Bucket) WaitReevaluation(ctx context.Context, cid CollectionID, uid uint64) (int, error) {
	t := &b.repl.ttl
	t.mu.Lock()
	p := t.passes[cid]
	t.mu.Unlock()
	if p == nil || p.uid < uid {
		return 0, nil
	}
	select {
	case <-p.done:
		return p.n, p.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// ttlChanged returns the IDs of the collections in both old and new whose
// TTL settings (or TTLRev) differ.
func ttlChanged(old, new map[string]map[string]collectionInfo) []CollectionID {
	was := map[CollectionID]collectionInfo{}
	for _, colls := range old {
		for _, ci := range colls {
			was[ci.ID] = ci
		}
	}
	var out []CollectionID
	for _, colls := range new {
		for _, ci := range colls {
			if w, ok := was[ci.ID]; ok && (w.settings() != ci.settings() || w.TTLRev != ci.TTLRev) {
				out = append(out, ci.ID)
			}
		}
	}
	return out
}

// reevaluateReplicated is reevaluate for a replicated bucket: it goes
// through the partitions this node leads, proposing each re-written
// expiration as a replicated write, and returns how many were applied. A
// partition whose leadership moves away mid-pass is left (ErrNotMyVBucket
// is no failure).
func (b *Bucket) reevaluateReplicated(ctx context.Context, r Replicator, cid CollectionID) (int, error) {
	if err := b.WaitWarm(ctx); err != nil {
		return 0, err
	}
	release, err := b.allKeysIn(ctx, []CollectionID{cid})
	if err != nil {
		return 0, err
	}
	defer release()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		n      int
		first  error
		failed atomic.Bool
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
		failed.Store(true)
	}
	slots := make(chan struct{}, replExpiryInFlight)
parts:
	for _, p := range b.parts {
		if err := ctx.Err(); err != nil {
			fail(err)
			break
		}
		if err := b.writable(cid); err != nil {
			fail(err)
			break
		}
		if !leads(ctx, r, int(p.id)) {
			continue // its leader re-evaluates it
		}
		p.mu.Lock()
		keys := p.keysLocked(func(c CollectionID) bool { return c == cid })
		p.mu.Unlock()
		var lost atomic.Bool
		for _, k := range keys {
			if lost.Load() {
				break
			}
			if failed.Load() {
				break parts
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				fail(ctx.Err())
				break parts
			}
			wg.Go(func() {
				defer func() { <-slots }()
				applied, err := b.reevaluateKey(ctx, r, p, k)
				switch {
				case errors.Is(err, ErrNotMyVBucket):
					lost.Store(true) // leadership moved: the partition is left
				case err != nil:
					fail(err)
				case applied:
					mu.Lock()
					n++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return n, first
}

// reevaluateKey proposes k's re-evaluated expiration, if its live version
// needs one, and reports whether a version was applied. A key written
// before the touch applied is decided again on the newer version.
func (b *Bucket) reevaluateKey(ctx context.Context, r Replicator, p *partition, k docKey) (bool, error) {
	for range maxReplConflicts {
		entry, err := b.decideReevaluation(p, k)
		if entry == nil || err != nil {
			return false, err
		}
		res, err := r.Replicate(ctx, int(p.id), entry)
		switch {
		case err != nil:
			return false, err
		case errors.Is(res.Err, errReplConflict), errors.Is(res.Err, errReplApplied):
			continue // the key changed: decide again on what it is now
		case res.Err != nil:
			return false, res.Err
		default:
			return res.Doc != nil, nil
		}
	}
	return false, nil
}

// decideReevaluation returns the entry that re-writes k's expiration as
// its collection's settings derive it now (a touch: same value, meta.ts and
// creation, a new CAS and revision), conditioned on the live version it
// was derived from; nil when there is none to re-write: the key is not
// live, its expiration is pinned, or it is already the derived one.
func (b *Bucket) decideReevaluation(p *partition, k docKey) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := b.writable(k.cid); err != nil {
		return nil, err
	}
	if _, err := b.fetchMissLocked(p, k, false); err != nil {
		return nil, err
	}
	now := b.clock.Now()
	cur := p.latestLocked(k)
	if cur == nil || cur.Deleted || cur.ExpiredAt(now) || cur.ExpiryPinned {
		return nil, nil
	}
	cs, maxTTL := b.ttlFor(k.cid)
	// The document's "ttl" field counts, and the touch carries the value.
	cur, err := b.withValueLocked(cur)
	if err != nil {
		return nil, err
	}
	exp := rederive(now, cur, cs, maxTTL)
	if exp == cur.Expiration {
		return nil, nil
	}
	w := replWrite{prevSeq: cur.Seq, now: now}
	w.doc = Document{Key: k.key, Collection: k.cid, Value: cur.Value, Type: cur.Type, Flags: cur.Flags,
		Expiration: exp, TS: cur.TS, CreatedAt: cur.CreatedAt, CAS: b.nextCAS(now), RevSeq: cur.RevSeq + 1}
	return w.encode(), nil
}
