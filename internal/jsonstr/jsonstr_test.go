package jsonstr_test

import (
	"encoding/json"
	"testing"

	"github.com/mayflydb/mayfly/internal/jsonstr"
)

// TestAppendMatchesMarshal: whatever the string, Append writes what
// json.Marshal does, after what dst held.
func TestAppendMatchesMarshal(t *testing.T) {
	for _, s := range []string{
		"", "doc0000123", "a b", `q"uote`, `back\slash`, "<tag>&amp;", "tab\there", "nl\n", "\x00\x1f\x7f",
		"é", "日本", "\u2028\u2029", "bad\xffutf8", "\xed\xa0\x80", "mixed é \"x\" <y>",
	} {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonstr.Append([]byte("pre,"), s); string(got) != "pre,"+string(want) {
			t.Errorf("Append(%q) = %s, want pre,%s", s, got, want)
		}
	}
}

// FuzzAppend checks Append against json.Marshal on any string.
func FuzzAppend(f *testing.F) {
	f.Add("doc1")
	f.Add("<\u2028\xff>")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := jsonstr.Append(nil, s); string(got) != string(want) {
			t.Fatalf("Append(%q) = %s, want %s", s, got, want)
		}
	})
}

// TestAppendPlainAllocatesNothing: an id of plain ASCII costs no
// allocation when dst has room (what a view answer's rows rely on).
func TestAppendPlainAllocatesNothing(t *testing.T) {
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = jsonstr.Append(buf[:0], "doc0000123") }); n != 0 {
		t.Fatalf("%v allocations per Append of a plain id, want 0", n)
	}
}
