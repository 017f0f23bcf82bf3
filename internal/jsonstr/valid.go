package jsonstr

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/tidwall/gjson"
)

// MaxDepth is the deepest nesting of arrays and objects a JSON text may
// have to count as JSON here: encoding/json's own limit, with which every
// answer that carries a document as JSON is encoded.
const MaxDepth = 10000

// Valid reports whether b is one JSON text nested at most MaxDepth deep.
// It checks the depth first, without recursion, and only then has gjson
// check the syntax: gjson's check recurses once a level, and a value of a
// few million '[' (a 20 MiB document, a _bulk line, a view query's keys)
// ran it past Go's stack limit, a fatal error no recover catches.
func Valid(b []byte) bool {
	return ValidDepth(b, MaxDepth)
}

// ValidDepth is Valid with a nesting limit of its own (a _bulk line's
// object may hold a document MaxDepth deep, one level more).
func ValidDepth(b []byte, limit int) bool {
	// A JSON text limit levels deep is at least 2*limit bytes (each level
	// opens and closes), so a shorter one needs no count: the short values
	// most writes carry are checked once. gjson's recursion on a shorter
	// text that is no JSON stays under len(b) levels.
	if len(b) > 2*limit && DepthOver(b, limit) >= 0 {
		return false
	}
	return gjson.ValidBytes(b)
}

// ValidString is Valid for a string.
func ValidString(s string) bool {
	if len(s) > 2*MaxDepth && depthOver(s, MaxDepth) >= 0 {
		return false
	}
	return gjson.Valid(s)
}

// DepthOver returns the offset of the first '[' or '{' of b, outside its
// strings, that opens level limit+1, or -1 if none does. b need not be
// JSON: the scan only counts brackets.
func DepthOver(b []byte, limit int) int { return depthOver(b, limit) }

// depthOver is DepthOver for a string or a byte slice.
func depthOver[T string | []byte](b T, limit int) int {
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			if depth++; depth > limit {
				return i
			}
		case ']', '}':
			depth--
		}
	}
	return -1
}

// ValidAnyDepth reports whether b is one JSON text, however deep: a
// streaming check (encoding/json's tokens, which keep the nesting in a
// slice, not on the stack), for telling a value too deep to be JSON here
// from one that is no JSON at all. It is slow; Valid is the check to use.
func ValidAnyDepth(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return false // a syntax error, or the end before one whole value
		}
		switch t {
		case json.Delim('['), json.Delim('{'):
			depth++
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
		if depth == 0 {
			_, err := dec.Token()
			return errors.Is(err, io.EOF) // nothing after the one value
		}
	}
}
