package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
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
// nothing). A partition the pass did not finish here — led by no node
// at that moment (an election), led by this node only later, lost
// mid-pass, or stopped by a temporary failure — is caught up: while the
// pass is the collection's latest, the node looks every ttlCatchUp for
// partitions it leads now and has not finished, and re-evaluates those.
// Every partition therefore gets a full pass from a leader once it has
// one, whichever node that is.
//
// A catch-up judges each document by itself, not by when this node
// applied the settings: nodes apply a manifest at their own pace, and a
// leader that had not yet applied it may have written a document under
// the old settings after this node did. Without a sliding rule the
// settings derive one expiration from a document (its last write's time,
// its "ttl" field), so a catch-up re-writes exactly the documents whose
// expiration is another, whoever wrote them when. A sliding rule counts
// from a time too, and a catch-up cannot know when a document was last
// read: it leaves every expiration the new settings could have given
// the document since the change (from the rule counted from the change's
// time, or from its last write if later, up to the rule counted from
// now: an on-time pass's, a later write's or a later read's), and
// re-writes any other with the rule counted from that time (a catch-up an
// hour later gives no idle document another idleTTL). The change's time
// is the one the manifest carries (Manifest.UpdateCollection's at), the
// same on every node, so a document another node's on-time pass already
// did is left as it is (clocks apart by more than the pass's own time
// aside). A partition another node already did thus costs its new leader
// a scan and proposes nothing; a leader that dies mid-pass is caught up
// the same way. What a restart leaves: a restarted node applies the manifest it
// holds without a pass, so a partition no node finished whose next
// leader restarted since the change keeps the expirations not yet
// re-written until each document's next write (or a sliding read), which
// derives its expiration under the new settings; the pager expires by
// the expiration documents have. Applying the settings again (a PATCH
// with the same settings counts a new TTLRev) re-runs the pass on every
// node, and a document already right proposes nothing.

// ttlCatchUp is how often a pass looks for partitions this node has come
// to lead since it went by them.
const ttlCatchUp = time.Second

// ttlPasses are a bucket's re-evaluations started by applied manifests,
// one a collection: a later one for the collection cancels the earlier.
type ttlPasses struct {
	mu     sync.Mutex
	passes map[CollectionID]*ttlPass
	closed bool
	wg     sync.WaitGroup
	// catchUp, when set, replaces ttlCatchUp (tests).
	catchUp time.Duration
}

// ttlPass is one background re-evaluation.
type ttlPass struct {
	uid    uint64 // the manifest UID that started it
	cancel context.CancelFunc
	done   chan struct{} // closed when n and err are set
	exited chan struct{} // closed when its catch-up has returned too
	n      int           // documents the first pass re-wrote here
	err    error
	// caughtUp counts the documents re-written since, in partitions this
	// node came to lead (or could propose to again) after the first pass.
	caughtUp atomic.Int64
}

// ttlBase is what a catch-up re-evaluates against: the time of the
// settings change, from which a sliding rule counts at the earliest.
type ttlBase struct {
	at int64
}

// newTTLBase is the base of a change made at at (0: unknown, taken as
// now), never later than now.
func newTTLBase(b *Bucket, at int64) *ttlBase {
	now := b.clock.Now()
	if at <= 0 || at > now {
		at = now
	}
	return &ttlBase{at: at}
}

// start re-evaluates collection cid of b in the background, for manifest
// uid whose change of the settings was made at at (its TTLAt), after
// cancelling (and waiting out) the collection's earlier pass.
func (t *ttlPasses) start(b *Bucket, cid CollectionID, uid uint64, at int64) {
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
	p := &ttlPass{uid: uid, cancel: cancel, done: make(chan struct{}), exited: make(chan struct{})}
	t.passes[cid] = p
	every := t.catchUp
	if every <= 0 {
		every = ttlCatchUp
	}
	base := newTTLBase(b, at)
	t.wg.Go(func() {
		defer close(p.exited)
		defer cancel()
		if old != nil {
			old.cancel()
			<-old.exited
		}
		r := b.replicator()
		if r == nil {
			p.n, p.err = b.reevaluate(ctx, cid)
			close(p.done)
			p.warn(ctx, b, cid)
			return
		}
		done := make([]bool, len(b.parts))
		p.n, p.err = b.reevaluateReplicated(ctx, r, cid, done, nil)
		close(p.done)
		p.warn(ctx, b, cid)
		p.catchUp(ctx, b, cid, done, base, every)
	})
}

// warn logs a first pass that stopped on an error worth an operator's
// eye.
func (p *ttlPass) warn(ctx context.Context, b *Bucket, cid CollectionID) {
	if p.err != nil && ctx.Err() == nil && !errors.Is(p.err, ErrCollectionNotFound) && !errors.Is(p.err, ErrClosed) {
		b.eng.log.Warn("TTL re-evaluation stopped; the partitions not finished are caught up while this node leads them",
			"bucket", b.name, "collection", uint32(cid), "reevaluated", p.n, "err", p.err)
	}
}

// catchUp re-evaluates against base, every interval until ctx ends (a
// later pass for the collection, its drop, the bucket's close), the
// partitions not in done that this node leads by then, marking each one
// it finishes. It stops early once every partition is done (this node
// leads them all).
func (p *ttlPass) catchUp(ctx context.Context, b *Bucket, cid CollectionID, done []bool, base *ttlBase, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for !allTrue(done) {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r := b.replicator()
		if r == nil {
			return // the bucket writes locally now: nothing to catch up
		}
		if !leadsAnyOf(ctx, r, done) {
			// Most looks: nothing to do, and no pass to start (on a
			// fullEviction bucket a pass first reads every key of the
			// collection back from disk).
			continue
		}
		n, err := b.reevaluateReplicated(ctx, r, cid, done, base)
		p.caughtUp.Add(int64(n))
		switch {
		case ctx.Err() != nil || errors.Is(err, ErrCollectionNotFound) || errors.Is(err, ErrClosed):
			return
		case err != nil:
			b.eng.log.Debug("TTL re-evaluation catch-up: a partition left for the next look",
				"bucket", b.name, "collection", uint32(cid), "err", err)
		}
		if n > 0 {
			b.eng.log.Info("TTL re-evaluation caught up partitions this node leads now",
				"bucket", b.name, "collection", uint32(cid), "reevaluated", n)
		}
	}
}

// leadsAnyOf reports whether this node leads a partition not marked in
// done.
func leadsAnyOf(ctx context.Context, r Replicator, done []bool) bool {
	for part, d := range done {
		if !d && leads(ctx, r, part) {
			return true
		}
	}
	return false
}

// allTrue reports whether every element of done is set.
func allTrue(done []bool) bool {
	for _, d := range done {
		if !d {
			return false
		}
	}
	return true
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

// ttlChanged returns the collections (as in new) in both old and new whose
// TTL settings (or TTLRev) differ.
func ttlChanged(old, new map[string]map[string]collectionInfo) []collectionInfo {
	was := map[CollectionID]collectionInfo{}
	for _, colls := range old {
		for _, ci := range colls {
			was[ci.ID] = ci
		}
	}
	var out []collectionInfo
	for _, colls := range new {
		for _, ci := range colls {
			if w, ok := was[ci.ID]; ok && (w.settings() != ci.settings() || w.TTLRev != ci.TTLRev) {
				out = append(out, ci)
			}
		}
	}
	return out
}

// reevaluateReplicated is reevaluate for a replicated bucket: it goes
// through the partitions this node leads, proposing each re-written
// expiration as a replicated write, and returns how many were applied. A
// partition whose leadership moves away mid-pass is left (ErrNotMyVBucket
// is no failure). With done non-nil (one flag a partition) it skips the
// partitions marked done and marks those it finishes: every key decided
// and none of its proposals failed or was refused. With base non-nil (a
// catch-up) it decides as of base (decideReevaluation), and a partition
// whose key fails is left for the next look while the others go on (the
// first pass stops at a failure: its caller answers with it).
func (b *Bucket) reevaluateReplicated(ctx context.Context, r Replicator, cid CollectionID, done []bool, base *ttlBase) (int, error) {
	if err := b.WaitWarm(ctx); err != nil {
		return 0, err
	}
	release, err := b.allKeysIn(ctx, []CollectionID{cid})
	if err != nil {
		return 0, err
	}
	defer release()
	// A first pass stops at the first failure (its caller answers with
	// it); a catch-up goes on with the other partitions.
	n, finished, first := proposeByPartition(ctx, base == nil, func(yield func(*partition, []docKey) bool) error {
		for _, p := range b.parts {
			if done != nil && done[p.id] {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := b.writable(cid); err != nil {
				return err
			}
			if !leads(ctx, r, int(p.id)) {
				continue // its leader re-evaluates it
			}
			p.mu.Lock()
			keys := p.keysLocked(func(c CollectionID) bool { return c == cid })
			p.mu.Unlock()
			if !yield(p, keys) {
				return nil
			}
		}
		return nil
	}, func(p *partition, k docKey) (bool, error) { return b.reevaluateKey(ctx, r, p, k, base) })
	if done != nil {
		for _, part := range finished {
			done[part] = true
		}
	}
	return n, first
}

// reevaluateKey proposes k's re-evaluated expiration, if its live version
// needs one, and reports whether a version was applied. A key written
// before the touch applied is decided again on the newer version.
func (b *Bucket) reevaluateKey(ctx context.Context, r Replicator, p *partition, k docKey, base *ttlBase) (bool, error) {
	applied, _, err := proposeDecided(ctx, r, p, func() ([]byte, error) { return b.decideReevaluation(p, k, base) })
	return applied, err
}

// proposeByPartition proposes each key of each partition parts yields
// (propose, which reports whether a version was applied), at most
// replExpiryInFlight at once, and waits for them. A partition stops at
// its first key left: its leadership moved (ErrNotMyVBucket, no failure)
// or its proposal failed; with stopAtFailure every partition stops at the
// first failure. parts's error is a failure too, and ends the listing. It
// returns how many proposals applied, the partitions each of whose keys
// was proposed with none left, and the first failure.
func proposeByPartition(ctx context.Context, stopAtFailure bool, parts func(yield func(*partition, []docKey) bool) error,
	propose func(*partition, docKey) (bool, error)) (int, []int, error) {
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
	// handedOut lists the partitions whose every key was handed out, each
	// with its flag of a key left: once the proposals are in, those
	// without one are finished.
	type handedOut struct {
		part int
		lost *atomic.Bool
	}
	var handed []handedOut
	err := parts(func(p *partition, keys []docKey) bool {
		lost := new(atomic.Bool)
		for _, k := range keys {
			if lost.Load() {
				break
			}
			if failed.Load() && stopAtFailure {
				return false
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				fail(ctx.Err())
				return false
			}
			wg.Go(func() {
				defer func() { <-slots }()
				applied, err := propose(p, k)
				switch {
				case errors.Is(err, ErrNotMyVBucket):
					lost.Store(true) // leadership moved: its next leader takes it
				case err != nil:
					lost.Store(true)
					fail(err)
				case applied:
					mu.Lock()
					n++
					mu.Unlock()
				}
			})
		}
		handed = append(handed, handedOut{int(p.id), lost})
		return true
	})
	if err != nil {
		fail(err)
	}
	wg.Wait()
	var finished []int
	for _, h := range handed {
		if !h.lost.Load() {
			finished = append(finished, h.part)
		}
	}
	return n, finished, first
}

// proposeDecided proposes to p's group the entry decide returns for one
// key (nil: nothing to propose), and decides again each time the key
// changed before the entry applied, at most maxReplConflicts times. It
// reports whether a version was applied, and settled false when the key
// changed at every try. A key whose collection was dropped before the
// entry applied is settled: nothing to apply.
func proposeDecided(ctx context.Context, r Replicator, p *partition, decide func() ([]byte, error)) (applied, settled bool, err error) {
	for range maxReplConflicts {
		entry, err := decide()
		if entry == nil || err != nil {
			return false, true, err
		}
		res, err := r.Replicate(ctx, int(p.id), entry)
		switch {
		case err != nil:
			return false, true, err
		case errors.Is(res.Err, errReplConflict), errors.Is(res.Err, errReplApplied):
			continue // the key changed: decide again on what it is now
		case errors.Is(res.Err, ErrCollectionNotFound):
			return false, true, nil // its collection was dropped, and the document with it
		case res.Err != nil:
			return false, true, res.Err
		default:
			return res.Doc != nil, true, nil
		}
	}
	return false, false, nil
}

// decideReevaluation returns the entry that re-writes k's expiration as
// its collection's settings derive it now (a touch: same value, meta.ts and
// creation, a new CAS and revision), conditioned on the live version it
// was derived from; nil when there is none to re-write: the key is not
// live, its expiration is pinned, or it is already the derived one. With
// base non-nil (a catch-up) an expiration the settings could have given
// the document since base's time is left, and any other is derived with
// a sliding rule counted from base's time or the document's last write,
// the later (see the comment at the top).
func (b *Bucket) decideReevaluation(p *partition, k docKey, base *ttlBase) ([]byte, error) {
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
	if base != nil {
		from := max(base.at, cur.TS)
		low := rederive(from, cur, cs, maxTTL)
		if expiresBetween(cur.Expiration, low, exp) {
			return nil, nil // one the settings could have given it since the change
		}
		exp = low
	}
	if exp == cur.Expiration {
		return nil, nil
	}
	w := replWrite{prevSeq: cur.Seq, now: now}
	w.doc = Document{Key: k.key, Collection: k.cid, Value: cur.Value, Type: cur.Type, Flags: cur.Flags,
		Expiration: exp, TS: cur.TS, CreatedAt: cur.CreatedAt, CAS: b.nextCAS(now), RevSeq: cur.RevSeq + 1}
	return w.encode(), nil
}

// expiresBetween reports whether expiration e (0: never) lies between lo
// and hi, both included (0: never, the latest of all).
func expiresBetween(e, lo, hi int64) bool {
	return earliest(lo, e) == lo && earliest(e, hi) == e
}
