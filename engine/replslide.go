package engine

import (
	"context"
	"errors"
)

// Sliding expiry in a replicated bucket (issue 22). On one node a read of a
// document in a collection with idleTTL or maxLifetime queues the extension
// its sliding rule gives (Collection.extend). In a replicated bucket every
// version is a log entry, so the extension is one too: the node that leads
// the key's partition proposes it, in the background (the read does not
// wait, as on one node), as the same version with the new expiration,
// keeping its CAS and revision (replWrite.keepCAS), conditioned on the
// version the read saw being still the live one. Every replica applies it
// with the same sequence number; a key written meanwhile keeps that write.
// A read on a follower proposes nothing: reads that should slide go to the
// partition's leader (routing), and an extension must be decided once.

// slideReplicated proposes, in the background, the sliding extension of k,
// read live as version d, if this node leads its partition. Many reads of
// one key propose one extension at a time (they share the claims of the
// reads' expirations, replexpiry.go); a failure is dropped (the next read
// slides it).
func (c *Collection) slideReplicated(r Replicator, k docKey, d *Document) {
	b := c.b
	b.onLeader(r, k, func(ctx context.Context, part int) {
		touched := false
		for range maxReplConflicts {
			if entry := b.decideSlide(k, d, touched); entry != nil {
				res, err := r.Replicate(ctx, part, entry)
				switch {
				case err != nil:
					b.eng.log.Debug("sliding expiry not replicated; the next read slides it", "bucket", b.name, "err", err)
					return
				case res.Err == nil && res.Doc != nil:
					b.stats.slidingExtends.Add(1)
					return
				case errors.Is(res.Err, errReplConflict), errors.Is(res.Err, errReplApplied):
					// The key changed before the extension applied: below.
				default:
					b.eng.log.Debug("sliding expiry refused", "bucket", b.name, "err", res.Err)
					return
				}
			}
			// Nothing to extend, or the key changed before the extension
			// applied. A write stands (and applied the rule itself, if it
			// was one); a re-evaluation's touch of the version read
			// counted its rule from its own time, which may be before this
			// read, so the read's extension is decided again on it.
			nd := b.touchedSince(k, d)
			if nd == nil {
				return
			}
			d, touched = nd, true
		}
	})
}

// touchedSince returns k's live version if it is a TTL re-evaluation's
// touch of the version d (a newer version of the same write, meta.ts
// kept, under a new CAS, with an expiration the settings derive; a
// sliding extension keeps the CAS, a client's touch pins the
// expiration), nil otherwise.
func (b *Bucket) touchedSince(k docKey, d *Document) *Document {
	p := b.parts[partitionOf(k.key, len(b.parts))]
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.latestLocked(k)
	if cur == nil || cur.Deleted || cur.Seq == d.Seq || cur.TS != d.TS || cur.CAS == d.CAS || cur.ExpiryPinned {
		return nil
	}
	return &Document{Key: cur.Key, Seq: cur.Seq, TS: cur.TS, CAS: cur.CAS}
}

// decideSlide returns the entry that extends k, read live as version d, by
// its collection's sliding rule now, or nil if there is nothing to extend:
// the key changed since the read (or has a newer version on its way to
// disk), its expiration is pinned, it expired, or the rule gives the
// expiration it has. With touched, d is a re-evaluation's touch of the
// version the read saw (touchedSince), still on its way to disk perhaps:
// it counted the rule from its own time, not the read's. (A touch that
// expired the document is left: it had been idle longer than its rule
// since the change, as far as a late re-evaluation can tell.)
func (b *Bucket) decideSlide(k docKey, d *Document, touched bool) []byte {
	p := b.parts[partitionOf(k.key, len(b.parts))]
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := b.fetchMissLocked(p, k, false); err != nil {
		return nil
	}
	cur := p.latestLocked(k)
	// A version on its way to disk applied the rule itself, but for a
	// touch (the version d is then): it counted from its own time.
	if cur == nil || cur.Deleted || cur.Seq != d.Seq || cur.ExpiryPinned || (p.mu.pending[k] != nil && !touched) || b.writable(k.cid) != nil {
		return nil
	}
	cs, maxTTL := b.ttlFor(k.cid)
	if !cs.sliding() {
		return nil
	}
	now := b.clock.Now()
	cur, err := b.withValueLocked(cur) // the extension carries the value
	if err != nil {
		return nil
	}
	exp, ok := slideTo(now, cur, cs, maxTTL)
	if !ok || cur.ExpiredAt(now) {
		return nil
	}
	w := replWrite{prevSeq: cur.Seq, now: now, keepCAS: true}
	w.doc = Document{Key: k.key, Collection: k.cid, Value: cur.Value, Type: cur.Type, Flags: cur.Flags,
		Expiration: exp, TS: cur.TS, CreatedAt: cur.CreatedAt, CAS: cur.CAS, RevSeq: cur.RevSeq}
	return w.encode()
}
