// Package jsonstr writes Go strings as JSON strings, byte for byte as
// encoding/json does (HTML characters and invalid UTF-8 escaped the same
// way), without its allocation for the common case: the document ids, keys
// and reasons answers carry row after row. It also checks JSON text
// (Valid) without recursing once a level, so that no value a client sends
// can run the stack out.
package jsonstr

import (
	"encoding/json"
	"unicode/utf8"
)

// Append appends s as a JSON string to dst and returns the extended slice:
// exactly what json.Marshal(s) returns. A string of printable ASCII other
// than '"', '\\', '<', '>' and '&' (every id and key the benchmarks and most
// applications use) is copied as it is, with no allocation; any other goes
// through json.Marshal.
func Append(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
