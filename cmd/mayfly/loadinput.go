package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/mayflydb/mayfly/internal/jsonstr"
)

// maxLoadLine bounds one input line or array element: the largest value the
// server stores, with room for indentation.
const maxLoadLine = 20<<20 + 64<<10

// loadItem is one document read from the input, or why one could not be.
type loadItem struct {
	where  string // "line 12", "element 3": for messages
	id     string
	doc    []byte // compact JSON object
	line   []byte // instead of doc: a whole _bulk line, sent as it is (formatBulk)
	upsert bool   // line is an upsert
	code   string // set when the item is bad: a short reason class
	err    string // and the reason
}

// errStop ends the reading of the input: the rest cannot be read (a JSON
// array broken in the middle, a CSV header without the key column).
type errStop struct{ reason string }

func (e *errStop) Error() string { return e.reason }

// inputFormat names the formats `mayfly load` reads.
const (
	formatNDJSON = "ndjson"
	formatArray  = "json"
	formatCSV    = "csv"
	formatBulk   = "bulk" // NDJSON of _bulk lines, as mayfly export writes
)

// skipBOM skips a UTF-8 byte-order mark at the start of r (Excel's "CSV
// UTF-8" and Windows editors write one), whatever the format: left in, it
// is part of a CSV header's first column name or makes the first JSON
// value invalid.
func skipBOM(r *bufio.Reader) {
	if b, err := r.Peek(3); err == nil && bytes.Equal(b, []byte("\xef\xbb\xbf")) {
		r.Discard(3)
	}
}

// sniffFormat picks the format of r from its first significant byte: '['
// a JSON array, '{' NDJSON, anything else CSV. A UTF-8 byte-order mark is
// skipped.
func sniffFormat(r *bufio.Reader) (string, error) {
	skipBOM(r)
	for i := 1; ; i++ {
		b, err := r.Peek(i)
		if len(b) < i {
			if errors.Is(err, io.EOF) || err == nil {
				return formatNDJSON, nil // empty: nothing to load either way
			}
			return "", err
		}
		switch c := b[i-1]; c {
		case ' ', '\t', '\r', '\n':
			if i >= 4096 {
				return formatCSV, nil
			}
			continue
		case '[':
			return formatArray, nil
		case '{':
			return formatNDJSON, nil
		default:
			return formatCSV, nil
		}
	}
}

// idFinder takes a document's id from a JSON object: the --id-field given,
// or _id and then id.
type idFinder struct {
	fields []string // field names as given
	paths  []string // gjson paths of fields
}

func newIDFinder(field string) *idFinder {
	f := &idFinder{fields: []string{"_id", "id"}}
	if field != "" {
		f.fields = []string{field}
	}
	for _, n := range f.fields {
		f.paths = append(f.paths, gjson.Escape(n))
	}
	return f
}

// find returns doc's id, or the reason there is none.
func (f *idFinder) find(doc []byte) (string, string) {
	for i, p := range f.paths {
		v := gjson.GetBytes(doc, p)
		switch v.Type {
		case gjson.String:
			if v.Str == "" {
				return "", fmt.Sprintf("the %q field is empty", f.fields[i])
			}
			return v.Str, ""
		case gjson.Number:
			return v.Raw, ""
		case gjson.Null:
			if v.Exists() {
				return "", fmt.Sprintf("the %q field is null", f.fields[i])
			}
		default:
			return "", fmt.Sprintf("the %q field is not a string or a number", f.fields[i])
		}
	}
	if len(f.fields) == 1 {
		return "", fmt.Sprintf("no %q field for the id", f.fields[0])
	}
	return "", `no "_id" or "id" field for the id (name another with --id-field)`
}

// jsonItem makes a loadItem of one JSON value: it must be an object with an
// id.
func jsonItem(where string, raw []byte, ids *idFinder) loadItem {
	it := loadItem{where: where}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := json.Compact(&buf, raw); err != nil {
		it.code, it.err = "invalid_json", "not valid JSON: "+jsonReason(err)
		return it
	}
	doc := buf.Bytes()
	if len(doc) == 0 || doc[0] != '{' {
		it.code, it.err = "not_an_object", "a document must be a JSON object"
		return it
	}
	id, why := ids.find(doc)
	if why != "" {
		it.code, it.err = "no_id", why
		return it
	}
	it.id, it.doc = id, doc
	return it
}

// jsonReason is a JSON error without the package's prefix.
func jsonReason(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) && se.Offset > 0 {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// readNDJSON calls emit with the item made of each non-blank line of r.
func readNDJSON(r *bufio.Reader, item func(where string, line []byte) loadItem, emit func(loadItem) error) error {
	var line []byte
	for n := 1; ; n++ {
		line = line[:0]
		tooLong := false
		var err error
		for {
			var part []byte
			part, err = r.ReadSlice('\n')
			if !tooLong {
				if len(line)+len(part) > maxLoadLine {
					tooLong, line = true, line[:0]
				} else {
					line = append(line, part...)
				}
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading line %d: %w", n, err)
		}
		where := "line " + strconv.Itoa(n)
		switch {
		case tooLong:
			if e := emit(loadItem{where: where, code: "too_large", err: fmt.Sprintf("over %d bytes", maxLoadLine)}); e != nil {
				return e
			}
		case len(bytes.TrimSpace(line)) > 0:
			if e := emit(item(where, line)); e != nil {
				return e
			}
		}
		if err != nil {
			return nil
		}
	}
}

// readArray calls emit with each element of the JSON array r holds. A
// syntax error stops the reading: what follows cannot be found.
func readArray(r *bufio.Reader, ids *idFinder, emit func(loadItem) error) error {
	dec := json.NewDecoder(r)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return &errStop{"the input does not start a JSON array"}
	}
	for n := 1; dec.More(); n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return &errStop{fmt.Sprintf("element %d: not valid JSON: %s; the rest of the input was not read", n, jsonReason(err))}
		}
		if e := emit(jsonItem("element "+strconv.Itoa(n), raw, ids)); e != nil {
			return e
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return &errStop{"the JSON array is not closed"}
	}
	return nil
}

// readCSV calls emit with a document for each record of r after the header:
// the key column's value is the id, every other column a field (a value
// that is a JSON number stays a number, anything else is a string).
func readCSV(r io.Reader, keyColumn string, emit func(loadItem) error) error {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return &errStop{"reading the CSV header: " + csvReason(err)}
	}
	header = append([]string(nil), header...)
	key := -1
	names := make([][]byte, len(header))
	seen := map[string]bool{}
	for i, h := range header {
		if h == keyColumn {
			key = i
		}
		if seen[h] {
			return &errStop{fmt.Sprintf("the CSV header names column %q twice", h)}
		}
		seen[h] = true
		names[i], _ = json.Marshal(h)
	}
	if key < 0 {
		return &errStop{fmt.Sprintf("the CSV header has no %q column for the key (columns: %s; name another with --key-column)", keyColumn, strings.Join(header, ", "))}
	}
	var doc []byte
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			where := "after the last line read"
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				where = "line " + strconv.Itoa(pe.StartLine)
				// A record over several lines failed whole: an unclosed
				// quote takes every line to the end of the input into
				// its field, and none of them is loaded.
				if pe.Line > pe.StartLine {
					where = fmt.Sprintf("lines %d-%d", pe.StartLine, pe.Line)
				}
			}
			if e := emit(loadItem{where: where, code: "bad_csv", err: csvReason(err)}); e != nil {
				return e
			}
			if !errors.As(err, &pe) {
				return err
			}
			continue
		}
		line, _ := cr.FieldPos(0)
		where := "line " + strconv.Itoa(line)
		if rec[key] == "" {
			if e := emit(loadItem{where: where, code: "no_id", err: fmt.Sprintf("the %q column is empty", keyColumn)}); e != nil {
				return e
			}
			continue
		}
		doc = append(doc[:0], '{')
		for i, v := range rec {
			if i == key {
				continue
			}
			if len(doc) > 1 {
				doc = append(doc, ',')
			}
			doc = append(doc, names[i]...)
			doc = append(doc, ':')
			if isJSONNumber(v) {
				doc = append(doc, v...)
			} else {
				s, _ := json.Marshal(v)
				doc = append(doc, s...)
			}
		}
		doc = append(doc, '}')
		if e := emit(loadItem{where: where, id: rec[key], doc: bytes.Clone(doc)}); e != nil {
			return e
		}
	}
}

// csvReason is a CSV error without the package's wording of positions.
func csvReason(err error) string {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// isJSONNumber reports whether s is a number in JSON's grammar (so "007"
// and "1e" stay strings).
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = skipDigits(s, i)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		start := i + 1
		if i = skipDigits(s, start); i == start {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		if i = skipDigits(s, i); i == start {
			return false
		}
	}
	return i == len(s)
}

// skipDigits returns the index in s just past the ASCII digits from i on.
func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// bulkOps are the operations of a _bulk line.
var bulkOps = map[string]bool{"upsert": true, "insert": true, "replace": true, "delete": true, "touch": true}

// looksBulk reports whether r's first non-blank line is a _bulk line: an
// object whose first field is "op" naming one of _bulk's operations, as
// mayfly export writes them. It reads ahead only as far as that line's end
// (or its first 4 KiB), which it leaves in r's buffer.
func looksBulk(r *bufio.Reader) bool {
	var err error
	for {
		b, _ := r.Peek(r.Buffered()) // what has been read: no wait
		b = bytes.TrimLeft(b, " \t\r\n")
		if end := bytes.IndexByte(b, '\n'); end >= 0 {
			return bulkFirstField(b[:end])
		}
		if err != nil || len(b) >= 4096 {
			return bulkFirstField(b)
		}
		_, err = r.Peek(r.Buffered() + 1) // one read more
	}
}

// bulkFirstField reports whether b (a line, or its start) opens an object
// whose first field is "op" with the name of one of _bulk's operations.
func bulkFirstField(b []byte) bool {
	b, ok := bytes.CutPrefix(b, []byte("{"))
	if !ok {
		return false
	}
	b, ok = bytes.CutPrefix(bytes.TrimLeft(b, " \t"), []byte(`"op"`))
	if !ok {
		return false
	}
	b, ok = bytes.CutPrefix(bytes.TrimLeft(b, " \t"), []byte(":"))
	if !ok {
		return false
	}
	b = bytes.TrimLeft(b, " \t")
	end := bytes.IndexAny(b, ",}")
	if end < 0 {
		return false
	}
	var op string
	return json.Unmarshal(bytes.TrimSpace(b[:end]), &op) == nil && bulkOps[op]
}

// bulkItems makes loadItems of _bulk lines. A line is sent as it is, but
// for the collection and expiry that collection and expiry, when set,
// put in place of the line's own.
type bulkItems struct {
	collection string
	expiry     int64
}

// item makes the loadItem of one _bulk line: a JSON object with a string
// "id" (the server checks the rest and answers for it).
func (b *bulkItems) item(where string, raw []byte) loadItem {
	it := loadItem{where: where}
	raw = bytes.TrimSpace(raw)
	if !jsonstr.Valid(raw) {
		it.code, it.err = "invalid_json", "not valid JSON"
		if err := json.Unmarshal(raw, new(any)); err != nil {
			it.err += ": " + jsonReason(err)
		}
		return it
	}
	if raw[0] != '{' {
		it.code, it.err = "not_an_object", "a _bulk line must be a JSON object"
		return it
	}
	id := gjson.GetBytes(raw, "id")
	if id.Type != gjson.String || id.Str == "" {
		it.code, it.err = "no_id", `a _bulk line needs an "id" string`
		return it
	}
	it.id = id.Str
	it.upsert = gjson.GetBytes(raw, "op").Str == "upsert"
	if b.collection == "" && b.expiry == 0 {
		it.line = raw
		return it
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		it.code, it.err = "invalid_json", "not valid JSON: "+jsonReason(err)
		return it
	}
	if b.collection != "" {
		fields["collection"] = jsonstr.Append(nil, b.collection)
	}
	if b.expiry != 0 {
		fields["expiry"] = strconv.AppendInt(nil, b.expiry, 10)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the document's bytes stay as they were
	if err := enc.Encode(fields); err != nil {
		it.code, it.err = "invalid_json", "not valid JSON: "+jsonReason(err)
		return it
	}
	it.line = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return it
}
