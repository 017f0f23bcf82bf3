package modeltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/views"
)

// setup picks the run's expiry configuration (the bucket's maxTTL, each
// collection's TTL settings and the second collection's maxTTL), makes the
// bucket and its collections, and opens the services.
func (h *harness) setup() {
	if h.rng.IntN(6) == 0 {
		h.bucketMaxTTL = 20 + h.rng.Int64N(40)
	}
	h.colls = []*mcoll{
		{scope: "_default", name: "_default", keys: numKeys, model: map[string]*entry{}},
		{scope: "_default", name: "c1", keys: numKeys1, model: map[string]*entry{}},
	}
	for _, cm := range h.colls {
		for i := range cm.keys {
			cm.model[key(i)] = &entry{}
		}
	}
	h.model = h.colls[0].model
	h.open(true)
	h.t.Logf("bucket maxTTL %d; %s: %s, maxTTL %d; %s: %s, maxTTL %d", h.bucketMaxTTL,
		h.colls[0], h.colls[0].s, h.colls[0].maxTTL, h.colls[1], h.colls[1].s, h.colls[1].maxTTL)
}

// createCollections gives the default collection TTL settings in two runs
// of three (views map only _default._default, so this is where the view
// checks meet the TTL rules), and makes the second collection with settings
// and a maxTTL of its own.
func (h *harness) createCollections(ctx context.Context) {
	d, c1 := h.colls[0], h.colls[1]
	d.maxTTL = h.bucketMaxTTL
	if h.rng.IntN(3) > 0 {
		d.s = h.randomSettings()
		_, n, err := h.b.UpdateCollection(ctx, d.scope, d.name, func(cs *engine.CollectionSettings) error {
			cs.DefaultTTL, cs.IdleTTL, cs.MaxLifetime = d.s.defaultTTL, d.s.idleTTL, d.s.maxLifetime
			return nil
		})
		if err != nil || n != 0 {
			h.failf("UpdateCollection of the empty default collection: %d, %v", n, err)
		}
	}
	var mt int64
	switch h.rng.IntN(4) {
	case 0:
		mt = engine.NeverExpire
	case 1:
		mt = 15 + h.rng.Int64N(40)
	}
	c1.s = h.randomSettings()
	c1.maxTTL = effectiveMaxTTL(mt, h.bucketMaxTTL)
	if _, err := h.b.CreateCollectionWith(ctx, c1.scope, c1.name, engine.CollectionSettings{
		MaxTTL: mt, DefaultTTL: c1.s.defaultTTL, IdleTTL: c1.s.idleTTL, MaxLifetime: c1.s.maxLifetime,
	}); err != nil {
		h.failf("CreateCollectionWith: %v", err)
	}
}

// doStep runs one random step and returns the collection and key it
// touched (nil, "" if none).
func (h *harness) doStep() (*mcoll, string) {
	ctx, cancel := h.ctx()
	defer cancel()
	now := h.clk.Now()
	cm := h.colls[0]
	if h.rng.IntN(4) == 0 {
		cm = h.colls[1]
	}
	k := key(h.rng.IntN(cm.keys))
	m := cm.model[k]
	c := cm.c
	g, n := h.rng.IntN(6), h.rng.IntN(151)-50
	switch r := h.rng.IntN(100); {
	case r < 22: // upsert
		e := h.expiryFor(cm)
		preserve := h.rng.IntN(8) == 0
		f := h.randomTTLField()
		op := fmt.Sprintf("%s: upsert %s %s expiry=%d preserve=%v", cm, k, valueWith(g, n, f), e, preserve)
		h.logStep("%s", op)
		_, err := c.Upsert(ctx, k, valueWith(g, n, f), &engine.WriteOptions{Expiry: e, PreserveExpiry: preserve})
		if h.refused(cm, op, f, err, nil) {
			return cm, k
		}
		h.expectErr(op, err, nil)
		h.write(cm, m, now, g, n, f, e, preserve)
		return cm, k
	case r < 29: // insert
		var state error
		if m.live(now) {
			state = engine.ErrKeyExists
		}
		h.writeIf(ctx, cm, m, k, now, g, n, "insert", c.Insert, state)
		return cm, k
	case r < 36: // replace
		var state error
		if !m.live(now) {
			state = engine.ErrNotFound
		}
		h.writeIf(ctx, cm, m, k, now, g, n, "replace", c.Replace, state)
		return cm, k
	case r < 43: // delete
		h.logStep("%s: delete %s", cm, k)
		_, err := c.Delete(ctx, k, nil)
		if m.live(now) {
			h.expectErr("delete "+k, err, nil)
			*m = entry{tomb: 1}
		} else {
			h.expectErr("delete "+k, err, engine.ErrNotFound)
		}
		return cm, k
	case r < 50: // touch
		e := h.expiryFor(cm)
		h.logStep("%s: touch %s expiry=%d", cm, k, e)
		_, err := c.Touch(ctx, k, e)
		if m.live(now) {
			h.expectErr("touch "+k, err, nil)
			m.exp, m.pinned = h.touchExpiry(cm, m, now, e), true
		} else {
			h.expectErr("touch "+k, err, engine.ErrNotFound)
		}
		return cm, k
	case r < 62: // get: a sliding read on a collection with idleTTL or maxLifetime
		if live := cm.liveKeys(now); len(live) > 0 && h.rng.IntN(3) > 0 {
			k = live[h.rng.IntN(len(live))] // mostly a live one, to slide it
		}
		if h.rng.IntN(3) == 0 {
			// A session in use: read again a little later.
			sec := 1 + h.rng.Int64N(3)
			h.logStep("advance %ds", sec)
			h.clk.Advance(sec)
		}
		h.logStep("%s: get %s", cm, k)
		h.get(ctx, cm, k, true)
		return cm, k
	case r < 74: // clock
		sec := h.rng.Int64N(11)
		h.logStep("advance %ds", sec)
		h.clk.Advance(sec)
	case r < 81: // expiry pager
		if h.rng.IntN(2) == 0 {
			limit := 1 + h.rng.IntN(4)
			h.logStep("ExpireBatch loop, limit %d", limit)
			for {
				_, more, err := h.b.ExpireBatch(ctx, limit)
				if err != nil {
					h.failf("ExpireBatch: %v", err)
				}
				if !more {
					break
				}
			}
			if err := h.b.Sync(ctx); err != nil {
				h.failf("Sync: %v", err)
			}
		} else {
			h.logStep("pager RunNow")
			if _, err := h.pg.RunNow(ctx, bucketName); err != nil {
				h.failf("pager RunNow: %v", err)
			}
		}
		h.eachEntry(func(_ *mcoll, m *entry) {
			if m.expired(now) {
				m.purgeExpired()
			}
		})
	case r < 85: // metadata purge
		h.logStep("PurgeTombstones(olderThan=now)")
		if h.ddoc >= 0 {
			// Every tombstone is consumed once a stale=false query has
			// caught the index up; the purge may then remove them all.
			h.queryRows()
		}
		want := 0
		h.eachEntry(func(_ *mcoll, m *entry) {
			if !m.present && m.tomb != 0 {
				want++
			}
		})
		total := 0
		for {
			n, more, err := h.b.PurgeTombstones(ctx, now, 1+h.rng.IntN(5))
			if err != nil {
				h.failf("PurgeTombstones: %v", err)
			}
			total += n
			if !more || n == 0 {
				break
			}
		}
		if total != want {
			h.failf("PurgeTombstones purged %d tombstones, the model has %d", total, want)
		}
		h.eachEntry(func(_ *mcoll, m *entry) {
			if !m.present {
				m.tomb = 0
			}
		})
	case r < 90: // put a design document
		v := h.rng.IntN(len(variants))
		h.logStep("put ddoc variant %d (was %d)", v, h.ddoc)
		if _, err := h.svc.PutDesignDoc(ctx, bucketName, ddocName, []byte(variants[v].body)); err != nil {
			h.failf("PutDesignDoc: %v", err)
		}
		h.ddoc = v
	case r < 93: // delete the design document
		h.logStep("delete ddoc (was %d)", h.ddoc)
		err := h.svc.DeleteDesignDoc(ctx, bucketName, ddocName)
		if h.ddoc >= 0 {
			h.expectErr("DeleteDesignDoc", err, nil)
		} else {
			h.expectErr("DeleteDesignDoc", err, views.ErrNotFound)
		}
		h.ddoc = -1
	case r < 96: // change the collection's TTL settings
		h.updateCollection(ctx, cm)
	default: // close and reopen everything
		if cm.s.sliding() && h.rng.IntN(2) == 0 {
			if live := cm.liveKeys(now); len(live) > 0 {
				// A sliding read whose extension is still queued: a
				// clean close commits it.
				k := live[h.rng.IntN(len(live))]
				h.logStep("%s: get %s (no sync)", cm, k)
				h.get(ctx, cm, k, false)
				h.cov.unsyncedReopens++
			}
		}
		h.logStep("reopen")
		h.cov.reopens++
		h.close()
		h.open(false)
		// Nothing changes: an expiration is durable as its tombstone.
	}
	return nil, ""
}

// expiryFor picks a write's expiry: on a collection with TTL settings, most
// writes give none (the settings derive it; a non-zero one pins it).
func (h *harness) expiryFor(cm *mcoll) int64 {
	if cm.s != (ttlSettings{}) && h.rng.IntN(3) > 0 {
		return 0
	}
	return h.expiry()
}

// liveKeys lists cm's keys the model has live at now.
func (cm *mcoll) liveKeys(now int64) []string {
	var out []string
	for i := range cm.keys {
		if cm.model[key(i)].live(now) {
			out = append(out, key(i))
		}
	}
	return out
}

// touchExpiry is the expiration a touch with expiry e at now gives m, a
// live document of cm: the request's expiry capped by maxTTL from now and,
// on a sliding collection, by min(now + idleTTL, created + maxLifetime), as
// a write's explicit expiry is: no touch carries a document past its cap.
func (h *harness) touchExpiry(cm *mcoll, m *entry, now, e int64) int64 {
	return sooner(capFrom(now, absExpiry(now, e), cm.maxTTL), cm.slideCap(now, m.created))
}

// eachEntry calls fn with every key's model in every collection.
func (h *harness) eachEntry(fn func(*mcoll, *entry)) {
	for _, cm := range h.colls {
		for i := range cm.keys {
			fn(cm, cm.model[key(i)])
		}
	}
}

// writeIf runs one insert or replace (verb, by do) of key k with a random
// expiry and value: it must fail with state (engine.ErrKeyExists or
// engine.ErrNotFound, from the model) or, with state nil, succeed and be
// written to the model.
func (h *harness) writeIf(ctx context.Context, cm *mcoll, m *entry, k string, now int64, g, n int, verb string,
	do func(context.Context, string, []byte, *engine.WriteOptions) (*engine.Document, error), state error) {
	h.t.Helper()
	e := h.expiryFor(cm)
	f := h.randomTTLField()
	op := fmt.Sprintf("%s: %s %s %s expiry=%d", cm, verb, k, valueWith(g, n, f), e)
	h.logStep("%s", op)
	_, err := do(ctx, k, valueWith(g, n, f), &engine.WriteOptions{Expiry: e})
	if h.refused(cm, op, f, err, state) {
		return
	}
	h.expectErr(op, err, state)
	if state == nil {
		h.write(cm, m, now, g, n, f, e, false)
	}
}

// refused handles a write whose document's "ttl" the collection must refuse
// (it has a defaultTTL and the field is not -1 or a positive integer): it
// reports whether the model says the write fails, and then checks the error.
// The write changes nothing (check compares every document afterwards). A
// write the model also refuses for the document's state (insert over a live
// one, replace of a missing one) may fail with either error: the documents
// do not say which check comes first.
func (h *harness) refused(cm *mcoll, op string, f ttlField, err, state error) bool {
	h.t.Helper()
	if !f.bad || cm.s.defaultTTL == 0 {
		return false
	}
	h.cov.refusedTTL++
	switch {
	case errors.Is(err, engine.ErrInvalidTTL):
		if !strings.Contains(err.Error(), "ttl") {
			h.failf("%s: the error %q does not name the ttl field", op, err)
		}
	case state != nil && errors.Is(err, state):
	default:
		h.failf("%s: got %v, the model expects ErrInvalidTTL (%s)", op, err, cm.s)
	}
	return true
}

// write records a successful insert, upsert or replace at now in the model.
func (h *harness) write(cm *mcoll, m *entry, now int64, g, n int, f ttlField, req int64, preserve bool) {
	live := m.live(now)
	created := now
	if live {
		created = m.created
	}
	ne := entry{present: true, g: g, n: n, val: valueWith(g, n, f), ts: now, created: created, ttl: f.ttl}
	if preserve && live {
		ne.exp, ne.pinned = m.exp, m.pinned
	} else {
		ne.exp, ne.pinned = cm.writeExpiry(now, created, req, f.ttl)
	}
	if f.suffix != "" && cm.s.defaultTTL != 0 {
		h.cov.ttlWrites++
	}
	*m = ne
}

// get reads k through Get and checks the answer against the model. On a
// collection with idleTTL or maxLifetime the read slides a live, unpinned
// document's expiration: the read returns the version it found, the
// extension is queued without waiting, so a Peek right after may see the
// old expiration or the new; after a Sync (or a clean close: only a crash
// may lose an extension) it must see the new one. sync: wait for it here.
func (h *harness) get(ctx context.Context, cm *mcoll, k string, sync bool) {
	h.t.Helper()
	m := cm.model[k]
	now := h.clk.Now()
	d, err := cm.c.Get(ctx, k)
	var ee *engine.ExpiredError
	switch {
	case m.live(now):
		if err != nil {
			h.failf("%s: get %s: %v, the model has it live", cm, k, err)
		}
		h.checkDoc(cm, k, d)
		if !cm.s.sliding() {
			return
		}
		old := m.exp
		if m.pinned {
			h.cov.pinnedReads++
		} else if e := cm.rederived(now, m); e != m.exp {
			m.exp = e
			h.extends++
			h.cov.extends++
		}
		if p, err := cm.c.Peek(k); err == nil && p.Expiration != old && p.Expiration != m.exp {
			h.failf("%s: right after a sliding read of %s, Peek has expiration %d, the model %d (or %d before the extension commits)", cm, k, p.Expiration, m.exp, old)
		}
		if !sync {
			return
		}
		if err := h.b.Sync(ctx); err != nil {
			h.failf("Sync: %v", err)
		}
	case m.expired(now):
		if !errors.As(err, &ee) {
			h.failf("%s: get %s: got %v, the model has it expired (want an *ExpiredError)", cm, k, err)
		}
		m.purgeExpired()
	default:
		if !errors.Is(err, engine.ErrNotFound) || errors.As(err, &ee) {
			h.failf("%s: get %s: got %v, want plain ErrNotFound", cm, k, err)
		}
	}
}

// updateCollection changes cm's TTL settings (sometimes to the same ones,
// which runs the re-evaluation pass again; sometimes to invalid ones, which
// must change nothing) and checks the re-evaluation: every live document
// whose expiration the settings derive gets the one its last write would
// get under the new settings.
func (h *harness) updateCollection(ctx context.Context, cm *mcoll) {
	now := h.clk.Now()
	ns := cm.s
	switch h.rng.IntN(5) {
	case 0:
		ns = h.randomSettings()
	case 1:
		ns.defaultTTL = h.randomSettings().defaultTTL
	case 2:
		ns.idleTTL = h.randomSettings().idleTTL
	case 3:
		ns.maxLifetime = h.randomSettings().maxLifetime
	}
	bad := h.rng.IntN(12)
	h.logStep("%s: UpdateCollection %s (was %s), bad=%d", cm, ns, cm.s, bad)
	var seen engine.CollectionSettings
	_, n, err := h.b.UpdateCollection(ctx, cm.scope, cm.name, func(cs *engine.CollectionSettings) error {
		seen = *cs
		cs.DefaultTTL, cs.IdleTTL, cs.MaxLifetime = ns.defaultTTL, ns.idleTTL, ns.maxLifetime
		switch bad {
		case 1:
			cs.DefaultTTL = -2
		case 2:
			cs.IdleTTL = -1
		case 3:
			cs.MaxLifetime = -5
		case 4:
			cs.MaxTTL += 7 // maxTTL cannot change
		}
		return nil
	})
	if got := (ttlSettings{seen.DefaultTTL, seen.IdleTTL, seen.MaxLifetime}); got != cm.s {
		h.failf("%s: UpdateCollection shows settings %s, the model has %s", cm, got, cm.s)
	}
	if bad >= 1 && bad <= 4 {
		h.expectErr("UpdateCollection", err, engine.ErrInvalidSetting)
		return
	}
	h.expectErr("UpdateCollection", err, nil)
	cm.s = ns
	want := 0
	for i := range cm.keys {
		m := cm.model[key(i)]
		if !m.live(now) || m.pinned {
			continue
		}
		if e := cm.rederived(now, m); e != m.exp {
			m.exp = e
			want++
		}
	}
	if n != want {
		h.failf("%s: UpdateCollection re-evaluated %d documents, the model %d", cm, n, want)
	}
	h.cov.updates++
	h.cov.reevaluated += want
}

// checkDoc checks a document read from the engine against the model: its
// value, expiration, whether it is pinned, meta.ts and meta.created.
func (h *harness) checkDoc(cm *mcoll, k string, d *engine.Document) {
	h.t.Helper()
	m := cm.model[k]
	if !bytes.Equal(d.Value, m.val) {
		h.failf("%s: %s: value %s, the model has %s", cm, k, d.Value, m.val)
	}
	if d.Expiration != m.exp || d.ExpiryPinned != m.pinned {
		h.failf("%s: %s: expiration %d (pinned %v), the model has %d (pinned %v); %s, maxTTL %d",
			cm, k, d.Expiration, d.ExpiryPinned, m.exp, m.pinned, cm.s, cm.maxTTL)
	}
	if d.TS != m.ts || d.CreatedAt != m.created {
		h.failf("%s: %s: ts %d created %d, the model has ts %d created %d", cm, k, d.TS, d.CreatedAt, m.ts, m.created)
	}
}

// check compares everything observable with the model.
func (h *harness) check(cm *mcoll, touched string) {
	ctx, cancel := h.ctx()
	defer cancel()
	now := h.clk.Now()
	if err := h.eng.Check(ctx); err != nil {
		h.failf("engine.Check: %v", err)
	}
	if cm != nil && cm.model[touched].live(now) {
		h.get(ctx, cm, touched, true)
	}
	var curr, tombs, withExp int64
	for _, cm := range h.colls {
		for i := range cm.keys {
			k := key(i)
			m := cm.model[k]
			if m.present {
				curr++
				if m.exp != 0 {
					withExp++
				}
			} else if m.tomb != 0 {
				tombs++
			}
			d, err := cm.c.Peek(k)
			if m.live(now) {
				if err != nil {
					h.failf("%s: peek %s: %v, the model has it live", cm, k, err)
				}
				h.checkDoc(cm, k, d)
			} else if !errors.Is(err, engine.ErrNotFound) {
				h.failf("%s: peek %s: got %v, want ErrNotFound (model: %+v)", cm, k, err, *m)
			}
		}
	}
	st := h.b.Stats()
	if st.CurrItems != curr {
		h.failf("curr_items %d, the model has %d (live + expired unpurged)", st.CurrItems, curr)
	}
	if st.Tombstones != tombs {
		h.failf("tombstones %d, the model has %d", st.Tombstones, tombs)
	}
	if st.WithExpiry != withExp {
		h.failf("documents with expiry %d, the model has %d", st.WithExpiry, withExp)
	}
	if st.SlidingExtends != h.extends {
		h.failf("sliding extensions %d since the bucket opened, the model has %d", st.SlidingExtends, h.extends)
	}
	if h.ddoc >= 0 {
		rows := h.queryRows()
		h.checkReduce(rows)
		h.checkExclude()
	}
}
