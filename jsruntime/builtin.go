package jsruntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// builtinReducer runs _count, _sum or _stats in Go.
type builtinReducer struct {
	pr   *Program
	view string
	kind reduceKind
}

// Reduce folds map values; keys and ids are not read.
func (r *builtinReducer) Reduce(ctx context.Context, keys [][]byte, ids []string, values [][]byte) ([]byte, error) {
	if err := r.pr.check(); err != nil {
		return nil, err
	}
	if r.kind == reduceCount {
		return strconv.AppendInt(nil, int64(len(values)), 10), nil
	}
	// Couchbase's _sum and _stats take JSON numbers only (no arrays, no
	// objects, unlike CouchDB's).
	for i, v := range values {
		if _, ok := parseNumber(v); !ok {
			e := &BuiltinReduceError{View: r.view, Builtin: r.name(), Value: clip(v)}
			if i < len(keys) {
				e.Key = string(bytes.TrimSpace(keys[i])) // whole, as Couchbase names it (under MaxKeySize)
			}
			if i < len(ids) {
				e.DocID = ids[i]
			}
			return nil, e
		}
	}
	if r.kind == reduceSum {
		return r.sum(values)
	}
	return r.stats(values)
}

// clip returns v, trimmed, cut to at most 64 bytes for an error message.
func clip(v []byte) string {
	s := string(bytes.TrimSpace(v))
	if len(s) > 64 {
		s = s[:61] + "..."
	}
	return s
}

// Rereduce folds earlier reductions.
func (r *builtinReducer) Rereduce(ctx context.Context, values [][]byte) ([]byte, error) {
	if err := r.pr.check(); err != nil {
		return nil, err
	}
	switch r.kind {
	case reduceCount, reduceSum:
		return r.sum(values)
	default:
		return r.stats(values)
	}
}

func (r *builtinReducer) name() string {
	switch r.kind {
	case reduceCount:
		return "_count"
	case reduceSum:
		return "_sum"
	}
	return "_stats"
}

func (r *builtinReducer) inputError(v []byte, what string) error {
	s := string(bytes.TrimSpace(v))
	if len(s) > 64 {
		s = s[:61] + "..."
	}
	return fmt.Errorf("%w: view %s: %s: %s, not %s", ErrReduceInput, r.view, r.name(), what, s)
}

// sum implements _sum, and _count's rereduce.
func (r *builtinReducer) sum(values [][]byte) ([]byte, error) {
	var acc number
	var arr []number
	isArr := false
	for _, v := range values {
		if n, ok := parseNumber(v); ok {
			if isArr {
				if len(arr) == 0 {
					arr = append(arr, number{})
				}
				arr[0] = arr[0].add(n)
			} else {
				acc = acc.add(n)
			}
			continue
		}
		if r.kind == reduceCount {
			return nil, r.inputError(v, "counts must be numbers")
		}
		elems, ok := parseNumberArray(v)
		if !ok {
			return nil, r.inputError(v, "values must be numbers or arrays of numbers")
		}
		if !isArr {
			isArr = true
			if acc != (number{}) {
				arr = append(arr, acc)
			}
		}
		for i, e := range elems {
			if i < len(arr) {
				arr[i] = arr[i].add(e)
			} else {
				arr = append(arr, e)
			}
		}
	}
	var out []byte
	if isArr {
		out = append(out, '[')
		for i, n := range arr {
			if i > 0 {
				out = append(out, ',')
			}
			out = n.appendJSON(out)
		}
		out = append(out, ']')
	} else {
		out = acc.appendJSON(out)
	}
	return checkSize(r.view, out)
}

// stat is the running _stats of one column.
type stat struct {
	sum, min, max, sumsqr number
	count                 int64
}

func (s *stat) merge(o stat) {
	if o.count == 0 {
		return
	}
	if s.count == 0 {
		*s = o
		return
	}
	s.sum = s.sum.add(o.sum)
	s.sumsqr = s.sumsqr.add(o.sumsqr)
	s.count += o.count
	if o.min.less(s.min) {
		s.min = o.min
	}
	if s.max.less(o.max) {
		s.max = o.max
	}
}

func statOf(n number) stat {
	return stat{sum: n, min: n, max: n, sumsqr: n.mul(n), count: 1}
}

func (s *stat) appendJSON(b []byte) []byte {
	if s.count == 0 {
		return append(b, "{}"...)
	}
	b = append(b, `{"sum":`...)
	b = s.sum.appendJSON(b)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, s.count, 10)
	b = append(b, `,"min":`...)
	b = s.min.appendJSON(b)
	b = append(b, `,"max":`...)
	b = s.max.appendJSON(b)
	b = append(b, `,"sumsqr":`...)
	b = s.sumsqr.appendJSON(b)
	return append(b, '}')
}

// stats implements _stats. Reduce takes numbers or arrays of numbers of one
// length; both reduce and rereduce also take stats objects (CouchDB's
// pre-aggregated form, and _stats's own results) and arrays of them.
func (r *builtinReducer) stats(values [][]byte) ([]byte, error) {
	var one stat
	var cols []stat
	isArr := false
	for _, v := range values {
		if n, ok := parseNumber(v); ok {
			if isArr {
				return nil, r.inputError(v, "values must all be numbers or all arrays")
			}
			one.merge(statOf(n))
			continue
		}
		if s, ok := parseStatObject(v); ok {
			if isArr {
				return nil, r.inputError(v, "values must all be numbers or all arrays")
			}
			one.merge(s)
			continue
		}
		elems, ok := parseStatArray(v)
		if !ok {
			return nil, r.inputError(v, "values must be numbers or arrays of numbers")
		}
		if !isArr {
			if one.count > 0 {
				return nil, r.inputError(v, "values must all be numbers or all arrays")
			}
			isArr = true
			cols = make([]stat, len(elems))
		}
		if len(elems) != len(cols) {
			return nil, r.inputError(v, fmt.Sprintf("arrays must all have %d elements", len(cols)))
		}
		for i, e := range elems {
			cols[i].merge(e)
		}
	}
	var out []byte
	if isArr {
		out = append(out, '[')
		for i := range cols {
			if i > 0 {
				out = append(out, ',')
			}
			out = cols[i].appendJSON(out)
		}
		out = append(out, ']')
	} else {
		out = one.appendJSON(out)
	}
	return checkSize(r.view, out)
}

// number is a JSON number kept exact as an int64 while it is an integer
// that fits, as a float64 otherwise.
type number struct {
	i       int64
	f       float64
	isFloat bool
}

func (n number) float() float64 {
	if n.isFloat {
		return n.f
	}
	return float64(n.i)
}

func (n number) add(o number) number {
	if !n.isFloat && !o.isFloat {
		sum := n.i + o.i // wraps on overflow, detected below
		// Overflow when both operands have the sign the sum lacks.
		if (n.i >= 0) == (o.i >= 0) && (sum >= 0) != (n.i >= 0) {
			return number{f: n.float() + o.float(), isFloat: true}
		}
		return number{i: sum}
	}
	return number{f: n.float() + o.float(), isFloat: true}
}

func (n number) mul(o number) number {
	if !n.isFloat && !o.isFloat {
		if n.i == 0 || o.i == 0 {
			return number{}
		}
		p := n.i * o.i
		if p/o.i == n.i && !(n.i == -1 && o.i == math.MinInt64) && !(o.i == -1 && n.i == math.MinInt64) {
			return number{i: p}
		}
	}
	return number{f: n.float() * o.float(), isFloat: true}
}

func (n number) less(o number) bool {
	if !n.isFloat && !o.isFloat {
		return n.i < o.i
	}
	return n.float() < o.float()
}

func (n number) appendJSON(b []byte) []byte {
	if !n.isFloat {
		return strconv.AppendInt(b, n.i, 10)
	}
	if math.IsNaN(n.f) || math.IsInf(n.f, 0) {
		return append(b, "null"...)
	}
	return appendNumber(b, n.f)
}

// parseNumber parses v, JSON text, as one number.
func parseNumber(v []byte) (number, bool) {
	v = bytes.TrimSpace(v)
	isInt, ok := scanJSONNumber(v)
	switch {
	case !ok:
		return number{}, false
	case isInt && len(v) <= 18: // at most 18 digits: fits in an int64
		neg := v[0] == '-'
		if neg {
			v = v[1:]
		}
		var n int64
		for _, c := range v {
			n = n*10 + int64(c-'0')
		}
		if neg {
			n = -n
		}
		return number{i: n}, true
	case isInt:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return number{i: i}, true
		}
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return number{}, false
	}
	return number{f: f, isFloat: true}, true
}

// scanJSONNumber reports whether v is exactly a JSON number, and whether it
// is written as an integer (no fraction, no exponent).
func scanJSONNumber(v []byte) (isInt, ok bool) {
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	digits := func() int {
		s := i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		return i - s
	}
	if i < len(v) && v[i] == '0' {
		i++
	} else if digits() == 0 {
		return false, false
	}
	isInt = true
	if i < len(v) && v[i] == '.' {
		isInt = false
		i++
		if digits() == 0 {
			return false, false
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		isInt = false
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false, false
		}
	}
	return isInt, i == len(v)
}

// splitArray splits v, JSON text of an array, into its elements' text.
func splitArray(v []byte) ([][]byte, bool) {
	v = bytes.TrimSpace(v)
	if len(v) < 2 || v[0] != '[' || v[len(v)-1] != ']' {
		return nil, false
	}
	inner := bytes.TrimSpace(v[1 : len(v)-1])
	if len(inner) == 0 {
		return nil, true
	}
	var elems [][]byte
	depth, start, inStr := 0, 0, false
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 0 {
				elems = append(elems, inner[start:i])
				start = i + 1
			}
		}
	}
	return append(elems, inner[start:]), true
}

// parseNumberArray parses v as an array of numbers.
func parseNumberArray(v []byte) ([]number, bool) {
	elems, ok := splitArray(v)
	if !ok {
		return nil, false
	}
	out := make([]number, len(elems))
	for i, e := range elems {
		if out[i], ok = parseNumber(e); !ok {
			return nil, false
		}
	}
	return out, true
}

// parseStatArray parses v as an array whose elements are numbers or stats
// objects.
func parseStatArray(v []byte) ([]stat, bool) {
	elems, ok := splitArray(v)
	if !ok {
		return nil, false
	}
	out := make([]stat, len(elems))
	for i, e := range elems {
		if n, ok := parseNumber(e); ok {
			out[i] = statOf(n)
		} else if out[i], ok = parseStatObject(e); !ok {
			return nil, false
		}
	}
	return out, true
}

// parseStatObject parses a stats object {"sum","count","min","max","sumsqr"}
// (any order; {} is the stats of no rows).
func parseStatObject(v []byte) (stat, bool) {
	v = bytes.TrimSpace(v)
	if len(v) < 2 || v[0] != '{' || v[len(v)-1] != '}' {
		return stat{}, false
	}
	inner := bytes.TrimSpace(v[1 : len(v)-1])
	if len(inner) == 0 {
		return stat{}, true
	}
	var s stat
	seen := 0
	for _, member := range bytes.Split(inner, []byte{','}) {
		k, val, ok := bytes.Cut(member, []byte{':'})
		if !ok {
			return stat{}, false
		}
		n, ok := parseNumber(val)
		if !ok {
			return stat{}, false
		}
		switch string(bytes.TrimSpace(k)) {
		case `"sum"`:
			s.sum, seen = n, seen|1
		case `"count"`:
			if n.isFloat || n.i < 0 {
				return stat{}, false
			}
			s.count, seen = n.i, seen|2
		case `"min"`:
			s.min, seen = n, seen|4
		case `"max"`:
			s.max, seen = n, seen|8
		case `"sumsqr"`:
			s.sumsqr, seen = n, seen|16
		default:
			return stat{}, false
		}
	}
	if seen != 31 {
		return stat{}, false
	}
	return s, true
}
