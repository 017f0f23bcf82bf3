package kv_test

import (
	"context"
	"crypto/sha512"
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10/memd"
	scram "github.com/couchbase/gocbcore/v10/scram"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/kv"
)

// A user deleted while its KV connection is open loses its access at the
// next command, as Couchbase's memcached rebuilds a connection's privileges
// when the users change: the connection does not keep reading as a user
// that no longer exists.
func TestDeletedUserLosesAccess(t *testing.T) {
	var users *auth.Store
	f := newFixture(t, func(o *kv.Options) { users = o.Auth })
	c := f.dial(t)
	c.login(readerUser, readerPass)
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusKeyNotFound)
	if err := users.DeleteUser(readerUser); err != nil {
		t.Fatal(err)
	}
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusAccessError)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusAccessError)
}

// Roles changed while a KV connection is open apply at its next command:
// a role taken away is refused, one given is allowed, and the bucket
// selected before stays selected only while a role still reaches it.
func TestChangedRolesApplyToOpenConnection(t *testing.T) {
	var users *auth.Store
	f := newFixture(t, func(o *kv.Options) { users = o.Auth })
	if _, err := f.eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("other")); err != nil {
		t.Fatal(err)
	}
	c := f.dial(t)
	c.login(readerUser, readerPass)
	c.set(memd.CmdSet, "k", "v", 0, 0, 0, memd.StatusAccessError)

	// Given data_writer: the write is allowed without logging in again.
	if err := users.PutUser(readerUser, "", "", mustParseRoles(t, "data_reader["+bucketName+"],data_writer["+bucketName+"]")); err != nil {
		t.Fatal(err)
	}
	c.set(memd.CmdSet, "k", "v", 0, 0, 0, memd.StatusSuccess)

	// Moved to another bucket: this one's documents are out of reach.
	if err := users.PutUser(readerUser, "", "", mustParseRoles(t, "data_reader[other]")); err != nil {
		t.Fatal(err)
	}
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusAccessError)
	// Nor its collections, which any role on the bucket may read.
	c.expect(&memd.Packet{Command: memd.CmdCollectionsGetManifest}, memd.StatusAccessError)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte("other")}, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusKeyNotFound)
}

func mustParseRoles(t *testing.T, s string) []auth.Role {
	t.Helper()
	r, err := auth.ParseRoles(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// scramSalt sends a SCRAM first message for user and returns the s= and
// i= of the server's answer.
func (c *client) scramSalt(user string) string {
	c.t.Helper()
	r := c.expect(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("SCRAM-SHA512"), Value: []byte("n,,n=" + user + ",r=abcdefgh")}, memd.StatusAuthContinue)
	var out []string
	for part := range strings.SplitSeq(string(r.Value), ",") {
		if strings.HasPrefix(part, "s=") || strings.HasPrefix(part, "i=") {
			out = append(out, part)
		}
	}
	return strings.Join(out, ",")
}

// The SCRAM first step does not tell whether a user exists: a known user's
// salt and iteration count are the same at every try, so an unknown
// user's must be too (else two unthrottled, unaudited first messages list
// the users), as Couchbase answers an unknown user with a made-up salt
// derived from the name.
func TestScramFirstStepHidesUnknownUsers(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	known1, known2 := c.scramSalt(readerUser), c.scramSalt(readerUser)
	if known1 != known2 {
		t.Fatalf("a known user's salt changed between tries: %q, %q", known1, known2)
	}
	unknown1, unknown2 := c.scramSalt("nobody"), c.scramSalt("nobody")
	if unknown1 != unknown2 {
		t.Fatalf("an unknown user's salt changes at each try (%q, %q), a known user's does not: the answer tells them apart", unknown1, unknown2)
	}
	if ki, ui := known1[strings.Index(known1, "i="):], unknown1[strings.Index(unknown1, "i="):]; ki != ui {
		t.Fatalf("iteration counts differ: known %s, unknown %s", ki, ui)
	}
	if unknown1 == c.scramSalt("nobody2") {
		t.Fatalf("two unknown users share a salt %q", unknown1)
	}
}

// A SCRAM failure for an unknown user counts in the login throttles as a
// known user's does (and as PLAIN's does): else the user name's back-off,
// which a known name reaches after Throttle.UserFree failures and an
// unknown one never, tells which names exist.
func TestScramThrottlesUnknownUsers(t *testing.T) {
	f := newFixture(t, func(o *kv.Options) {
		users, err := auth.Open(t.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass,
			Argon2: &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}, ScramIterations: 100,
			Throttle: &auth.Throttle{UserFree: 2, SourceFree: 100, Base: time.Hour, Max: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		if err := users.PutUser(readerUser, "", readerPass, mustParseRoles(t, "data_reader["+bucketName+"]")); err != nil {
			t.Fatal(err)
		}
		o.Auth = users
	})
	c := f.dial(t)
	c.hello(memd.FeatureXerror)
	answers := func(user string) []string {
		var out []string
		for range 3 {
			sc := scram.NewClient(sha512.New, user, "wrong-password")
			sc.Step(nil)
			r := c.expect(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("SCRAM-SHA512"), Value: sc.Out()}, memd.StatusAuthContinue)
			if !sc.Step(r.Value) {
				t.Fatalf("client stopped: %v", sc.Err())
			}
			r = c.expect(&memd.Packet{Command: memd.CmdSASLStep, Key: []byte("SCRAM-SHA512"), Value: sc.Out()}, memd.StatusAuthError)
			out = append(out, strings.ReplaceAll(string(r.Value), user, "NAME"))
		}
		return out
	}
	known, unknown := answers(readerUser), answers("nobody")
	if !strings.Contains(known[2], "too many") {
		t.Fatalf("a known user's third failure is not throttled: %q", known)
	}
	if strings.Join(known, "|") != strings.Join(unknown, "|") {
		t.Fatalf("SCRAM failures answer a known user %q, an unknown one %q", known, unknown)
	}
}

// Before authenticating, a client may announce only a small packet: a
// header announcing a 1 MiB body (a SET, which it may not send yet
// anyway) is refused at once with E2BIG and the connection closed, rather
// than the server setting aside the whole body (memd allocates it from
// the header) and waiting for it. Else every unauthenticated connection
// holds Options.MaxBodyLen (20 MiB) for a 24-byte header. After SASL the
// same size goes through.
func TestUnauthenticatedPacketsAreSmall(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	if _, err := c.nc.Write(rawHeader(0x80, memd.CmdSet, 1, 8, 1<<20, 7)); err != nil {
		t.Fatal(err)
	}
	// On the old code the server waits for the body (up to
	// PacketTimeout, 30 s): this deadline is reached only then.
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := c.read()
	if r.Status != memd.StatusTooBig || r.Opaque != 7 {
		t.Fatalf("status %v opaque %d, want %v 7", r.Status, r.Opaque, memd.StatusTooBig)
	}
	c.expectClosed()

	c = f.dial(t)
	c.login(adminUser, adminPass)
	c.set(memd.CmdSet, "k", strings.Repeat("x", 1<<20), 0, 0, 0, memd.StatusSuccess)
}

// SASL PLAIN's authorization identity (RFC 4616) names whom the client
// asks to act as: Mayfly lets no user act as another, so a message
// naming another user fails (as SCRAM's with an a= authzid does), rather
// than logging in as the authenticating user while the client believes
// it acts as the other. Naming oneself is allowed.
func TestPlainAuthzidOfAnotherUserFails(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.expect(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("PLAIN"), Value: []byte(adminUser + "\x00" + readerUser + "\x00" + readerPass)}, memd.StatusAuthError)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusAccessError)
	c.expect(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("PLAIN"), Value: []byte(readerUser + "\x00" + readerUser + "\x00" + readerPass)}, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusSuccess)
}

// A new SASL_AUTH starts the login afresh, as Couchbase's memcached
// restarts a connection's authentication: when it fails the connection is
// no longer logged in as the user before, so a client that meant to
// switch users does not go on working with the old one's rights.
func TestFailedReauthenticationLogsOut(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.login(adminUser, adminPass)
	c.expect(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("PLAIN"), Value: []byte("\x00" + readerUser + "\x00wrong")}, memd.StatusAuthError)
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusAccessError)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusAccessError)
}
