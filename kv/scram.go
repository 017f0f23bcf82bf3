package kv

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"hash"
	"strconv"
	"strings"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/auth"
)

// The SASL mechanisms, strongest first, as SASL_LIST_MECHS lists them.
var mechanisms = []struct{ name, cred string }{
	{"SCRAM-SHA512", auth.CredScramSHA512},
	{"SCRAM-SHA256", auth.CredScramSHA256},
	{"SCRAM-SHA1", auth.CredScramSHA1},
}

// mechList is SASL_LIST_MECHS's answer.
const mechList = "SCRAM-SHA512 SCRAM-SHA256 SCRAM-SHA1 " + mechPlain

// scramState is a SCRAM exchange between its first and its final message
// (RFC 5802).
type scramState struct {
	mech            string
	kind            string
	h               func() hash.Hash
	user            string
	known           bool // the user has a credential of this kind
	cred            auth.Credential
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	nonce           string
}

// scramFirst answers SASL_AUTH with a SCRAM mechanism: the client's first
// message "n,,n=user,r=nonce" gets the server's "r=nonce,s=salt,i=count"
// and AUTH_CONTINUE. An unknown user gets a made-up salt, and fails at the
// final step like a wrong password.
func (c *conn) scramFirst(ctx context.Context, pkt *memd.Packet, mech, kind string) {
	c.scram = nil
	msg := string(pkt.Value)
	// gs2 header: no channel binding ("n" or "y"), no authzid.
	gs2, bare, ok := cutN(msg, ',', 2)
	if !ok || (gs2 != "n," && gs2 != "y,") {
		c.scramRefused(ctx, pkt, "", "SCRAM: the first message must start n,, (no channel binding)")
		return
	}
	attrs := scramAttrs(bare)
	user, nonce := unescapeSaslName(attrs["n"]), attrs["r"]
	if user == "" || nonce == "" {
		c.scramRefused(ctx, pkt, user, "SCRAM: the first message needs n= and r=")
		return
	}
	st := &scramState{mech: mech, kind: kind, h: auth.ScramHash(kind), user: user, gs2Header: gs2 + ",", clientFirstBare: bare}
	if c.s.opts.Auth != nil {
		// The name as SASLprep prepares it (RFC 5802), else as sent.
		for _, name := range []string{auth.SASLPrep(user), user} {
			if st.cred, st.known = c.s.opts.Auth.ScramCredential(name, kind); st.known {
				st.user = name
				break
			}
		}
	}
	if !st.known {
		// The same made-up salt at every try, as a known user's: the
		// answer does not tell whether the user exists.
		st.cred = auth.Credential{Iterations: auth.DefaultScramIterations, Salt: randomBytes(st.h().Size())}
		if c.s.opts.Auth != nil {
			st.cred = c.s.opts.Auth.ScramDecoy(user, kind)
		}
	}
	st.nonce = nonce + base64.RawStdEncoding.EncodeToString(randomBytes(18))
	st.serverFirst = "r=" + st.nonce + ",s=" + base64.StdEncoding.EncodeToString(st.cred.Salt) + ",i=" + strconv.Itoa(st.cred.Iterations)
	c.scram = st
	c.reply(pkt, memd.StatusAuthContinue, nil, nil, []byte(st.serverFirst), 0, 0)
}

// scramFinal answers SASL_STEP: the client's final message
// "c=...,r=...,p=proof" is checked against the stored key; on success the
// answer is the server's signature "v=...".
func (c *conn) scramFinal(ctx context.Context, pkt *memd.Packet) {
	st := c.scram
	c.scram = nil
	if st == nil || string(pkt.Key) != st.mech {
		c.scramRefused(ctx, pkt, "", "SCRAM: no exchange in progress for "+string(pkt.Key))
		return
	}
	msg := string(pkt.Value)
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		c.scramRefused(ctx, pkt, st.user, "SCRAM: the final message has no proof")
		return
	}
	withoutProof := msg[:i]
	attrs := scramAttrs(withoutProof)
	proof, err := base64.StdEncoding.DecodeString(msg[i+3:])
	if c.s.opts.Auth == nil {
		c.loginFailed(ctx, pkt, st.user)
		return
	}
	if err != nil || attrs["r"] != st.nonce || attrs["c"] != base64.StdEncoding.EncodeToString([]byte(st.gs2Header)) {
		// A malformed final message fails like a wrong proof, in the
		// throttles too (or is refused unchecked while they hold).
		c.loginRefused(ctx, pkt, st.user, c.s.opts.Auth.FailUnchecked(st.user, c.host()))
		return
	}
	authMsg := []byte(st.clientFirstBare + "," + st.serverFirst + "," + withoutProof)
	// An unknown user's proof is checked too (it fails): the failure
	// counts in the throttles as a known user's, so that their back-off
	// does not tell the two apart.
	gen := c.usersGeneration()
	p, serverSig, err := c.s.opts.Auth.VerifyScram(st.user, st.kind, c.host(), authMsg, proof)
	if err != nil {
		c.loginRefused(ctx, pkt, st.user, err)
		return
	}
	c.login(p, gen)
	c.reply(pkt, memd.StatusSuccess, nil, nil, []byte("v="+base64.StdEncoding.EncodeToString(serverSig)), 0, 0)
}

// scramRefused answers a SCRAM message that cannot go on (why says what
// is wrong with it) as a failed login of user ("" when the message named
// none): it counts in auth's throttles like a wrong proof, so every SCRAM
// failure backs off, and while they hold it is refused unchecked as a
// throttled try. It is not audited: nothing was tried.
func (c *conn) scramRefused(ctx context.Context, pkt *memd.Packet, user, why string) {
	if c.s.opts.Auth != nil {
		if err := c.s.opts.Auth.FailUnchecked(user, c.host()); !errors.Is(err, auth.ErrBadCredentials) {
			c.loginRefused(ctx, pkt, user, err)
			return
		}
	}
	c.fail(pkt, memd.StatusAuthError, why)
}

// scramAttrs splits "a=x,b=y" into its attributes.
func scramAttrs(s string) map[string]string {
	out := map[string]string{}
	for part := range strings.SplitSeq(s, ",") {
		if k, v, ok := strings.Cut(part, "="); ok && len(k) == 1 {
			out[k] = v
		}
	}
	return out
}

// unescapeSaslName undoes SCRAM's escapes in a user name: =2C is a comma
// and =3D an equals sign.
func unescapeSaslName(s string) string {
	return strings.NewReplacer("=2C", ",", "=3D", "=").Replace(s)
}

// cutN cuts s after its n-th sep: the head keeps the separators but the
// last.
func cutN(s string, sep byte, n int) (head, tail string, ok bool) {
	i := 0
	for k := 0; k < n; k++ {
		j := strings.IndexByte(s[i:], sep)
		if j < 0 {
			return "", "", false
		}
		i += j + 1
	}
	return s[:i-1], s[i:], true
}

// randomBytes returns n bytes from crypto/rand.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error()) // crypto/rand does not fail on supported systems
	}
	return b
}
