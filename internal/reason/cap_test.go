package reason_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mayflydb/mayfly/internal/reason"
)

// TestCapShowsTextAroundAnInvalidByte: Cap shows text a client sent as
// valid UTF-8 of at most n bytes, each run of bad bytes as one "?" and the
// text after it kept, cut on a rune boundary with "…"; a review found
// auth.ShownName and httpapi's capString, whose rule this is now, cut a
// long text back to the bytes before its first bad byte.
func TestCapShowsTextAroundAnInvalidByte(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"bob", 16, "bob"},
		{"bob\xff", 16, "bob?"},
		{"bob\xff\xfe\xffann", 16, "bob?ann"},
		{"bob\xff" + strings.Repeat("x", 20), 16, "bob?xxxxxxxxx…"},
		{"\xff" + strings.Repeat("y", 20), 16, "?yyyyyyyyyyyy…"},
		{strings.Repeat("x", 16), 16, strings.Repeat("x", 16)},
		{strings.Repeat("x", 17), 16, strings.Repeat("x", 13) + "…"},
		{strings.Repeat("x", 12) + "é" + "zzz", 16, strings.Repeat("x", 12) + "…"},
		{strings.Repeat("\xff", 1<<14), 16, "?"},
		{strings.Repeat("x", 16) + "\xff", 16, strings.Repeat("x", 13) + "…"},
	} {
		got := reason.Cap(tc.in, tc.n)
		if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("Cap(%.24q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
