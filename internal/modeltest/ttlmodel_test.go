package modeltest

import (
	"fmt"
	"math"

	"github.com/mayflydb/mayfly/engine"
)

// This file is the model's own reading of the expiry rules a collection's
// settings give (README, "Time to live per collection"; engine/ttl.go's
// comments). It deliberately calls none of the engine's functions that
// compute an expiration: a disagreement between the two is what the model
// test is for.
//
// The rules, as the model reads them. A write at now, of a document created
// at created (its first write since it was missing, deleted or expired),
// gets:
//
//  1. a non-zero expiry on the request: that (0 none, 1..30 days relative,
//     larger absolute, negative expired at once), pinned;
//  2. else, if defaultTTL is set (-1 or n > 0), the document's top-level
//     "ttl" field (-1 never, n > 0 now + n), or without one defaultTTL
//     itself (-1 never, n now + n); any other "ttl" refuses the write;
//  3. else none;
//
// then, with idleTTL or maxLifetime, the earlier of that and
// min(now + idleTTL, created + maxLifetime); then maxTTL caps it from now
// (no expiration or a later one becomes now + maxTTL). preserve_expiry on a
// live document keeps its expiration (and whether it is pinned). A touch
// sets the request's expiry, capped by maxTTL from now, pinned; it moves
// neither ts nor created, and (engine/ttl_test.go's TestSlidingExpiry says
// so) no sliding cap applies to it. A read through Get of a live, unpinned
// document on a sliding collection, and a re-evaluation (UpdateCollection)
// of a live, unpinned document, set the expiration to what the last write's
// rule gives counted from that write (ts), capped by maxTTL from ts, and at
// most min(now + idleTTL, created + maxLifetime) capped by maxTTL from now.

// ttlSettings are a collection's TTL settings as the model keeps them (0
// off).
type ttlSettings struct{ defaultTTL, idleTTL, maxLifetime int64 }

func (s ttlSettings) String() string {
	return fmt.Sprintf("defaultTTL=%d idleTTL=%d maxLifetime=%d", s.defaultTTL, s.idleTTL, s.maxLifetime)
}

func (s ttlSettings) sliding() bool { return s.idleTTL != 0 || s.maxLifetime != 0 }

// mcoll is the model of one collection.
type mcoll struct {
	scope, name string
	c           *engine.Collection
	s           ttlSettings
	maxTTL      int64 // the effective maxTTL, 0 none
	keys        int
	model       map[string]*entry
}

func (cm *mcoll) String() string { return cm.name }

// effectiveMaxTTL: a collection's own maxTTL, -1 meaning none, 0 meaning
// the bucket's.
func effectiveMaxTTL(coll, bucket int64) int64 {
	if coll < 0 {
		return 0
	}
	if coll > 0 {
		return coll
	}
	return bucket
}

// sooner is the earlier of two expirations, 0 being none.
func sooner(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// capFrom is maxTTL's cap counted from the instant from: no expiration, or
// one later than from + maxTTL, becomes from + maxTTL.
func capFrom(from, exp, maxTTL int64) int64 {
	if maxTTL == 0 {
		return exp
	}
	return sooner(exp, from+maxTTL)
}

// ruleExpiry is Cosmos DB's rule for a document last written at ts whose
// valid "ttl" field is ttl (0 none).
func (s ttlSettings) ruleExpiry(ts, ttl int64) int64 {
	if s.defaultTTL == 0 {
		return 0 // the field means nothing
	}
	eff := s.defaultTTL
	if ttl != 0 {
		eff = ttl
	}
	if eff == -1 {
		return 0
	}
	return ts + eff // relative however large: a ttl is never a Unix time
}

// slideExpiry is min(now + idleTTL, created + maxLifetime), 0 when neither
// is set.
func (s ttlSettings) slideExpiry(now, created int64) int64 {
	var e int64
	if s.idleTTL != 0 {
		e = now + s.idleTTL
	}
	if s.maxLifetime != 0 {
		e = sooner(e, created+s.maxLifetime)
	}
	return e
}

// slideCap is the sliding cap at now, itself capped by maxTTL from now; 0
// on a collection that does not slide.
func (cm *mcoll) slideCap(now, created int64) int64 {
	if !cm.s.sliding() {
		return 0
	}
	return capFrom(now, cm.s.slideExpiry(now, created), cm.maxTTL)
}

// writeExpiry is the expiration, and whether it is pinned, of a write at now
// with request expiry req, of a document created at created with "ttl"
// field ttl.
func (cm *mcoll) writeExpiry(now, created, req, ttl int64) (int64, bool) {
	if req != 0 {
		return sooner(capFrom(now, absExpiry(now, req), cm.maxTTL), cm.slideCap(now, created)), true
	}
	return cm.derived(now, now, created, ttl), false
}

// derived is the expiration the settings give an unpinned document last
// written at ts, created at created, with "ttl" field ttl, at now.
func (cm *mcoll) derived(now, ts, created, ttl int64) int64 {
	return sooner(capFrom(ts, cm.s.ruleExpiry(ts, ttl), cm.maxTTL), cm.slideCap(now, created))
}

// rederived is what a sliding read or a re-evaluation at now gives m.
func (cm *mcoll) rederived(now int64, m *entry) int64 {
	return cm.derived(now, m.ts, m.created, m.ttl)
}

// ttlField is a document's top-level "ttl" as the test writes it: the JSON
// text appended to {"g":..,"n":..}, and what a collection with a defaultTTL
// makes of it.
type ttlField struct {
	suffix string
	ttl    int64 // the valid value, 0 none
	bad    bool  // a "ttl" field that is not -1 or a positive integer
}

// randomTTLField picks a document's "ttl": mostly none, -1 or a few
// seconds, sometimes something a collection with a defaultTTL must refuse,
// or a "ttl" that is not top-level (which means nothing).
func (h *harness) randomTTLField() ttlField {
	switch r := h.rng.IntN(100); {
	case r < 45:
		return ttlField{}
	case r < 58:
		return ttlField{suffix: `,"ttl":-1`, ttl: -1}
	case r < 78:
		n := 1 + h.rng.Int64N(20)
		if h.rng.IntN(3) == 0 {
			return ttlField{suffix: fmt.Sprintf(` , "ttl" : %d `, n), ttl: n}
		}
		return ttlField{suffix: fmt.Sprintf(`,"ttl":%d`, n), ttl: n}
	case r < 81:
		// Larger than 30 days and the largest: still seconds after the
		// write, never a Unix time.
		n := []int64{engine.MaxRelativeExpiry + 1, math.MaxInt32}[h.rng.IntN(2)]
		return ttlField{suffix: fmt.Sprintf(`,"ttl":%d`, n), ttl: n}
	case r < 85:
		return ttlField{suffix: `,"x":{"ttl":0},"ttlx":"no"`}
	default:
		bad := []string{`0`, `-2`, `1.5`, `"10"`, `null`, `true`, `{"s":5}`, `[5]`, `-100`}
		return ttlField{suffix: `,"ttl":` + bad[h.rng.IntN(len(bad))], bad: true}
	}
}

func valueWith(g, n int, f ttlField) []byte {
	return fmt.Appendf(nil, `{"g":%d,"n":%d%s}`, g, n, f.suffix)
}

// randomSettings picks TTL settings: each of defaultTTL (off, -1, a few
// seconds, rarely more than 30 days), idleTTL and maxLifetime.
func (h *harness) randomSettings() ttlSettings {
	var s ttlSettings
	switch r := h.rng.IntN(10); {
	case r < 4:
	case r < 6:
		s.defaultTTL = -1
	case r < 9:
		s.defaultTTL = 3 + h.rng.Int64N(25)
	default:
		s.defaultTTL = engine.MaxRelativeExpiry + 1 + h.rng.Int64N(100)
	}
	if h.rng.IntN(2) == 0 {
		s.idleTTL = 2 + h.rng.Int64N(20)
	}
	if h.rng.IntN(2) == 0 {
		s.maxLifetime = 5 + h.rng.Int64N(50)
	}
	return s
}
