package kv

import (
	"strconv"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/engine"
)

// durabilityOf maps a request's durability requirement (the flexible-framing
// frame an SDK sends with a synchronous write) to the engine's level: no
// frame asks for nothing (the bucket's durabilityMinLevel applies); 1
// majority, 2 majorityAndPersistActive, 3 persistToMajority. Any other
// level is refused with DURABILITY_INVALID_LEVEL (checkDurability). The
// frame's timeout bounds the request's wait for its level (run): past it
// the write answers SYNC_WRITE_AMBIGUOUS (failErr).
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

// frameDurability is the durability frame's id. memd decodes one of 1 byte
// (the level) or 3 (the level and a timeout); any other size it keeps among
// the packet's UnsupportedFrames.
const frameDurability = 1

// durableCommands are the commands that take a durability frame, as
// Couchbase's: the writes. Any other command with one is refused.
var durableCommands = map[memd.CmdCode]bool{
	memd.CmdSet: true, memd.CmdAdd: true, memd.CmdReplace: true, memd.CmdDelete: true,
	memd.CmdIncrement: true, memd.CmdDecrement: true, memd.CmdAppend: true, memd.CmdPrepend: true,
	memd.CmdTouch: true, memd.CmdGAT: true,
	memd.CmdSubDocDictAdd: true, memd.CmdSubDocDictSet: true, memd.CmdSubDocDelete: true,
	memd.CmdSubDocReplace: true, memd.CmdSubDocArrayPushLast: true, memd.CmdSubDocArrayPushFirst: true,
	memd.CmdSubDocArrayInsert: true, memd.CmdSubDocArrayAddUnique: true, memd.CmdSubDocCounter: true,
	memd.CmdSubDocMultiMutation: true,
}

// checkDurability refuses, answering and reporting false, a request whose
// durability frame Couchbase refuses: one of a size other than 1 or 3 bytes
// (EINVAL: it would otherwise be ignored, the write going ahead at the
// bucket's minimum), one naming no level (DURABILITY_INVALID_LEVEL), one
// on a command that writes nothing (EINVAL), any level on a memcached
// bucket (NOT_SUPPORTED, as Couchbase's memcached engine answers a durable
// write), and a level that persists on an ephemeral bucket, which keeps
// nothing on disk (DURABILITY_INVALID_LEVEL: an
// ephemeral bucket takes majority at most, as Couchbase's does and as its
// durabilityMinLevel may be; the SDKs raise their
// durability-level-not-available error).
func (c *conn) checkDurability(pkt *memd.Packet) bool {
	for _, f := range pkt.UnsupportedFrames {
		if f.Type == frameDurability {
			c.fail(pkt, memd.StatusInvalidArgs, "the durability frame must be 1 byte (the level) or 3 (the level and a timeout), not "+strconv.Itoa(len(f.Data)))
			return false
		}
	}
	d, ok := durabilityOf(pkt)
	if !ok {
		c.fail(pkt, memd.StatusDurabilityInvalidLevel, "durability level must be 1 (majority), 2 (majorityAndPersistActive) or 3 (persistToMajority)")
		return false
	}
	if d == engine.DurabilityUnset {
		return true
	}
	if !durableCommands[pkt.Command] {
		c.fail(pkt, memd.StatusInvalidArgs, "the requested command does not support durability requirements")
		return false
	}
	if c.bucket != nil && c.bucket.Settings().Type == engine.Memcached {
		// Couchbase's memcached engine answers any durable write
		// NOT_SUPPORTED; the bucket's durabilityMinLevel takes none alone.
		c.fail(pkt, memd.StatusNotSupported, "memcached buckets take no durability level but none")
		return false
	}
	if d.Persists() && c.bucket != nil && c.bucket.Settings().Type != engine.Couchbase {
		c.fail(pkt, memd.StatusDurabilityInvalidLevel, "this bucket keeps nothing on disk: its durability levels are none and majority")
		return false
	}
	return true
}
