package engine

import (
	"context"
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"
)

// ErrInvalidTTL is returned by a write whose document carries a top-level
// "ttl" field that is neither -1 nor a positive integer, on a collection
// whose defaultTTL is set. It wraps ErrInvalidSetting.
var ErrInvalidTTL = fmt.Errorf("%w: ttl", ErrInvalidSetting)

// CollectionSettings are a collection's expiry settings. Every value is in
// seconds; 0 is off.
//
// The expiration a write gets, in order of precedence:
//
//  1. a non-zero expiry on the request (WriteOptions.Expiry) — it "pins" the
//     expiration;
//  2. if DefaultTTL is set, the document's own top-level "ttl" field: -1
//     never, n > 0 n seconds after this write;
//  3. if DefaultTTL is set and the document has no "ttl": -1 never, n > 0 n
//     seconds after this write;
//  4. none.
//
// Then, on a collection with IdleTTL or MaxLifetime, the earliest of that
// and min(now + IdleTTL, created + MaxLifetime); then the effective maxTTL
// caps it (now + maxTTL at most, and no expiration becomes now + maxTTL).
type CollectionSettings struct {
	// MaxTTL caps every expiration: 0 inherits the bucket's, NeverExpire (-1)
	// means none. Fixed for the collection's life.
	MaxTTL int64
	// DefaultTTL is Cosmos DB's collection time to live: 0 off (a document's
	// "ttl" field means nothing), -1 on with no default (documents live
	// forever unless they carry a "ttl"), n > 0 documents expire n seconds
	// after their last write. Setting, changing or removing it re-evaluates
	// the collection's documents (see UpdateCollection).
	DefaultTTL int64
	// IdleTTL: every write and every read (Get) sets the expiration to at
	// most now + IdleTTL (sliding expiry).
	IdleTTL int64
	// MaxLifetime: no read or write sets an expiration later than the
	// document's creation (Document.CreatedAt) + MaxLifetime.
	MaxLifetime int64
}

// Validate checks the settings' ranges.
func (cs CollectionSettings) Validate() error {
	switch {
	case cs.MaxTTL < NeverExpire || cs.MaxTTL > MaxMaxTTL:
		return fmt.Errorf("%w: maxTTL: must be -1 or an integer between 0 and %d", ErrInvalidSetting, MaxMaxTTL)
	case cs.DefaultTTL < -1 || cs.DefaultTTL > MaxMaxTTL:
		return fmt.Errorf("%w: defaultTTL: must be null (off), -1 or an integer between 1 and %d", ErrInvalidSetting, MaxMaxTTL)
	case cs.IdleTTL < 0 || cs.IdleTTL > MaxMaxTTL:
		return fmt.Errorf("%w: idleTTL: must be an integer between 0 (off) and %d", ErrInvalidSetting, MaxMaxTTL)
	case cs.MaxLifetime < 0 || cs.MaxLifetime > MaxMaxTTL:
		return fmt.Errorf("%w: maxLifetime: must be an integer between 0 (off) and %d", ErrInvalidSetting, MaxMaxTTL)
	}
	return nil
}

// sliding reports whether reads extend the collection's documents.
func (cs CollectionSettings) sliding() bool { return cs.IdleTTL > 0 || cs.MaxLifetime > 0 }

// DocTTL returns a JSON document's top-level "ttl" field as a collection with
// a defaultTTL reads it: 0 when there is none (or the value is not a JSON
// object), -1 or n > 0 when it is valid, an error wrapping ErrInvalidTTL for
// anything else.
func DocTTL(value []byte, typ DocType) (int64, error) {
	if typ != TypeJSON {
		return 0, nil
	}
	i := 0
	for i < len(value) && (value[i] == ' ' || value[i] == '\t' || value[i] == '\n' || value[i] == '\r') {
		i++
	}
	if i == len(value) || value[i] != '{' {
		return 0, nil
	}
	r := gjson.GetBytes(value, "ttl")
	if !r.Exists() {
		return 0, nil
	}
	if r.Type == gjson.Number {
		if n, err := strconv.ParseInt(r.Raw, 10, 64); err == nil && (n == -1 || (n > 0 && n <= MaxMaxTTL)) {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: the document's ttl field must be -1 or an integer between 1 and %d, got %s", ErrInvalidTTL, MaxMaxTTL, r.Raw)
}

// earliest returns the earlier of two expirations, 0 meaning none.
func earliest(a, b int64) int64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	default:
		return min(a, b)
	}
}

// ttlRule is the Cosmos DB rule: the expiration of a document last written at
// ts, with "ttl" field docTTL (0 for none), under the collection's defaultTTL.
func ttlRule(ts, docTTL int64, cs CollectionSettings) int64 {
	if cs.DefaultTTL == 0 {
		return 0
	}
	t := docTTL
	if t == 0 {
		t = cs.DefaultTTL
	}
	if t < 0 {
		return 0
	}
	return ts + t
}

// slide is min(now + idleTTL, created + maxLifetime), 0 when neither is set.
func slide(now, created int64, cs CollectionSettings) int64 {
	var e int64
	if cs.IdleTTL > 0 {
		e = now + cs.IdleTTL
	}
	if cs.MaxLifetime > 0 {
		e = earliest(e, created+cs.MaxLifetime)
	}
	return e
}

// derivedExpiration is the expiration the collection's settings give a
// document last written at ts, created at created, with "ttl" field docTTL,
// when it is written (now == ts), read (a sliding extension) or re-evaluated:
// the TTL rule and the maxTTL cap counted from the last write, and the
// sliding rule counted from now, capped by maxTTL from now.
func derivedExpiration(now, ts, created, docTTL int64, cs CollectionSettings, maxTTL int64) int64 {
	e := LimitExpiry(ts, ttlRule(ts, docTTL, cs), maxTTL)
	if s := slide(now, created, cs); s != 0 {
		e = earliest(e, LimitExpiry(now, s, maxTTL))
	}
	return e
}

// writeExpiration is the expiration a write at now gets, and whether the
// client chose it (a non-zero request expiry: pinned).
func writeExpiration(now, created, reqExpiry, docTTL int64, cs CollectionSettings, maxTTL int64) (int64, bool) {
	if reqExpiry == 0 {
		return derivedExpiration(now, now, created, docTTL, cs, maxTTL), false
	}
	e := LimitExpiry(now, AbsoluteExpiry(now, reqExpiry), maxTTL)
	if s := slide(now, created, cs); s != 0 {
		e = earliest(e, LimitExpiry(now, s, maxTTL))
	}
	return e, true
}

// rederive is the expiration the collection's settings give live document d
// at now (a sliding read or a re-evaluation). A record from before TS and
// CreatedAt were kept counts as written and created now; a "ttl" field that
// is not valid (written while defaultTTL was off) counts as none.
func rederive(now int64, d *Document, cs CollectionSettings, maxTTL int64) int64 {
	ts, created := d.TS, d.CreatedAt
	if ts == 0 {
		ts = now
	}
	if created == 0 {
		created = ts
	}
	var dttl int64
	if cs.DefaultTTL != 0 {
		dttl, _ = DocTTL(d.Value, d.Type)
	}
	return derivedExpiration(now, ts, created, dttl, cs, maxTTL)
}

// slideTo is the expiration a sliding read at now moves live document d
// to, and whether it moves it: the rule's expiration (rederive) when that
// is later than d's, never one at or before now. A read only extends: the
// maxTTL cap counted from the last write, with a maxTTL lowered since
// (which applies to later writes only), can give an expiration earlier
// than d's or already past, and then the read leaves d's as it is.
// Settings changed on the collection itself shorten expirations through
// their re-evaluation (UpdateCollection), not through reads.
func slideTo(now int64, d *Document, cs CollectionSettings, maxTTL int64) (int64, bool) {
	exp := rederive(now, d, cs, maxTTL)
	switch {
	case exp == 0: // never: later than any expiration
		return exp, d.Expiration != 0
	case exp <= now:
		return exp, false
	default:
		return exp, d.Expiration == 0 || exp > d.Expiration
	}
}

// UpdateCollection changes a collection's TTL settings (DefaultTTL, IdleTTL,
// MaxLifetime; MaxTTL cannot change): fn edits a copy, which is validated and
// persisted. Then, as Cosmos DB does when a collection's time to live is set,
// changed or removed, it re-evaluates the collection's documents: every live
// document whose expiration the settings derive (not one a client pinned with
// an explicit expiry or a touch) gets the expiration its last write would get
// under the new settings, as a touch (new CAS and sequence number; meta.ts
// stays). Removing defaultTTL thus stops the TTL rule's expiry; the maxTTL
// cap and a sliding rule still apply. The pass holds one partition's lock at
// a time and waits for disk once at the end; it returns how many documents
// it re-wrote. Writes during the pass already see the new settings. A pass
// cut short (ctx, a crash) leaves the rest of the documents as they were until
// their next write; calling UpdateCollection again (even with unchanged
// settings) runs the whole pass again. On a replicated bucket the pass
// covers the partitions this node leads, each re-written expiration a
// replicated write (replttl.go); a cluster changes the settings through
// its manifest instead (Manifest.UpdateCollection, ApplyManifest), so that
// every node has them and re-evaluates what it leads.
func (b *Bucket) UpdateCollection(ctx context.Context, scope, name string, fn func(*CollectionSettings) error) (CollectionInfo, int, error) {
	if err := ctx.Err(); err != nil {
		return CollectionInfo{}, 0, err
	}
	ci, err := b.updateCollectionInfo(scope, name, fn)
	if err != nil {
		return CollectionInfo{}, 0, err
	}
	n, err := b.reevaluate(ctx, ci.ID)
	return ci, n, err
}

func (b *Bucket) updateCollectionInfo(scope, name string, fn func(*CollectionSettings) error) (CollectionInfo, error) {
	b.ddl.Lock()
	defer b.ddl.Unlock()
	ce, err := b.catalogCopy()
	if err != nil {
		return CollectionInfo{}, err
	}
	colls, ok := ce.Scopes[scope]
	if !ok {
		return CollectionInfo{}, fmt.Errorf("%w: %s", ErrScopeNotFound, scope)
	}
	ci, ok := colls[name]
	if !ok {
		return CollectionInfo{}, fmt.Errorf("%w: %s.%s", ErrCollectionNotFound, scope, name)
	}
	ci, err = ci.edit(fn)
	if err != nil {
		return CollectionInfo{}, err
	}
	colls[name] = ci
	if err := b.commitCatalog(ce); err != nil {
		return CollectionInfo{}, err
	}
	return ci.info(name), nil
}

// edit returns ci with the settings fn makes of a copy of its own, checked.
func (ci collectionInfo) edit(fn func(*CollectionSettings) error) (collectionInfo, error) {
	cs := ci.settings()
	if err := fn(&cs); err != nil {
		return collectionInfo{}, err
	}
	if cs.MaxTTL != ci.MaxTTL {
		return collectionInfo{}, fmt.Errorf("%w: maxTTL cannot change", ErrInvalidSetting)
	}
	if err := cs.Validate(); err != nil {
		return collectionInfo{}, err
	}
	ci.DefaultTTL, ci.IdleTTL, ci.MaxLifetime = cs.DefaultTTL, cs.IdleTTL, cs.MaxLifetime
	return ci, nil
}

// UpdateCollection changes a collection's TTL settings in the manifest, as
// Bucket.UpdateCollection checks them (fn edits a copy; MaxTTL cannot
// change), and counts one more of the collection's TTLRev and one more UID
// even when the settings stay: every bucket that applies the manifest
// (ApplyManifest) re-evaluates the collection's documents again. at is the
// time of the change by the bucket's clock (Bucket.Clock), which every
// node's re-evaluation counts a sliding rule from (0: each node's own
// time of applying the manifest).
func (m *Manifest) UpdateCollection(scope, name string, at int64, fn func(*CollectionSettings) error) (CollectionInfo, error) {
	colls, ok := m.Scopes[scope]
	if !ok {
		return CollectionInfo{}, fmt.Errorf("%w: %s", ErrScopeNotFound, scope)
	}
	ci, ok := colls[name]
	if !ok {
		return CollectionInfo{}, fmt.Errorf("%w: %s.%s", ErrCollectionNotFound, scope, name)
	}
	ci, err := ci.edit(fn)
	if err != nil {
		return CollectionInfo{}, err
	}
	ci.TTLRev++
	ci.TTLAt = at
	colls[name] = ci
	m.UID++
	return ci.info(name), nil
}

// reevaluate re-writes the expiration of every live, unpinned document of a
// collection whose settings now derive a different one, as a touch.
// On a replicated bucket it re-evaluates the partitions this node leads,
// as replicated writes (replttl.go).
func (b *Bucket) reevaluate(ctx context.Context, cid CollectionID) (int, error) {
	if r := b.replicator(); r != nil {
		return b.reevaluateReplicated(ctx, r, cid, nil, nil)
	}
	if err := b.WaitWarm(ctx); err != nil {
		return 0, err
	}
	release, err := b.allKeysIn(ctx, []CollectionID{cid})
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
		if err := b.writable(cid); err != nil {
			p.mu.Unlock()
			return n, err
		}
		cs, maxTTL := b.ttlFor(cid)
		now := b.clock.Now()
		keys := p.keysLocked(func(c CollectionID) bool { return c == cid })
		for _, k := range keys {
			d := p.latestLocked(k)
			if d.Deleted || d.ExpiredAt(now) || d.ExpiryPinned {
				continue
			}
			if cs.DefaultTTL != 0 {
				// The document's "ttl" field counts: read an ejected value.
				var err error
				if d, err = b.withValueLocked(d); err != nil {
					p.mu.Unlock()
					return n, err
				}
			}
			exp := rederive(now, d, cs, maxTTL)
			if exp == d.Expiration {
				continue
			}
			d, err := b.withValueLocked(d) // the touch carries the value
			if err != nil {
				p.mu.Unlock()
				return n, err
			}
			nd := &Document{Value: d.Value, Type: d.Type, Flags: d.Flags, Expiration: exp, TS: d.TS, CreatedAt: d.CreatedAt}
			cb, err := b.publishLocked(p, k, d, nd, now)
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

// extend applies the sliding rule to d, just read live from k's partition:
// if the collection has IdleTTL or MaxLifetime and d's expiration is not
// pinned, the expiration the rule gives now is queued for the next group
// commit, and the read does not wait for it. The extension keeps d's CAS and
// revision number (the value did not change, so a client's CAS from the read
// still works), and gets a new sequence number. It is visible (to reads, the
// expiry index, the feed) once committed. Nothing is queued if a newer
// version is already on its way to disk (it applies the rule itself), or if
// the bucket refuses writes; a crash loses an extension not yet committed.
// In a replicated bucket the extension is a replicated write proposed by the
// partition's leader (replslide.go).
func (c *Collection) extend(p *partition, k docKey, d *Document) {
	if d.ExpiryPinned {
		return
	}
	b := c.b
	// Most collections do not slide: their reads take neither the
	// partition's write lock nor a second lookup. (A collection made
	// sliding after this check slides from its next read on.)
	if cs, _ := b.ttlFor(k.cid); !cs.sliding() {
		return
	}
	if r := b.replicator(); r != nil {
		c.slideReplicated(r, k, d) // a replicated write, by the partition's leader
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// d may be a copy of the committed version with its value read back
	// from the store (fetch.go): the same version, the same sequence number.
	i, ok := p.mu.docs.find(k)
	if !ok && !b.itemsResident() { // out of memory whole since the read (evict.go)
		if _, err := b.fetchMissLocked(p, k, false); err != nil {
			return
		}
		i, ok = p.mu.docs.find(k)
	}
	if !ok || p.mu.docs.recs[i].seq != d.Seq || p.mu.pending[k] != nil || b.writable(k.cid) != nil {
		return
	}
	cs, maxTTL := b.ttlFor(k.cid)
	if !cs.sliding() {
		return
	}
	now := b.clock.Now()
	exp, ok := slideTo(now, d, cs, maxTTL)
	if !ok || d.ExpiredAt(now) {
		return
	}
	cur := p.mu.docs.doc(i)
	nd := &Document{Value: d.Value, Type: d.Type, Flags: d.Flags, Expiration: exp, TS: d.TS, CreatedAt: d.CreatedAt}
	b.stampLocked(p, k, cur, nd, now)
	nd.CAS, nd.RevSeq = d.CAS, d.RevSeq
	if _, err := b.queueLocked(p, k, cur, nd); err != nil {
		return
	}
	b.stats.slidingExtends.Add(1)
}
