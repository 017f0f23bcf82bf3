package engine

import (
	"fmt"
)

// Durability is a write's durability level, as Couchbase names it. On one
// node the four levels come to two behaviours:
//
//   - DurabilityNone and DurabilityMajority acknowledge a write from memory:
//     it is readable at once (read-your-writes), and the flusher writes it to
//     disk within Options.FlushInterval plus the commit in flight. A crash
//     before that commit loses it.
//   - DurabilityMajorityAndPersistActive and DurabilityPersistToMajority
//     acknowledge a write once it is on disk (fsynced unless NoSync).
//
// Whatever the level, the change feed (views, search, _changes) sees a write
// only once it is on disk. A request's level can raise the bucket's
// durabilityMinLevel, never lower it.
type Durability string

// The durability levels, weakest first.
const (
	// DurabilityUnset is a request that names no level: the bucket's
	// durabilityMinLevel applies.
	DurabilityUnset Durability = ""
	// DurabilityNone acknowledges from memory (Couchbase's default).
	DurabilityNone Durability = "none"
	// DurabilityMajority acknowledges once a majority of the nodes hold the
	// write in memory: on one node, from memory.
	DurabilityMajority Durability = "majority"
	// DurabilityMajorityAndPersistActive acknowledges once a majority hold it
	// and the active node has it on disk: on one node, on disk.
	DurabilityMajorityAndPersistActive Durability = "majorityAndPersistActive"
	// DurabilityPersistToMajority acknowledges once a majority have it on
	// disk: on one node, on disk. Mayfly's default for couchbase buckets.
	DurabilityPersistToMajority Durability = "persistToMajority"
)

// ErrInvalidDurability is returned for a durability level that is not one of
// Couchbase's four names. It wraps ErrInvalidSetting.
var ErrInvalidDurability = fmt.Errorf("%w: invalid durability level", ErrInvalidSetting)

// ErrDurabilityNotSupported is returned for a write to a memcached bucket
// that asks for a durability level above none: Couchbase offers no durable
// writes on memcached buckets (its memcached engine answers a durable
// write NOT_SUPPORTED), and such a bucket's durabilityMinLevel takes none
// alone. It wraps ErrInvalidDurability.
var ErrDurabilityNotSupported = fmt.Errorf("%w: memcached buckets take no durability level but none", ErrInvalidDurability)

// durabilityLevels lists the levels, for error messages.
const durabilityLevels = "none, majority, majorityAndPersistActive or persistToMajority"

// ParseDurability returns the level named s ("" is DurabilityUnset), or an
// error wrapping ErrInvalidDurability.
func ParseDurability(s string) (Durability, error) {
	d := Durability(s)
	if d != DurabilityUnset && d.rank() == 0 {
		return "", fmt.Errorf("%w: %q: must be %s", ErrInvalidDurability, s, durabilityLevels)
	}
	return d, nil
}

// rank orders the levels: 0 for unset or unknown, 1 (none) to 4
// (persistToMajority).
func (d Durability) rank() int {
	switch d {
	case DurabilityNone:
		return 1
	case DurabilityMajority:
		return 2
	case DurabilityMajorityAndPersistActive:
		return 3
	case DurabilityPersistToMajority:
		return 4
	}
	return 0
}

// levelOfRank is the level of rank r (see rank).
func levelOfRank(r int32) Durability {
	switch r {
	case 1:
		return DurabilityNone
	case 2:
		return DurabilityMajority
	case 3:
		return DurabilityMajorityAndPersistActive
	case 4:
		return DurabilityPersistToMajority
	}
	return DurabilityUnset
}

// Max returns the stronger of d and o: how a request's level (d) applies
// over a bucket's minimum (o).
func (d Durability) Max(o Durability) Durability {
	if o.rank() > d.rank() {
		return o
	}
	return d
}

// Persists reports whether a write at level d is acknowledged only once it
// is on disk. An unset level persists (Mayfly's default).
func (d Durability) Persists() bool {
	return d == DurabilityUnset || d.rank() >= DurabilityMajorityAndPersistActive.rank()
}

// durability returns the level a write asking for req gets: req raised to
// the bucket's durabilityMinLevel.
func (b *Bucket) durability(req Durability) Durability {
	return req.Max(levelOfRank(b.minDurability.Load()))
}

// checkDurability refuses a write's level that is none of the four names,
// any level but none on a memcached bucket (ErrDurabilityNotSupported, as
// the bucket's durabilityMinLevel refuses it), and one that persists on a
// bucket that keeps nothing on disk (ephemeral), as Couchbase refuses it
// (DURABILITY_INVALID_LEVEL): such a write would be answered as on disk
// and lost to the next restart.
func (b *Bucket) checkDurability(req Durability) error {
	switch {
	case req == DurabilityUnset:
		return nil
	case req.rank() == 0:
		return fmt.Errorf("%w: %q: must be %s", ErrInvalidDurability, req, durabilityLevels)
	case req.rank() > DurabilityNone.rank() && memMode(b.mem.mode.Load()) == memEvict: // a memcached bucket (modeFor)
		return fmt.Errorf("%w (asked for %s)", ErrDurabilityNotSupported, req)
	case req.Persists() && b.store.inline:
		return fmt.Errorf("%w: %s: this bucket keeps nothing on disk: its durability levels are none and majority", ErrInvalidDurability, req)
	}
	return nil
}
