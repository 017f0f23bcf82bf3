package auth_test

import (
	"bytes"
	"testing"

	"github.com/mayflydb/mayfly/auth"
)

// Setting a password keeps SCRAM credentials derived from it (and never
// the password); the administrator has them too.
func TestScramCredentials(t *testing.T) {
	s, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: "Administrator", AdminPassword: "admin-pass",
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}, ScramIterations: 100})
	if err != nil {
		t.Fatal(err)
	}
	roles, _ := auth.ParseRoles("data_reader[b]")
	if err := s.PutUser("ann", "", "ann-pass", roles); err != nil {
		t.Fatal(err)
	}
	for _, user := range []struct{ name, pass string }{{"ann", "ann-pass"}, {"Administrator", "admin-pass"}} {
		for _, kind := range []string{auth.CredScramSHA1, auth.CredScramSHA256, auth.CredScramSHA512} {
			c, ok := s.ScramCredential(user.name, kind)
			if !ok || c.Iterations != 100 {
				t.Fatalf("%s %s: %+v, %v", user.name, kind, c, ok)
			}
			stored, server := auth.ScramKeys(auth.ScramHash(kind), user.pass, c.Salt, c.Iterations)
			if !bytes.Equal(stored, c.StoredKey) || !bytes.Equal(server, c.ServerKey) {
				t.Fatalf("%s %s: keys do not derive from the password", user.name, kind)
			}
			wrong, _ := auth.ScramKeys(auth.ScramHash(kind), "other", c.Salt, c.Iterations)
			if bytes.Equal(wrong, c.StoredKey) {
				t.Fatalf("%s %s: another password gives the same key", user.name, kind)
			}
		}
	}
	if _, ok := s.ScramCredential("nobody", auth.CredScramSHA512); ok {
		t.Fatal("an unknown user has a credential")
	}
	p, err := s.Principal("ann")
	if err != nil || p.Name != "ann" || !p.SeesBucket("b") || p.SeesBucket("c") {
		t.Fatalf("Principal: %+v, %v", p, err)
	}
}
