package memcache

import "encoding/binary"

// memcached also speaks a binary protocol on its port, told apart by the
// first byte a connection sends. Mayfly serves the text protocol only
// (DIFFERENCES.md); a binary client is refused in its own protocol at once,
// rather than left waiting for a newline its request may never hold.
const (
	// binaryMagic is the first byte of every binary-protocol request; no
	// text command starts with it.
	binaryMagic = 0x80
	// binaryHeaderLen is the length of a binary request's header.
	binaryHeaderLen = 24
	// binaryNotSupported is the binary protocol's status "not supported".
	binaryNotSupported = 0x0083
	// binaryRefusalReason is the refusal's value.
	binaryRefusalReason = "the binary protocol is not supported: this port speaks memcached's text protocol"
)

// binaryRefusal returns the response to head, the header of a
// connection's first request, when it is a binary one: magic 0x81, the
// request's opcode and opaque, status "not supported" and the reason as the
// value. The connection is then closed.
func binaryRefusal(head []byte) []byte {
	b := make([]byte, binaryHeaderLen, binaryHeaderLen+len(binaryRefusalReason))
	b[0] = 0x81
	if len(head) > 1 {
		b[1] = head[1]
	}
	binary.BigEndian.PutUint16(b[6:], binaryNotSupported)
	binary.BigEndian.PutUint32(b[8:], uint32(len(binaryRefusalReason)))
	if len(head) >= 16 {
		copy(b[12:16], head[12:16])
	}
	return append(b, binaryRefusalReason...)
}
