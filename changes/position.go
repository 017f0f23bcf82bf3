package changes

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/mayflydb/mayfly/engine"
)

// position is where a consumer of the feed stands. Every change with a CAS
// at or below cas has been read. When win > cas, the window (cas, win] is
// being read partition by partition, in sequence order: partitions below
// part are done, and part is done up to sequence number seq.
//
// A position is bucket-wide and fits on every row: see engine/changes.go for
// why CAS orders the feed once it is at or below the bucket's StableCAS.
type position struct {
	uuid uint64
	cas  uint64
	win  uint64
	part int
	seq  uint64
}

// tokenVersion is the first byte of every token, so that the format can
// change without old tokens being misread.
const tokenVersion = 1

// String encodes p as an opaque since/seq token: base64url of the version,
// the history UUID, the CAS and, inside a window, its width, partition and
// sequence number, as varints (about 20 characters at a window's edge, 35
// inside one).
func (p position) String() string {
	b := make([]byte, 0, 1+8+4*binary.MaxVarintLen64)
	b = append(b, tokenVersion)
	b = binary.BigEndian.AppendUint64(b, p.uuid)
	b = binary.AppendUvarint(b, p.cas)
	if p.win > p.cas {
		b = binary.AppendUvarint(b, p.win-p.cas)
		b = binary.AppendUvarint(b, uint64(p.part))
		b = binary.AppendUvarint(b, p.seq)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// parsePosition decodes a token made by position.String for a bucket of
// nparts partitions.
func parsePosition(s string, nparts int) (position, error) {
	bad := func(why string) (position, error) {
		return position{}, fmt.Errorf("%w: since %q is not a position of this change feed (%s)", ErrBadRequest, s, why)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 10 {
		return bad("not a token")
	}
	if b[0] != tokenVersion {
		return bad("unknown token version")
	}
	p := position{uuid: binary.BigEndian.Uint64(b[1:9])}
	rest := b[9:]
	var vals []uint64
	for len(rest) > 0 {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return bad("corrupt token")
		}
		vals = append(vals, v)
		rest = rest[n:]
	}
	switch len(vals) {
	case 1:
		p.cas = vals[0]
	case 4:
		p.cas = vals[0]
		if vals[1] == 0 || vals[1] > ^uint64(0)-p.cas || vals[2] >= uint64(nparts) {
			return bad("corrupt window")
		}
		p.win, p.part, p.seq = p.cas+vals[1], int(vals[2]), vals[3]
	default:
		return bad("corrupt token")
	}
	return p, nil
}

// CurrentSeq returns the position of b's change feed now, as a since token:
// a feed from it sends every change made after this call (every write at
// or below the bucket's StableCAS is visible). _all_docs answers it as
// update_seq.
func CurrentSeq(b *engine.Bucket) string {
	return position{uuid: b.UUID(), cas: b.StableCAS()}.String()
}
