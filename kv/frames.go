package kv

import (
	"strconv"

	"github.com/couchbase/gocbcore/v10/memd"
)

// statusUnknownFrameInfo is Couchbase's UNKNOWN_FRAME_INFO: a frame id the
// server does not know (memd has no name for it).
const statusUnknownFrameInfo = memd.StatusCode(0x80)

// Frame ids of the framing extras memd keeps undecoded (UnsupportedFrames):
// a barrier with a value, a durability frame of a bad size (checkDurability),
// an impersonation with an extra privilege, and the ids it does not know.
const (
	frameBarrier          = 0
	frameImpersonateExtra = 6
)

// checkFrameInfo refuses, answering and reporting false, a request with a
// frame Mayfly would otherwise drop while running the request as if it were
// not there: a user impersonation (NOT_SUPPORTED: the request would run
// with the authenticated user's rights, not the impersonated user's), a
// barrier with a value (EINVAL) and an unknown frame id
// (UNKNOWN_FRAME_INFO), as Couchbase answers them. The frames Mayfly may
// ignore are taken: a barrier (answers leave in request order), a tracing
// context, a DCP stream ID; the preserve-expiry and durability frames are
// acted on.
func (c *conn) checkFrameInfo(pkt *memd.Packet) bool {
	if pkt.UserImpersonationFrame != nil {
		c.fail(pkt, memd.StatusNotSupported, "Mayfly does not impersonate users")
		return false
	}
	for _, f := range pkt.UnsupportedFrames {
		switch f.Type {
		case frameDurability:
			// checkDurability answers.
		case frameBarrier:
			c.fail(pkt, memd.StatusInvalidArgs, "a barrier frame takes no value")
			return false
		case frameImpersonateExtra:
			c.fail(pkt, memd.StatusNotSupported, "Mayfly does not impersonate users")
			return false
		default:
			c.fail(pkt, statusUnknownFrameInfo, "frame id "+strconv.Itoa(int(f.Type))+" is not known to Mayfly")
			return false
		}
	}
	return true
}
