package kv

import (
	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/engine"
)

// durabilityOf maps a request's durability requirement (the flexible-framing
// frame an SDK sends with a synchronous write) to the engine's level: no
// frame asks for nothing (the bucket's durabilityMinLevel applies); 1
// majority, 2 majorityAndPersistActive, 3 persistToMajority. Any other
// level is refused with DURABILITY_INVALID_LEVEL (checkDurability). The
// frame's timeout is ignored: on one node the level is met by the local
// commit, which the request's own context already bounds.
func durabilityOf(pkt *memd.Packet) (engine.Durability, bool) {
	if pkt.DurabilityLevelFrame == nil {
		return engine.DurabilityUnset, true
	}
	switch pkt.DurabilityLevelFrame.DurabilityLevel {
	case memd.DurabilityLevelMajority:
		return engine.DurabilityMajority, true
	case memd.DurabilityLevelMajorityAndPersistOnMaster:
		return engine.DurabilityMajorityAndPersistActive, true
	case memd.DurabilityLevelPersistToMajority:
		return engine.DurabilityPersistToMajority, true
	}
	return "", false
}

// level is the durability level of a write request (see durabilityOf); run
// refused the request before if its level is invalid.
func level(pkt *memd.Packet) engine.Durability {
	d, _ := durabilityOf(pkt)
	return d
}

// checkDurability answers DURABILITY_INVALID_LEVEL, and reports false, for
// a request whose durability frame names no level, or a level that persists
// on a bucket that keeps nothing on disk (an ephemeral bucket takes
// majority at most, as Couchbase's does and as its durabilityMinLevel may
// be; the SDKs raise their durability-level-not-available error).
func (c *conn) checkDurability(pkt *memd.Packet) bool {
	d, ok := durabilityOf(pkt)
	if !ok {
		c.fail(pkt, memd.StatusDurabilityInvalidLevel, "durability level must be 1 (majority), 2 (majorityAndPersistActive) or 3 (persistToMajority)")
		return false
	}
	if d != engine.DurabilityUnset && d.Persists() && c.bucket != nil && c.bucket.Settings().Type != engine.Couchbase {
		c.fail(pkt, memd.StatusDurabilityInvalidLevel, "this bucket keeps nothing on disk: its durability levels are none and majority")
		return false
	}
	return true
}
