package kv

import "errors"

var (
	// ErrServerClosed is returned by Serve after Close.
	ErrServerClosed = errors.New("kv: server closed")
	// ErrInvalidOptions is returned by New for an option out of range.
	ErrInvalidOptions = errors.New("kv: invalid options")
	// ErrBadPacket is a packet that cannot be read: a wrong magic, lengths
	// that do not add up, framing extras that overrun. The connection is
	// closed after an EINVAL answer.
	ErrBadPacket = errors.New("kv: malformed packet")
	// ErrPacketTooLarge is a packet whose body is over Options.MaxBodyLen.
	// The connection is closed after an E2BIG answer, without reading the
	// body.
	ErrPacketTooLarge = errors.New("kv: packet too large")
)
