package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"hash"

	"golang.org/x/crypto/pbkdf2"
	"golang.org/x/text/secure/precis"
)

// The kinds of SCRAM credentials (RFC 5802) a user's password is also kept
// as, for the KV port's SASL SCRAM-SHA1, SCRAM-SHA256 and SCRAM-SHA512.
// Each holds a salt, an iteration count and the stored and server keys,
// never the password. Users whose password was set before Mayfly kept
// them get them at their next password set.
const (
	CredScramSHA1   = "scram-sha-1"
	CredScramSHA256 = "scram-sha-256"
	CredScramSHA512 = "scram-sha-512"
)

// DefaultScramIterations is the PBKDF2 iteration count of new SCRAM
// credentials, as Couchbase's default.
const DefaultScramIterations = 15000

// ScramHash returns the hash a SCRAM credential kind uses, or nil for
// another kind.
func ScramHash(kind string) func() hash.Hash {
	switch kind {
	case CredScramSHA1:
		return sha1.New
	case CredScramSHA256:
		return sha256.New
	case CredScramSHA512:
		return sha512.New
	}
	return nil
}

// scramKinds are the SCRAM credentials kept for every password.
var scramKinds = []string{CredScramSHA1, CredScramSHA256, CredScramSHA512}

// ScramKeys derives SCRAM's stored and server keys from a password, a salt
// and an iteration count (RFC 5802: SaltedPassword with PBKDF2, then
// StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
// HMAC(SaltedPassword, "Server Key")).
func ScramKeys(h func() hash.Hash, password string, salt []byte, iterations int) (storedKey, serverKey []byte) {
	salted := pbkdf2.Key([]byte(password), salt, iterations, h().Size(), h)
	ck := hmac.New(h, salted)
	ck.Write([]byte("Client Key"))
	sum := h()
	sum.Write(ck.Sum(nil))
	sk := hmac.New(h, salted)
	sk.Write([]byte("Server Key"))
	return sum.Sum(nil), sk.Sum(nil)
}

// SASLPrep prepares a SCRAM user name or password as RFC 5802 asks
// (SASLprep, RFC 4013, whose successor is PRECIS's OpaqueString profile,
// RFC 8265): other spaces become U+0020 and the string takes Unicode
// normalization form C, so that a password typed with a composed "é" and
// one typed with "e" and a combining accent make the same keys. A string
// the profile refuses (control characters, an empty string) is returned
// as it is: clients that do not prepare (gocb's SCRAM sends the bytes it
// was given) then still match.
func SASLPrep(s string) string {
	if p, err := precis.OpaqueString.String(s); err == nil {
		return p
	}
	return s
}

// scramCredentials makes the SCRAM credentials of password (prepared by
// SASLPrep), each with its own random salt.
func (s *Store) scramCredentials(password string) map[string]Credential {
	password = SASLPrep(password)
	out := make(map[string]Credential, len(scramKinds))
	for _, kind := range scramKinds {
		h := ScramHash(kind)
		salt := make([]byte, h().Size())
		if _, err := rand.Read(salt); err != nil {
			panic("crypto/rand failed: " + err.Error()) // crypto/rand does not fail on supported systems
		}
		stored, server := ScramKeys(h, password, salt, s.scramIter)
		out[kind] = Credential{Iterations: s.scramIter, Salt: salt, StoredKey: stored, ServerKey: server}
	}
	return out
}

// ScramCredential returns user name's SCRAM credential of the given kind;
// false for an unknown user, or one whose password was set before SCRAM
// credentials were kept.
func (s *Store) ScramCredential(name, kind string) (Credential, bool) {
	if s.held(name) {
		return Credential{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.userLocked(name)
	if u == nil {
		return Credential{}, false
	}
	c, ok := u.Credentials[kind]
	return c, ok && len(c.StoredKey) > 0 && len(c.ServerKey) > 0 && c.Iterations > 0
}

// ScramDecoy is the credential a SCRAM exchange shows for user name when
// ScramCredential has none (an unknown user, or one without SCRAM keys):
// a salt derived from the name under a key made at start, the same at
// every try, and the iteration count of new credentials, so that the
// server's first message looks like a known user's and does not tell
// whether the user exists. No proof matches it.
func (s *Store) ScramDecoy(name, kind string) Credential {
	h := ScramHash(kind)
	if h == nil {
		h = sha512.New
	}
	m := hmac.New(sha256.New, s.cacheKey[:])
	m.Write([]byte("scram decoy salt\x00" + kind + "\x00" + name))
	seed := m.Sum(nil)
	n := h().Size()
	var salt []byte
	for i := byte(0); len(salt) < n; i++ {
		m = hmac.New(sha256.New, seed)
		m.Write([]byte{i})
		salt = m.Sum(salt)
	}
	return Credential{Iterations: s.scramIter, Salt: salt[:n]}
}

// VerifyScram checks the proof of a SCRAM exchange (RFC 5802) for user
// name and credential kind, tried from source (as for Authenticate): the
// proof XOR HMAC(StoredKey, authMessage) must hash to the stored key. It
// returns the user's principal and the server's signature
// HMAC(ServerKey, authMessage), or ErrBadCredentials (an unknown user, one
// without the credential, a wrong proof: each counts as a failed login in
// the throttles, as Authenticate's), a *ThrottledError or ErrUsersPending
// (nothing checked).
func (s *Store) VerifyScram(name, kind, source string, authMessage, proof []byte) (*Principal, []byte, error) {
	if s.held(name) {
		return nil, nil, ErrUsersPending
	}
	if len(name) > MaxUserName {
		return nil, nil, s.FailUnchecked(name, source) // no such user
	}
	now := s.now()
	if d := s.sources.wait(sourceKey(source), now); d > 0 {
		return nil, nil, &ThrottledError{Of: "source", RetryAfter: d}
	}
	if d := s.names.wait(name, now); d > 0 {
		return nil, nil, &ThrottledError{Of: "user", RetryAfter: d}
	}
	s.mu.Lock()
	u := s.userLocked(name)
	s.mu.Unlock()
	h := ScramHash(kind)
	var c Credential
	ok := u != nil && h != nil
	if ok {
		c, ok = u.Credentials[kind]
		ok = ok && len(c.StoredKey) == h().Size() && len(c.ServerKey) > 0
	}
	if ok && len(proof) == len(c.StoredKey) {
		sig := hmac.New(h, c.StoredKey)
		sig.Write(authMessage)
		clientKey := sig.Sum(nil)
		for i := range clientKey {
			clientKey[i] ^= proof[i]
		}
		sum := h()
		sum.Write(clientKey)
		if subtle.ConstantTimeCompare(sum.Sum(nil), c.StoredKey) == 1 {
			s.names.clear(name)
			p, err := principalOf(u)
			if err != nil {
				return nil, nil, err
			}
			server := hmac.New(h, c.ServerKey)
			server.Write(authMessage)
			return p, server.Sum(nil), nil
		}
	}
	s.sources.fail(sourceKey(source), now)
	s.names.fail(name, now)
	return nil, nil, ErrBadCredentials
}
