package auth_test

import (
	"bytes"
	"testing"

	"github.com/mayflydb/mayfly/auth"
)

// SASLPrep: other spaces become U+0020 and strings take normalization form
// C; what the profile refuses passes unchanged.
func TestSASLPrep(t *testing.T) {
	for in, want := range map[string]string{
		"pencil":          "pencil",
		"cafe\u0301":      "caf\u00e9",
		"a\u00a0b":        "a b",
		"I\u00adX":        "I\u00adX", // soft hyphen: RFC 4013 maps it to nothing, OpaqueString refuses it
		"ctl\u0007":       "ctl\u0007",
		"":                "",
		"\u2163 roman IV": "\u2163 roman IV", // OpaqueString keeps compatibility characters (no NFKC)
	} {
		if got := auth.SASLPrep(in); got != want {
			t.Errorf("SASLPrep(%q) = %q, want %q", in, got, want)
		}
	}
}

// A password's SCRAM keys derive from it as SASLPrep prepares it: the same
// password typed decomposed or composed makes the same keys.
func TestScramCredentialsPrepared(t *testing.T) {
	s, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: "Administrator", AdminPassword: "admin-pass",
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}, ScramIterations: 100})
	if err != nil {
		t.Fatal(err)
	}
	roles, _ := auth.ParseRoles("data_reader[b]")
	if err := s.PutUser("ann", "", "cafe\u0301\u00a0au lait", roles); err != nil {
		t.Fatal(err)
	}
	c, ok := s.ScramCredential("ann", auth.CredScramSHA256)
	if !ok {
		t.Fatal("no credential")
	}
	stored, _ := auth.ScramKeys(auth.ScramHash(auth.CredScramSHA256), "caf\u00e9 au lait", c.Salt, c.Iterations)
	if !bytes.Equal(stored, c.StoredKey) {
		t.Fatal("the keys do not derive from the prepared password")
	}
}
