package auth

import (
	"strings"
	"testing"
)

// TestShownNameKeepsTheNameAroundAnInvalidByte: a user name over
// MaxUserName bytes with a byte that is not UTF-8 near its start is shown
// (in log lines and login.failed records) as its first bytes with the bad
// byte replaced, as a short name's is, not cut back to the bytes before the
// bad one; a review found "bob\xff" followed by 200 bytes shown as "bob…",
// and "\xff" followed by 200 bytes as "…" alone.
func TestShownNameKeepsTheNameAroundAnInvalidByte(t *testing.T) {
	for _, tc := range []struct{ name, prefix string }{
		{"bob\xff" + strings.Repeat("x", 200), "bob?xxxx"},
		{"\xff" + strings.Repeat("y", 200), "?yyyy"},
	} {
		got := ShownName(tc.name)
		if !strings.HasPrefix(got, tc.prefix) || len(got) > MaxUserName {
			t.Errorf("ShownName(%.12q…) = %q (%d bytes), want it to begin %q and hold at most %d bytes", tc.name, got, len(got), tc.prefix, MaxUserName)
		}
	}
	if got := ShownName("bob\xff"); got != "bob?" {
		t.Errorf("ShownName(%q) = %q, want %q", "bob\xff", got, "bob?")
	}
}
