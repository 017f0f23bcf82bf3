package auth_test

import (
	"bytes"
	"crypto/hmac"
	"errors"
	"testing"

	"golang.org/x/crypto/pbkdf2"

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
}

// Without Options.ScramIterations, credentials take Couchbase's default of
// 15,000 iterations, and so does the decoy shown for an unknown user. (The
// other packages' tests use 100 to keep their fixtures cheap: this is
// where the default is tested.)
func TestScramDefaultIterations(t *testing.T) {
	if auth.DefaultScramIterations != 15000 {
		t.Fatalf("DefaultScramIterations = %d, Couchbase's default is 15000", auth.DefaultScramIterations)
	}
	s, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: "Administrator", AdminPassword: "admin-pass",
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{auth.CredScramSHA1, auth.CredScramSHA256, auth.CredScramSHA512} {
		c, ok := s.ScramCredential("Administrator", kind)
		if !ok || c.Iterations != auth.DefaultScramIterations {
			t.Fatalf("%s: %+v, %v; want %d iterations", kind, c, ok, auth.DefaultScramIterations)
		}
		stored, _ := auth.ScramKeys(auth.ScramHash(kind), "admin-pass", c.Salt, c.Iterations)
		if !bytes.Equal(stored, c.StoredKey) {
			t.Fatalf("%s: the stored key is not the password's at %d iterations", kind, c.Iterations)
		}
		if d := s.ScramDecoy("nobody", kind); d.Iterations != auth.DefaultScramIterations {
			t.Fatalf("%s: decoy of %d iterations, want %d", kind, d.Iterations, auth.DefaultScramIterations)
		}
	}
}

// VerifyScram accepts the proof of the right password only, and counts a
// wrong one as a failed login.
func TestVerifyScram(t *testing.T) {
	s, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: "Administrator", AdminPassword: "admin-pass",
		Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}, ScramIterations: 100,
		Throttle: &auth.Throttle{UserFree: 2}})
	if err != nil {
		t.Fatal(err)
	}
	roles, _ := auth.ParseRoles("data_reader[b]")
	if err := s.PutUser("ann", "", "ann-pass", roles); err != nil {
		t.Fatal(err)
	}
	kind := auth.CredScramSHA256
	c, _ := s.ScramCredential("ann", kind)
	msg := []byte("n=ann,r=abc,r=abcdef,s=xx,i=100,c=biws,r=abcdef")
	proof := func(pass string) []byte {
		h := auth.ScramHash(kind)
		salted := pbkdf2.Key([]byte(pass), c.Salt, c.Iterations, h().Size(), h)
		ck := hmac.New(h, salted)
		ck.Write([]byte("Client Key"))
		clientKey := ck.Sum(nil)
		sum := h()
		sum.Write(clientKey)
		sig := hmac.New(h, sum.Sum(nil))
		sig.Write(msg)
		p := sig.Sum(nil)
		for i := range p {
			p[i] ^= clientKey[i]
		}
		return p
	}
	p, serverSig, err := s.VerifyScram("ann", kind, "10.0.0.1", msg, proof("ann-pass"))
	if err != nil || p.Name != "ann" || !p.SeesBucket("b") || len(serverSig) != 32 {
		t.Fatalf("right proof: %+v, %x, %v", p, serverSig, err)
	}
	if _, _, err := s.VerifyScram("ann", kind, "10.0.0.1", msg, proof("wrong-pass")); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatalf("wrong proof: %v", err)
	}
	if _, _, err := s.VerifyScram("nobody", kind, "10.0.0.2", msg, proof("ann-pass")); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatalf("unknown user: %v", err)
	}
	// Failed proofs feed the throttle as failed passwords do.
	var throttled error
	for range 5 {
		if _, _, throttled = s.VerifyScram("ann", kind, "10.0.0.3", msg, proof("wrong-pass")); errors.Is(throttled, auth.ErrThrottled) {
			break
		}
	}
	if !errors.Is(throttled, auth.ErrThrottled) {
		t.Fatalf("after repeated wrong proofs: %v, want ErrThrottled", throttled)
	}
}
