package index_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/index"
)

// couchOrder is CouchDB's documented collation order (view_collation test),
// ascending, with negatives, floats, accents and case added.
var couchOrder = []string{
	`null`,
	`false`,
	`true`,
	`-1e300`,
	`-2`,
	`-1.5`,
	`0`,
	`1e-300`,
	`1`,
	`2`,
	`3.0`,
	`4`,
	`4.5`,
	`1e300`,
	`""`,
	`"~"`,
	`"0"`,
	`"9"`,
	`"a"`,
	`"A"`,
	`"á"`,
	`"Á"`,
	`"aa"`,
	`"b"`,
	`"B"`,
	`"ba"`,
	`"bb"`,
	`[]`,
	`["a"]`,
	`["b"]`,
	`["b","c"]`,
	`["b","c","a"]`,
	`["b","d"]`,
	`["b","d","e"]`,
	`{}`,
	`{"a":1}`,
	`{"a":2}`,
	`{"b":1}`,
	`{"b":2}`,
	`{"b":2,"a":1}`,
	`{"b":2,"c":2}`,
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestCompare_CouchDBOrder(t *testing.T) {
	for i, a := range couchOrder {
		for j, b := range couchOrder {
			want := sign(i - j)
			if got := index.Compare([]byte(a), []byte(b)); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", a, b, got, want)
			}
			ea, err := index.EncodeKey([]byte(a))
			if err != nil {
				t.Fatalf("EncodeKey(%s): %v", a, err)
			}
			eb, _ := index.EncodeKey([]byte(b))
			if got := bytes.Compare(ea, eb); got != want {
				t.Errorf("bytes.Compare(EncodeKey(%s), EncodeKey(%s)) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func TestCompare_Pairs(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{`1`, `1.0`, 0},
		{`1`, `1e0`, 0},
		{`-0`, `0`, 0},
		{`0.1`, `1e-1`, 0},
		{`9007199254740993`, `9007199254740992`, 0}, // float64 precision, as strtod
		{`"abc123"`, `"ABC123"`, -1},                // Couchbase's documented examples
		{`"ABC123"`, `"abc223"`, -1},
		{`"abc223"`, `"ABC223"`, -1},
		{`"ABC223"`, `"abcd23"`, -1},
		{`"abcd23"`, `"bbc123"`, -1},
		{`"bbc123"`, `"bbcd23"`, -1},
		{`"a"`, `"AA"`, -1},
		{`"\u0061"`, `"a"`, 0},       // escapes decode before comparing
		{`"e\u0301"`, `"é"`, 0},      // canonical equivalents collate equal
		{`"\ud83d\ude00"`, `"😀"`, 0}, // surrogate pair
		{`[1, 2]`, `[1,2]`, 0},       // white space is not significant
		{` {"a" : [ true ] } `, `{"a":[true]}`, 0},
		{`[1,[2]]`, `[1,[2,0]]`, -1},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, -1}, // members compare in written order
		{`[null]`, `[false]`, -1},
		{`1e400`, `1e300`, 1}, // out of range: +Inf
		{`"\u0000"`, `""`, 0}, // ignorable code points
	} {
		if got := index.Compare([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("Compare(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := index.Compare([]byte(tc.b), []byte(tc.a)); got != -tc.want {
			t.Errorf("Compare(%s, %s) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
		ea, _ := index.EncodeKey([]byte(tc.a))
		eb, _ := index.EncodeKey([]byte(tc.b))
		if got := bytes.Compare(ea, eb); got != tc.want {
			t.Errorf("EncodeKey order of %s and %s = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestCompare_ASCII checks the order of the printable ASCII characters as
// one-character strings. ICU's root collator (CouchDB's documented list) puts
// ` and ^ before _; golang.org/x/text's CLDR 23 tables put them after %, and
// space first. That is the one known difference in 7-bit ASCII.
func TestCompare_ASCII(t *testing.T) {
	const want = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789aAbBcCdDeEfFgGhHiIjJkKlLmMnNoOpPqQrRsStTuUvVwWxXyYzZ"
	for i := 0; i+1 < len(want); i++ {
		a := fmt.Sprintf("%q", want[i:i+1])
		b := fmt.Sprintf("%q", want[i+1:i+2])
		if got := index.Compare([]byte(a), []byte(b)); got != -1 {
			t.Errorf("Compare(%s, %s) = %d, want -1", a, b, got)
		}
	}
}

func TestCompare_InvalidSortsLast(t *testing.T) {
	for _, bad := range []string{``, `nul`, `[1,]`, `{"a"}`, `01`, `"\x01"`, `1 2`, `"\u12"`, `[`, `{"a":1,}`} {
		if got := index.Compare([]byte(bad), []byte(`{"z":[]}`)); got != 1 {
			t.Errorf("Compare(%q, object) = %d, want 1", bad, got)
		}
		if got := index.Compare([]byte(`null`), []byte(bad)); got != -1 {
			t.Errorf("Compare(null, %q) = %d, want -1", bad, got)
		}
		if _, err := index.EncodeKey([]byte(bad)); !errors.Is(err, index.ErrInvalidKey) {
			t.Errorf("EncodeKey(%q) error = %v, want ErrInvalidKey", bad, err)
		}
	}
}

func TestEncodeKey_DeepNesting(t *testing.T) {
	deep := bytes.Repeat([]byte("["), 5000)
	deep = append(deep, bytes.Repeat([]byte("]"), 5000)...)
	if _, err := index.EncodeKey(deep); !errors.Is(err, index.ErrInvalidKey) {
		t.Errorf("EncodeKey(5000 nested arrays) error = %v, want ErrInvalidKey", err)
	}
	ok := append(bytes.Repeat([]byte("["), 1000), bytes.Repeat([]byte("]"), 1000)...)
	if _, err := index.EncodeKey(ok); err != nil {
		t.Errorf("EncodeKey(1000 nested arrays): %v", err)
	}
}
