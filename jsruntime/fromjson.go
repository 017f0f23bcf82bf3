package jsruntime

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// maxJSONDepth bounds the nesting of a JSON document turned into a JavaScript
// value, so that a hostile document cannot exhaust the goroutine stack.
const maxJSONDepth = 1000

// Caches kept by a decoder; each is cleared when it grows past its bound.
const (
	maxInternedKeys    = 4096
	maxInternedStrings = 4096
	maxInternedLen     = 32 // longest string value worth interning, in bytes
	smallInts          = 1024
)

// jsonDecoder turns JSON text into goja values of one runtime, the way
// JSON.parse would, without going through JavaScript: objects are ordinary
// objects whose own properties keep the document's order ("__proto__"
// included, as a plain property), numbers are doubles (integers that fit in
// 2^53 are kept as goja integers), and strings are JavaScript strings.
//
// It interns object keys and short string values, because documents of one
// collection repeat them; goja strings are immutable, so sharing is invisible
// to scripts. Not safe for concurrent use (neither is its runtime).
type jsonDecoder struct {
	vm      *goja.Runtime
	keys    map[string]string
	strs    map[string]goja.Value
	ints    [smallInts]goja.Value
	scratch []goja.Value // stack of array elements being built
	args    []any        // reused argument list for NewArray
	buf     []byte       // unescaping buffer
	data    []byte       // input being decoded
	pos     int          // read position in data
	depth   int          // current nesting
	err     error        // first error
	t, f, n goja.Value   // cached true, false, null
}

func newJSONDecoder(vm *goja.Runtime) *jsonDecoder {
	d := &jsonDecoder{
		vm:   vm,
		keys: make(map[string]string),
		strs: make(map[string]goja.Value),
		t:    vm.ToValue(true),
		f:    vm.ToValue(false),
		n:    goja.Null(),
	}
	for i := range d.ints {
		d.ints[i] = vm.ToValue(i)
	}
	return d
}

// decode parses data, which must hold exactly one JSON value (surrounding
// white space allowed).
func (d *jsonDecoder) decode(data []byte) (goja.Value, error) {
	d.data, d.pos, d.depth, d.err = data, 0, 0, nil
	d.skipSpace()
	v := d.value()
	if d.err == nil {
		d.skipSpace()
		if d.pos != len(d.data) {
			d.fail("unexpected data after the top-level value")
		}
	}
	d.data = nil
	d.scratch = d.scratch[:0]
	if d.err != nil {
		return nil, d.err
	}
	return v, nil
}

func (d *jsonDecoder) fail(msg string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at offset %d", ErrInvalidJSON, msg, d.pos)
	}
}

func (d *jsonDecoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jsonDecoder) value() goja.Value {
	if d.pos >= len(d.data) {
		d.fail("unexpected end of input")
		return nil
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		return d.stringValue()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return d.literal("true", d.t)
	case c == 'f':
		return d.literal("false", d.f)
	case c == 'n':
		return d.literal("null", d.n)
	}
	d.fail("unexpected character " + strconv.QuoteRune(rune(d.data[d.pos])))
	return nil
}

func (d *jsonDecoder) literal(word string, v goja.Value) goja.Value {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		d.fail("invalid literal")
		return nil
	}
	d.pos += len(word)
	return v
}

func (d *jsonDecoder) enter() bool {
	d.depth++
	if d.depth > maxJSONDepth {
		d.fail("nested too deeply")
		return false
	}
	return true
}

func (d *jsonDecoder) object() goja.Value {
	if !d.enter() {
		return nil
	}
	d.pos++ // '{'
	obj := d.vm.NewObject()
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		d.depth--
		return obj
	}
	for {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			d.fail("expected a string key")
			return nil
		}
		raw, ok := d.rawString()
		if !ok {
			return nil
		}
		key, found := d.keys[string(raw)]
		if !found {
			key = string(raw)
			if len(d.keys) >= maxInternedKeys {
				clear(d.keys)
			}
			d.keys[key] = key
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			d.fail("expected ':'")
			return nil
		}
		d.pos++
		d.skipSpace()
		v := d.value()
		if d.err != nil {
			return nil
		}
		// A data property defined, not assigned: "__proto__" and names that
		// have setters on Object.prototype behave as in JSON.parse.
		if err := obj.DefineDataProperty(key, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
			d.fail(err.Error())
			return nil
		}
		d.skipSpace()
		if d.pos >= len(d.data) {
			d.fail("unexpected end of input in an object")
			return nil
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			d.depth--
			return obj
		default:
			d.fail("expected ',' or '}'")
			return nil
		}
	}
}

func (d *jsonDecoder) array() goja.Value {
	if !d.enter() {
		return nil
	}
	d.pos++ // '['
	base := len(d.scratch)
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		d.depth--
		return d.vm.NewArray()
	}
	for {
		d.skipSpace()
		v := d.value()
		if d.err != nil {
			return nil
		}
		d.scratch = append(d.scratch, v)
		d.skipSpace()
		if d.pos >= len(d.data) {
			d.fail("unexpected end of input in an array")
			return nil
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			d.depth--
			items := d.scratch[base:]
			d.args = d.args[:0]
			for _, it := range items {
				d.args = append(d.args, it)
			}
			arr := d.vm.NewArray(d.args...)
			clear(d.args)
			clear(items)
			d.scratch = d.scratch[:base]
			return arr
		default:
			d.fail("expected ',' or ']'")
			return nil
		}
	}
}

// rawString reads a JSON string at d.pos and returns its decoded bytes, which
// alias the input when there is no escape and d.buf otherwise.
func (d *jsonDecoder) rawString() ([]byte, bool) {
	d.pos++ // opening quote
	start := d.pos
	ascii := true
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			s := d.data[start:d.pos]
			d.pos++
			if !ascii && !utf8.Valid(s) {
				d.buf = appendValidUTF8(d.buf[:0], s)
				return d.buf, true
			}
			return s, true
		case c == '\\':
			return d.escapedString(start)
		case c < 0x20:
			d.fail("control character in a string")
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		d.pos++
	}
	d.fail("unterminated string")
	return nil, false
}

// appendValidUTF8 appends s with each byte that is not part of valid UTF-8
// replaced by U+FFFD, as encoding/json does.
func appendValidUTF8(b, s []byte) []byte {
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[:size]...)
		}
		s = s[size:]
	}
	return b
}

func (d *jsonDecoder) escapedString(start int) ([]byte, bool) {
	d.buf = append(d.buf[:0], d.data[start:d.pos]...)
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			if !utf8.Valid(d.buf) {
				d.buf = appendValidUTF8(nil, d.buf)
			}
			return d.buf, true
		case c < 0x20:
			d.fail("control character in a string")
			return nil, false
		case c != '\\':
			d.buf = append(d.buf, c)
			d.pos++
			continue
		}
		d.pos++
		if d.pos >= len(d.data) {
			break
		}
		e := d.data[d.pos]
		d.pos++
		switch e {
		case '"', '\\', '/':
			d.buf = append(d.buf, e)
		case 'b':
			d.buf = append(d.buf, '\b')
		case 'f':
			d.buf = append(d.buf, '\f')
		case 'n':
			d.buf = append(d.buf, '\n')
		case 'r':
			d.buf = append(d.buf, '\r')
		case 't':
			d.buf = append(d.buf, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return nil, false
			}
			if utf16.IsSurrogate(r) {
				// A pair becomes one code point; a lone surrogate becomes
				// U+FFFD (Go strings hold UTF-8, not UTF-16).
				r2 := rune(-1)
				if d.pos+1 < len(d.data) && d.data[d.pos] == '\\' && d.data[d.pos+1] == 'u' {
					save := d.pos
					d.pos += 2
					if r2, ok = d.hex4(); !ok {
						return nil, false
					}
					if utf16.DecodeRune(r, r2) == utf8.RuneError {
						d.pos = save
						r2 = -1
					}
				}
				if r2 >= 0 {
					r = utf16.DecodeRune(r, r2)
				} else {
					r = utf8.RuneError
				}
			}
			d.buf = utf8.AppendRune(d.buf, r)
		default:
			d.fail("invalid escape in a string")
			return nil, false
		}
	}
	d.fail("unterminated string")
	return nil, false
}

func (d *jsonDecoder) hex4() (rune, bool) {
	if len(d.data)-d.pos < 4 {
		d.fail("short \\u escape")
		return 0, false
	}
	var r rune
	for _, c := range d.data[d.pos : d.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			d.fail("invalid \\u escape")
			return 0, false
		}
	}
	d.pos += 4
	return r, true
}

func (d *jsonDecoder) stringValue() goja.Value {
	raw, ok := d.rawString()
	if !ok {
		return nil
	}
	if len(raw) > maxInternedLen {
		return d.vm.ToValue(string(raw))
	}
	if v, found := d.strs[string(raw)]; found {
		return v
	}
	s := string(raw)
	v := d.vm.ToValue(s)
	if len(d.strs) >= maxInternedStrings {
		clear(d.strs)
	}
	d.strs[s] = v
	return v
}

// number parses a JSON number. Integers of up to 15 digits are converted
// without strconv; everything else goes through strconv.ParseFloat, as
// JSON.parse turns every number into a double.
func (d *jsonDecoder) number() goja.Value {
	start := d.pos
	neg := false
	if d.data[d.pos] == '-' {
		neg = true
		d.pos++
	}
	intStart := d.pos
	var n int64
	for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
		n = n*10 + int64(d.data[d.pos]-'0')
		d.pos++
	}
	digits := d.pos - intStart
	if digits == 0 || (digits > 1 && d.data[intStart] == '0') {
		d.fail("invalid number")
		return nil
	}
	isInt := true
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		isInt = false
		d.pos++
		if !d.digits() {
			return nil
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		isInt = false
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if !d.digits() {
			return nil
		}
	}
	if isInt && digits <= 15 {
		if neg {
			if n == 0 {
				return d.vm.ToValue(math.Copysign(0, -1))
			}
			return d.vm.ToValue(-n)
		}
		if n < smallInts {
			return d.ints[n]
		}
		return d.vm.ToValue(n)
	}
	f, err := strconv.ParseFloat(string(d.data[start:d.pos]), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		d.fail("invalid number")
		return nil
	}
	return d.vm.ToValue(f)
}

func (d *jsonDecoder) digits() bool {
	s := d.pos
	for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
		d.pos++
	}
	if d.pos == s {
		d.fail("invalid number")
		return false
	}
	return true
}
