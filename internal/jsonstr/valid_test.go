package jsonstr

import (
	"bytes"
	"strings"
	"testing"
)

// deep returns n '[' then n ']': JSON nested n levels.
func deep(n int) []byte {
	return append(bytes.Repeat([]byte{'['}, n), bytes.Repeat([]byte{']'}, n)...)
}

// TestValidDoesNotRecurse: a value nested millions of levels (a 20 MiB
// document is 10 million '[' and ']') is answered, not a fatal stack
// overflow, and is not JSON here; at the limit it is.
func TestValidDoesNotRecurse(t *testing.T) {
	huge := deep(10_000_000)
	if Valid(huge) || ValidString(string(huge)) {
		t.Error("10,000,000 levels: Valid says JSON, want not (over MaxDepth)")
	}
	if !ValidAnyDepth(huge) {
		t.Error("10,000,000 levels: ValidAnyDepth says not JSON")
	}
	if !Valid(deep(MaxDepth)) || Valid(deep(MaxDepth+1)) {
		t.Errorf("at the limit: Valid(%d) %v, Valid(%d) %v; want true, false", MaxDepth, Valid(deep(MaxDepth)), MaxDepth+1, Valid(deep(MaxDepth+1)))
	}
	// Brackets inside strings do not count.
	s := []byte(`{"a":"` + strings.Repeat("[", MaxDepth+5) + `"}`)
	if !Valid(s) || DepthOver(s, MaxDepth) >= 0 {
		t.Error("brackets inside a string counted as nesting")
	}
}

// TestValidAnyDepth tells JSON of any depth from what is no JSON.
func TestValidAnyDepth(t *testing.T) {
	for _, c := range []struct {
		in   string
		want bool
	}{
		{`{"a":[1,2,{"b":null}]}`, true},
		{`"x"`, true},
		{`12.5e3`, true},
		{` [ ] `, true},
		{`[1,]`, false},
		{`{"a" 1}`, false},
		{`[1] [2]`, false},
		{`[[[`, false},
		{``, false},
		{`nul`, false},
	} {
		if got := ValidAnyDepth([]byte(c.in)); got != c.want {
			t.Errorf("ValidAnyDepth(%q) = %v, want %v", c.in, got, c.want)
		}
		if depthOK := c.want; Valid([]byte(c.in)) != depthOK {
			t.Errorf("Valid(%q) = %v, want %v", c.in, !depthOK, depthOK)
		}
	}
}
