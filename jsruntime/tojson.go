package jsruntime

import (
	"math"
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// maxEncodeDepth bounds the nesting of a value turned into JSON.
const maxEncodeDepth = 1000

// jsonEncoder writes goja values as JSON text with JSON.stringify's rules:
// toJSON methods are called, boxed primitives are unwrapped, NaN and
// infinities become null, object properties are the own enumerable string
// keys in order, properties holding undefined, functions or symbols are left
// out of objects and become null in arrays, and a cycle or a BigInt is a
// TypeError. At the top level (an emitted key or value, a reduction)
// undefined and symbols become null and a function is an error.
//
// It must run while its runtime executes JavaScript (inside a native
// function), because getters and toJSON methods may run script and throw:
// errors are thrown as JavaScript TypeErrors by panicking, which goja turns
// into an exception. Not safe for concurrent use.
type jsonEncoder struct {
	vm    *goja.Runtime
	stack []*goja.Object // objects being written, to detect cycles
	idx   []string       // array index strings "0", "1", ...
}

func newJSONEncoder(vm *goja.Runtime) *jsonEncoder {
	return &jsonEncoder{vm: vm}
}

// appendTop appends v as the JSON of an emitted key or value, or of a
// reduction. what names v in error messages ("key", "value", "reduction").
func (e *jsonEncoder) appendTop(b []byte, v goja.Value, what string) []byte {
	e.stack = e.stack[:0]
	b, ok := e.appendValue(b, v, "", what)
	if !ok {
		if o, isObj := v.(*goja.Object); isObj {
			if _, callable := goja.AssertFunction(o); callable {
				e.throw("emitted " + what + " is a function, which has no JSON form")
			}
		}
		b = append(b, "null"...)
	}
	return b
}

func (e *jsonEncoder) throw(msg string) {
	panic(e.vm.NewTypeError(msg))
}

func (e *jsonEncoder) index(i int) string {
	for len(e.idx) <= i {
		e.idx = append(e.idx, strconv.Itoa(len(e.idx)))
	}
	return e.idx[i]
}

// appendValue appends the JSON of v, the property key of its holder (""
// at the top); it reports false, appending nothing, when v has no JSON form
// (undefined, a function, a symbol).
func (e *jsonEncoder) appendValue(b []byte, v goja.Value, key, what string) ([]byte, bool) {
	if v == nil || goja.IsUndefined(v) {
		return b, false
	}
	if o, ok := v.(*goja.Object); ok {
		if tj := o.Get("toJSON"); tj != nil {
			if f, callable := goja.AssertFunction(tj); callable {
				r, err := f(o, e.vm.ToValue(key))
				if err != nil {
					panic(err)
				}
				v = r
				if v == nil || goja.IsUndefined(v) {
					return b, false
				}
			}
		}
	}
	switch x := v.(type) {
	case *goja.Object:
		return e.appendObject(b, x, what)
	case *goja.Symbol:
		return b, false
	case goja.String:
		return appendQuoted(b, x.String()), true
	}
	if goja.IsNull(v) {
		return append(b, "null"...), true
	}
	if goja.IsBigInt(v) {
		e.throw("Do not know how to serialize a BigInt")
	}
	switch v.ExportType().Kind() {
	case reflect.Int64:
		return strconv.AppendInt(b, v.ToInteger(), 10), true
	case reflect.Float64:
		f := v.ToFloat()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return append(b, "null"...), true
		}
		return appendNumber(b, f), true
	case reflect.Bool:
		return strconv.AppendBool(b, v.ToBoolean()), true
	}
	// Unknown primitive: fall back on its string form.
	return appendQuoted(b, v.String()), true
}

func (e *jsonEncoder) appendObject(b []byte, o *goja.Object, what string) ([]byte, bool) {
	switch o.ClassName() {
	case "Array":
		return e.appendArray(b, o, what), true
	case "Object":
	case "Number":
		f := o.ToFloat()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return append(b, "null"...), true
		}
		return appendNumber(b, f), true
	case "String":
		return appendQuoted(b, o.String()), true
	case "Boolean":
		v, _ := o.Export().(bool)
		return strconv.AppendBool(b, v), true
	case "BigInt":
		e.throw("Do not know how to serialize a BigInt")
	default:
		if _, callable := goja.AssertFunction(o); callable {
			return b, false
		}
	}
	e.push(o)
	b = append(b, '{')
	first := true
	for _, k := range o.Keys() {
		mark := len(b)
		if !first {
			b = append(b, ',')
		}
		b = appendQuoted(b, k)
		b = append(b, ':')
		var ok bool
		if b, ok = e.appendValue(b, o.Get(k), k, what); !ok {
			b = b[:mark] // property left out
			continue
		}
		first = false
	}
	e.stack = e.stack[:len(e.stack)-1]
	return append(b, '}'), true
}

func (e *jsonEncoder) appendArray(b []byte, o *goja.Object, what string) []byte {
	e.push(o)
	n := int(o.Get("length").ToInteger())
	b = append(b, '[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		k := e.index(i)
		var ok bool
		if b, ok = e.appendValue(b, o.Get(k), k, what); !ok {
			b = append(b, "null"...)
		}
	}
	e.stack = e.stack[:len(e.stack)-1]
	return append(b, ']')
}

func (e *jsonEncoder) push(o *goja.Object) {
	if len(e.stack) >= maxEncodeDepth {
		e.throw("value nested too deeply for JSON")
	}
	for _, p := range e.stack {
		if p == o {
			e.throw("Converting circular structure to JSON")
		}
	}
	e.stack = append(e.stack, o)
}

// appendQuoted appends s as a JSON string. Non-ASCII characters are written
// as UTF-8, as JSON.stringify does; invalid UTF-8 becomes U+FFFD.
func appendQuoted(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, "\ufffd"...)
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
