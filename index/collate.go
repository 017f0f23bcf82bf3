package index

import (
	"bytes"
	"cmp"
	"sync"

	"golang.org/x/text/collate"
	"golang.org/x/text/language"
)

// collState is the per-goroutine machinery of collation: a *collate.Collator is
// not safe for concurrent use, so each caller borrows one from collPool.
type collState struct {
	col  *collate.Collator
	keys collate.Buffer // sort keys made by EncodeKey
	a, b []byte         // decoded strings being compared
}

// collPool is the package's only shared state: idle collators.
var collPool = sync.Pool{New: func() any {
	return &collState{col: collate.New(language.Und)}
}}

func getColl() *collState { return collPool.Get().(*collState) }

func putColl(st *collState) {
	st.keys.Reset()
	collPool.Put(st)
}

// Compare compares two raw JSON view keys in view collation, the order of
// CouchDB and Couchbase views, and returns -1, 0 or +1:
//
//	null < false < true < numbers < strings < arrays < objects
//
// Numbers compare by float64 value. Strings compare by the Unicode Collation
// Algorithm with the root locale's tailoring (golang.org/x/text/collate,
// language.Und, tertiary strength): "a" < "A" < "aa" < "b", "~" < "0", and an
// accented letter sorts after its base letter. Arrays compare element by element,
// a prefix first; objects compare member by member in written order, key then
// value, the object with fewer members first.
//
// An input that is not valid JSON sorts after every valid one; two invalid inputs
// compare byte-wise. Compare is safe for concurrent use.
func Compare(a, b []byte) int {
	va, vb := validJSON(a), validJSON(b)
	switch {
	case !va && !vb:
		return bytes.Compare(a, b)
	case !va:
		return 1
	case !vb:
		return -1
	}
	st := getColl()
	defer putColl(st)
	return st.compare(&scanner{b: a}, &scanner{b: b})
}

// compare compares the values at the cursors of sa and sb and leaves each cursor
// after its value when they compare equal.
func (st *collState) compare(sa, sb *scanner) int {
	ka, kb := kindOf(sa.peek()), kindOf(sb.peek())
	if ka != kb {
		return cmp.Compare(ka, kb)
	}
	switch ka {
	case kindNumber:
		return cmp.Compare(sa.number(), sb.number())
	case kindString:
		return st.compareStrings(sa, sb)
	case kindArray:
		sa.i++
		sb.i++
		for {
			ea, eb := sa.peek() == ']', sb.peek() == ']'
			switch {
			case ea && eb:
				sa.i++
				sb.i++
				return 0
			case ea:
				return -1
			case eb:
				return 1
			}
			if c := st.compare(sa, sb); c != 0 {
				return c
			}
			skipComma(sa)
			skipComma(sb)
		}
	case kindObject:
		sa.i++
		sb.i++
		for {
			ea, eb := sa.peek() == '}', sb.peek() == '}'
			switch {
			case ea && eb:
				sa.i++
				sb.i++
				return 0
			case ea:
				return -1
			case eb:
				return 1
			}
			if c := st.compareStrings(sa, sb); c != 0 {
				return c
			}
			sa.peek()
			sb.peek()
			sa.i++ // ':'
			sb.i++
			if c := st.compare(sa, sb); c != 0 {
				return c
			}
			skipComma(sa)
			skipComma(sb)
		}
	default: // null, false, true
		sa.i += literalLen[ka]
		sb.i += literalLen[kb]
		return 0
	}
}

func skipComma(s *scanner) {
	if s.peek() == ',' {
		s.i++
	}
}

// compareStrings collates the string tokens at the two cursors.
func (st *collState) compareStrings(sa, sb *scanner) int {
	st.a = sa.str(st.a[:0])
	st.b = sb.str(st.b[:0])
	return st.col.Compare(st.a, st.b)
}
