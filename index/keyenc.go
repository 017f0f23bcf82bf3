package index

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// Tags of the key encoding, in collation order. endMark closes arrays and
// objects and sorts below every tag, so a prefix sorts first.
const (
	endMark   = 0x00
	tagNull   = 0x10
	tagFalse  = 0x20
	tagTrue   = 0x30
	tagNumber = 0x40
	tagString = 0x50
	tagArray  = 0x60
	tagObject = 0x70
)

// Byte escaping inside strings (sort keys) and document ids: 0x00 and 0x01
// become 0x01 0x01 and 0x01 0x02, so the terminator 0x00 sorts below every
// escaped byte and a shorter string sorts first.
const (
	escByte    = 0x01
	terminator = 0x00
)

// EncodeKey returns an order-preserving byte encoding of the raw JSON view key
// raw: for any valid JSON a and b, bytes.Compare(EncodeKey(a), EncodeKey(b)) has
// the sign of Compare(a, b). In particular, keys that collate equal (1 and 1.0,
// or strings that the collator holds equal) encode equal. The encoding is not
// reversible; the index keeps the original JSON beside it.
//
// Layout: null, false and true are one tag byte; a number is a tag and the
// float64 bits, flipped to sort as unsigned integers; a string is a tag, its
// collation sort key with 0x00 and 0x01 escaped, and a 0x00 terminator; an array
// is a tag, its elements and an end byte 0x00; an object is a tag, its members as
// an encoded string key and an encoded value, and an end byte. Invalid JSON gives
// an error wrapping ErrInvalidKey.
func EncodeKey(raw []byte) ([]byte, error) {
	return appendKey(nil, raw)
}

// CheckKey returns the error EncodeKey(raw) would return, without
// encoding raw: a query's keys are checked when it is prepared and encoded
// when it runs.
func CheckKey(raw []byte) error {
	if !validJSON(raw) {
		return fmt.Errorf("%w: %.64q", ErrInvalidKey, raw)
	}
	return nil
}

// appendKey appends EncodeKey(raw) to dst.
func appendKey(dst, raw []byte) ([]byte, error) {
	if err := CheckKey(raw); err != nil {
		return dst, err
	}
	st := getColl()
	defer putColl(st)
	return st.encode(dst, &scanner{b: raw}), nil
}

// encode appends the encoding of the (valid) value at the cursor.
func (st *collState) encode(dst []byte, s *scanner) []byte {
	switch k := kindOf(s.peek()); k {
	case kindNull:
		s.i += 4
		return append(dst, tagNull)
	case kindFalse:
		s.i += 5
		return append(dst, tagFalse)
	case kindTrue:
		s.i += 4
		return append(dst, tagTrue)
	case kindNumber:
		return appendFloat(append(dst, tagNumber), s.number())
	case kindString:
		return st.encodeString(dst, s)
	case kindArray:
		dst = append(dst, tagArray)
		s.i++
		for s.peek() != ']' {
			dst = st.encode(dst, s)
			skipComma(s)
		}
		s.i++
		return append(dst, endMark)
	default: // kindObject
		dst = append(dst, tagObject)
		s.i++
		for s.peek() != '}' {
			dst = st.encodeString(dst, s)
			s.peek()
			s.i++ // ':'
			dst = st.encode(dst, s)
			skipComma(s)
		}
		s.i++
		return append(dst, endMark)
	}
}

// encodeString appends a string tag, the escaped collation sort key of the string
// token at the cursor, and the terminator.
func (st *collState) encodeString(dst []byte, s *scanner) []byte {
	st.a = s.str(st.a[:0])
	st.keys.Reset()
	key := st.col.Key(&st.keys, st.a)
	return append(appendEscaped(append(dst, tagString), key), terminator)
}

// appendFloat appends f as 8 bytes that sort as f does.
func appendFloat(dst []byte, f float64) []byte {
	u := math.Float64bits(f)
	if u>>63 != 0 {
		u = ^u
	} else {
		u |= 1 << 63
	}
	return binary.BigEndian.AppendUint64(dst, u)
}

// appendEscaped appends b with 0x00 and 0x01 escaped.
func appendEscaped[T string | []byte](dst []byte, b T) []byte {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c <= escByte {
			dst = append(dst, escByte, c+1)
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

// unescape decodes an escaped run of b that ends at a terminator and returns the
// decoded bytes and the length consumed, terminator included (-1 if none).
func unescape(b []byte) ([]byte, int) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case terminator:
			return out, i + 1
		case escByte:
			if i+1 >= len(b) {
				return out, -1
			}
			i++
			out = append(out, b[i]-1)
		default:
			out = append(out, c)
		}
	}
	return out, -1
}

// encLen returns the length of the encoded value at the start of b, or -1 if b
// does not start with a whole encoded value.
func encLen(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	switch b[0] {
	case tagNull, tagFalse, tagTrue:
		return 1
	case tagNumber:
		if len(b) < 9 {
			return -1
		}
		return 9
	case tagString:
		if i := bytes.IndexByte(b[1:], terminator); i >= 0 {
			return i + 2
		}
		return -1
	case tagArray, tagObject:
		i := 1
		for i < len(b) && b[i] != endMark {
			n := encLen(b[i:])
			if n < 0 {
				return -1
			}
			i += n
		}
		if i >= len(b) {
			return -1
		}
		return i + 1
	}
	return -1
}

// groupPrefix returns the prefix of the encoded key enc that every key of its
// group shares, and only they: for level > 0 and an array key, its first level
// elements (with the end byte when the array is shorter, so only that very array
// matches); otherwise the whole key. Keys that collate equal are in one group.
func groupPrefix(enc []byte, level int, exact bool) []byte {
	n := encLen(enc)
	if n < 0 {
		return enc
	}
	if exact || level <= 0 || enc[0] != tagArray {
		return enc[:n]
	}
	i := 1
	for e := 0; e < level; e++ {
		if enc[i] == endMark {
			return enc[:i+1]
		}
		i += encLen(enc[i:])
	}
	return enc[:i]
}

// prefixEnd returns the least byte string greater than every string with prefix
// p, or nil if there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
