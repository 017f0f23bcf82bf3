package index_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mayflydb/mayfly/index"
)

// fuzzSeeds are keys of every kind, with the edge cases of the encoding: bytes
// 0x00 and 0x01 inside sort keys, prefixes, empty containers, and odd numbers.
var fuzzSeeds = []string{
	`null`, `false`, `true`, `0`, `-0`, `1`, `-1`, `1.5`, `1e308`, `-1e308`, `5e-324`,
	`""`, `"a"`, `"A"`, `"aa"`, `"á"`, `"~"`, `"\u0000"`, `"\u0001"`, `"a\u0000b"`,
	`"\ud800"`, `"日本"`, `[]`, `[[]]`, `[null]`, `["a"]`, `["a",1]`, `["a",[1]]`,
	`[1,"a"]`, `{}`, `{"":null}`, `{"a":1}`, `{"a":1,"b":2}`, `{"b":2,"a":1}`,
	`[{"a":[]},{}]`, ` [ 1 , 2 ] `, `[1,`, `{"a"}`, `nul`, "\"\xff\"",
}

// FuzzKeyEncoding checks that EncodeKey preserves Compare's order: for valid keys
// a and b, bytes.Compare(EncodeKey(a), EncodeKey(b)) has the sign of Compare(a, b).
// Most random inputs are not JSON, so it also checks a and b as JSON strings,
// which puts arbitrary text through the Unicode collation.
func FuzzKeyEncoding(f *testing.F) {
	for _, a := range fuzzSeeds {
		for _, b := range fuzzSeeds {
			f.Add([]byte(a), []byte(b))
		}
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		checkEncodedOrder(t, a, b)
		qa, _ := json.Marshal(string(a))
		qb, _ := json.Marshal(string(b))
		checkEncodedOrder(t, qa, qb)
	})
}

func checkEncodedOrder(t *testing.T, a, b []byte) {
	ea, erra := index.EncodeKey(a)
	eb, errb := index.EncodeKey(b)
	if erra != nil || errb != nil {
		return // invalid JSON: nothing to preserve
	}
	if got, want := bytes.Compare(ea, eb), index.Compare(a, b); got != want {
		t.Fatalf("keys %q and %q: encoded order %d, Compare %d\n% x\n% x", a, b, got, want, ea, eb)
	}
}

// FuzzCollate checks that Compare never panics and is antisymmetric and
// reflexive, for any bytes, valid JSON or not.
func FuzzCollate(f *testing.F) {
	for _, a := range fuzzSeeds {
		for _, b := range fuzzSeeds {
			f.Add([]byte(a), []byte(b))
		}
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ab, ba := index.Compare(a, b), index.Compare(b, a)
		if ab != -ba {
			t.Fatalf("Compare(%q, %q) = %d but Compare(b, a) = %d", a, b, ab, ba)
		}
		if ab < -1 || ab > 1 {
			t.Fatalf("Compare(%q, %q) = %d, want -1, 0 or 1", a, b, ab)
		}
		if c := index.Compare(a, a); c != 0 {
			t.Fatalf("Compare(%q, itself) = %d", a, c)
		}
	})
}
