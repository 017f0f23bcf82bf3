package kv

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/couchbase/gocbcore/v10/memd"
)

// headerLen is the fixed header of every packet.
const headerLen = 24

// The request magics: classic, and with framing extras ("alternative
// request" framing, negotiated by HELLO).
const (
	magicReq    = 0x80
	magicReqExt = 0x08
)

// header is what a request's fixed header says, checked.
type header struct {
	raw       [headerLen]byte
	cmd       memd.CmdCode
	opaque    uint32
	framesLen int
	extLen    int
	keyLen    int
	bodyLen   int
}

// parseHeader checks a request header: a request magic, and framing
// extras, extras and key that fit in a body of at most maxBody bytes. A
// body over maxBody is ErrPacketTooLarge; anything else wrong is
// ErrBadPacket. The returned header is valid for an answer (command,
// opaque) whenever raw holds 24 bytes, even with an error.
func parseHeader(raw [headerLen]byte, maxBody int) (header, error) {
	h := header{raw: raw, cmd: memd.CmdCode(raw[1]), opaque: binary.BigEndian.Uint32(raw[12:])}
	body := binary.BigEndian.Uint32(raw[8:])
	h.extLen = int(raw[4])
	switch raw[0] {
	case magicReq:
		h.keyLen = int(binary.BigEndian.Uint16(raw[2:]))
	case magicReqExt:
		h.framesLen = int(raw[2])
		h.keyLen = int(raw[3])
	default:
		return h, fmt.Errorf("%w: magic %#x is not a request", ErrBadPacket, raw[0])
	}
	if uint64(body) > uint64(maxBody) {
		return h, fmt.Errorf("%w: body of %d bytes, over %d", ErrPacketTooLarge, body, maxBody)
	}
	h.bodyLen = int(body)
	if h.framesLen+h.extLen+h.keyLen > h.bodyLen {
		return h, fmt.Errorf("%w: framing extras (%d), extras (%d) and key (%d) overrun the body (%d)", ErrBadPacket, h.framesLen, h.extLen, h.keyLen, h.bodyLen)
	}
	return h, nil
}

// checkFrames walks the framing extras: each frame's header, its escaped
// type and length bytes and its body must lie inside them.
func checkFrames(f []byte) error {
	for i := 0; i < len(f); {
		b := f[i]
		i++
		if b>>4 == 15 {
			if i >= len(f) {
				return fmt.Errorf("%w: framing extras end inside a frame header", ErrBadPacket)
			}
			i++
		}
		n := int(b & 0x0f)
		if n == 15 {
			if i >= len(f) {
				return fmt.Errorf("%w: framing extras end inside a frame header", ErrBadPacket)
			}
			n += int(f[i])
			i++
		}
		if i+n > len(f) {
			return fmt.Errorf("%w: a frame of %d bytes overruns the framing extras", ErrBadPacket, n)
		}
		i += n
	}
	return nil
}

// readRequest reads the next request from r. The header is checked before
// the body is read (so nothing is allocated for a body over maxBody), the
// framing extras before they are decoded; then memd decodes the packet,
// collection IDs included when collections is set. On ErrBadPacket or
// ErrPacketTooLarge the header is still returned for the answer; on an
// I/O error the connection is gone.
func readRequest(r *bufio.Reader, collections bool, maxBody int) (*memd.Packet, header, error) {
	var raw [headerLen]byte
	if _, err := io.ReadFull(r, raw[:]); err != nil {
		return nil, header{}, err
	}
	h, err := parseHeader(raw, maxBody)
	if err != nil {
		return nil, h, err
	}
	if h.framesLen > 0 {
		f, err := r.Peek(h.framesLen) // at most 255 bytes: within the buffer
		if err != nil {
			return nil, h, err
		}
		if err := checkFrames(f); err != nil {
			return nil, h, err
		}
	}
	pkt, err := decode(io.MultiReader(bytes.NewReader(raw[:]), io.LimitReader(r, int64(h.bodyLen))), collections)
	return pkt, h, err
}

// decode reads one checked packet with memd. A failure memd reports (a bad
// collection ID) is ErrBadPacket; so is a panic, should memd meet input
// the checks above let through.
func decode(r io.Reader, collections bool) (pkt *memd.Packet, err error) {
	defer func() {
		if p := recover(); p != nil {
			pkt, err = nil, fmt.Errorf("%w: %v", ErrBadPacket, p)
		}
	}()
	mc := memd.NewConn(readWriter{r, io.Discard})
	if collections {
		mc.EnableFeature(memd.FeatureCollections)
	}
	pkt, _, err = mc.ReadPacket()
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: %v", ErrBadPacket, err)
	}
	return pkt, nil
}

// readWriter joins a reader and a writer into the stream memd.Conn wants.
type readWriter struct {
	io.Reader
	io.Writer
}
