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
	// bf, inside a window, is where a reader stands inside part's
	// backfill from seq (its end and the last document taken), End 0 when
	// it is in none.
	bf engine.BackfillPoint
}

// tokenVersion is the first byte of every token, so that the format can
// change without old tokens being misread. A position inside a backfill is
// written with tokenBackfill, which adds the backfill point.
const (
	tokenVersion  = 1
	tokenBackfill = 2
)

// String encodes p as an opaque since/seq token: base64url of the version,
// the history UUID, the CAS and, inside a window, its width, partition and
// sequence number, as varints (about 20 characters at a window's edge, 35
// inside one).
func (p position) String() string {
	inBackfill := p.win > p.cas && p.bf.End > p.seq
	b := make([]byte, 0, 1+8+6*binary.MaxVarintLen64+len(p.bf.Key))
	if inBackfill {
		b = append(b, tokenBackfill)
	} else {
		b = append(b, tokenVersion)
	}
	b = binary.BigEndian.AppendUint64(b, p.uuid)
	b = binary.AppendUvarint(b, p.cas)
	if p.win > p.cas {
		b = binary.AppendUvarint(b, p.win-p.cas)
		b = binary.AppendUvarint(b, uint64(p.part))
		b = binary.AppendUvarint(b, p.seq)
	}
	if inBackfill {
		b = binary.AppendUvarint(b, p.bf.End-p.seq)
		b = binary.AppendUvarint(b, uint64(p.bf.Collection))
		b = append(b, p.bf.Key...)
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
	want := 0 // the varints to read: all of them (version 1), or 6 then a key
	switch b[0] {
	case tokenVersion:
	case tokenBackfill:
		want = 6
	default:
		return bad("unknown token version")
	}
	p := position{uuid: binary.BigEndian.Uint64(b[1:9])}
	rest := b[9:]
	var vals []uint64
	for len(rest) > 0 && (want == 0 || len(vals) < want) {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return bad("corrupt token")
		}
		vals = append(vals, v)
		rest = rest[n:]
	}
	if want > 0 && len(vals) != want {
		return bad("corrupt token")
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
	case 6:
		p.cas = vals[0]
		if vals[1] == 0 || vals[1] > ^uint64(0)-p.cas || vals[2] >= uint64(nparts) ||
			vals[4] == 0 || vals[4] > ^uint64(0)-vals[3] || vals[5] > uint64(^uint32(0)) || want == 0 {
			return bad("corrupt window")
		}
		p.win, p.part, p.seq = p.cas+vals[1], int(vals[2]), vals[3]
		p.bf = engine.BackfillPoint{End: p.seq + vals[4], Collection: engine.CollectionID(vals[5]), Key: string(rest)}
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
