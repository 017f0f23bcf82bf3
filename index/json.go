package index

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds the nesting of arrays and objects in a key. An emitted key is
// under 4096 bytes, so no key a caller may store nests deeper; the bound keeps the
// recursive walkers of this package off the edge of the stack for any input.
const maxDepth = 4096

// JSON value kinds, numbered in collation order.
const (
	kindNull = iota
	kindFalse
	kindTrue
	kindNumber
	kindString
	kindArray
	kindObject
	kindInvalid
)

// scanner walks one JSON text. It is a cursor over b: the methods that read a
// value assume the text was accepted by validJSON, and never read past len(b).
type scanner struct {
	b []byte
	i int
}

func (s *scanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek skips white space and returns the next byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.skipSpace()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// kindOf gives the kind of the value starting with byte c.
func kindOf(c byte) int {
	switch {
	case c == 'n':
		return kindNull
	case c == 'f':
		return kindFalse
	case c == 't':
		return kindTrue
	case c == '-' || c >= '0' && c <= '9':
		return kindNumber
	case c == '"':
		return kindString
	case c == '[':
		return kindArray
	case c == '{':
		return kindObject
	}
	return kindInvalid
}

// literalLen is the length of the literals null, false and true.
var literalLen = [...]int{kindNull: 4, kindFalse: 5, kindTrue: 4}

// number reads a number token at the cursor and returns its float64 value.
// Out-of-range magnitudes become ±Inf or zero, as strtod gives; -0 becomes 0, so
// that equal values are equal numbers.
func (s *scanner) number() float64 {
	start := s.i
	s.i = skipNumber(s.b, s.i)
	f, _ := strconv.ParseFloat(string(s.b[start:s.i]), 64)
	if f == 0 {
		f = 0 // -0 → 0
	}
	return f
}

// str reads a string token at the cursor and appends its decoded UTF-8 text to
// dst. Invalid UTF-8 and lone surrogates decode to U+FFFD, as encoding/json does.
func (s *scanner) str(dst []byte) []byte {
	s.i++ // opening quote
	for {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return dst
		case c == '\\':
			var r rune
			r, s.i = decodeEscape(s.b, s.i)
			dst = utf8.AppendRune(dst, r)
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			s.i++
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			dst = utf8.AppendRune(dst, r) // RuneError for invalid bytes
			s.i += n
		}
	}
}

// decodeEscape decodes the escape sequence at b[i] (a backslash) and returns the
// rune and the index after it. A high surrogate followed by an escaped low
// surrogate decodes as one rune; any other surrogate decodes as U+FFFD.
func decodeEscape(b []byte, i int) (rune, int) {
	switch b[i+1] {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
		r := hex4(b[i+2 : i+6])
		i += 6
		if utf16.IsSurrogate(r) {
			if r < 0xdc00 && i+6 <= len(b) && b[i] == '\\' && b[i+1] == 'u' {
				if r2 := hex4(b[i+2 : i+6]); r2 >= 0xdc00 && r2 <= 0xdfff {
					return utf16.DecodeRune(r, r2), i + 6
				}
			}
			return utf8.RuneError, i
		}
		return r, i
	default: // '"', '\\', '/'
		return rune(b[i+1]), i + 2
	}
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// skipNumber returns the index after the (valid) number token at b[i].
func skipNumber(b []byte, i int) int {
	for i < len(b) {
		switch c := b[i]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue moves the cursor past one (valid) value.
func (s *scanner) skipValue() {
	switch c := s.peek(); kindOf(c) {
	case kindNull, kindFalse, kindTrue:
		s.i += literalLen[kindOf(c)]
	case kindNumber:
		s.i = skipNumber(s.b, s.i)
	case kindString:
		s.i = skipString(s.b, s.i)
	case kindArray, kindObject:
		depth := 0
		for {
			switch s.b[s.i] {
			case '[', '{':
				depth++
				s.i++
			case ']', '}':
				depth--
				s.i++
				if depth == 0 {
					return
				}
			case '"':
				s.i = skipString(s.b, s.i)
			default:
				s.i++
			}
		}
	}
}

// skipString returns the index after the (valid) string token at b[i].
func skipString(b []byte, i int) int {
	for i++; ; i++ {
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			i++
		}
	}
}

// validJSON reports whether b holds exactly one JSON value (RFC 8259), with
// optional surrounding white space, nested at most maxDepth deep.
func validJSON(b []byte) bool {
	v := validator{b: b}
	if !v.value(0) {
		return false
	}
	v.skipSpace()
	return v.i == len(b)
}

type validator struct {
	b []byte
	i int
}

func (v *validator) skipSpace() {
	for v.i < len(v.b) {
		switch v.b[v.i] {
		case ' ', '\t', '\n', '\r':
			v.i++
		default:
			return
		}
	}
}

func (v *validator) value(depth int) bool {
	v.skipSpace()
	if v.i >= len(v.b) {
		return false
	}
	switch c := v.b[v.i]; c {
	case 'n':
		return v.literal("null")
	case 'f':
		return v.literal("false")
	case 't':
		return v.literal("true")
	case '"':
		return v.string()
	case '[':
		if depth >= maxDepth {
			return false
		}
		v.i++
		v.skipSpace()
		if v.i < len(v.b) && v.b[v.i] == ']' {
			v.i++
			return true
		}
		for {
			if !v.value(depth + 1) {
				return false
			}
			v.skipSpace()
			if v.i >= len(v.b) {
				return false
			}
			switch v.b[v.i] {
			case ',':
				v.i++
			case ']':
				v.i++
				return true
			default:
				return false
			}
		}
	case '{':
		if depth >= maxDepth {
			return false
		}
		v.i++
		v.skipSpace()
		if v.i < len(v.b) && v.b[v.i] == '}' {
			v.i++
			return true
		}
		for {
			v.skipSpace()
			if v.i >= len(v.b) || v.b[v.i] != '"' || !v.string() {
				return false
			}
			v.skipSpace()
			if v.i >= len(v.b) || v.b[v.i] != ':' {
				return false
			}
			v.i++
			if !v.value(depth + 1) {
				return false
			}
			v.skipSpace()
			if v.i >= len(v.b) {
				return false
			}
			switch v.b[v.i] {
			case ',':
				v.i++
			case '}':
				v.i++
				return true
			default:
				return false
			}
		}
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return v.number()
		}
		return false
	}
}

func (v *validator) literal(lit string) bool {
	if len(v.b)-v.i < len(lit) || string(v.b[v.i:v.i+len(lit)]) != lit {
		return false
	}
	v.i += len(lit)
	return true
}

func (v *validator) string() bool {
	v.i++ // opening quote
	for v.i < len(v.b) {
		c := v.b[v.i]
		switch {
		case c == '"':
			v.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if v.i+1 >= len(v.b) {
				return false
			}
			switch v.b[v.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				v.i += 2
			case 'u':
				if v.i+6 > len(v.b) {
					return false
				}
				for _, h := range v.b[v.i+2 : v.i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				v.i += 6
			default:
				return false
			}
		default:
			v.i++
		}
	}
	return false
}

func (v *validator) number() bool {
	b, i := v.b, v.i
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	v.i = i
	return true
}
