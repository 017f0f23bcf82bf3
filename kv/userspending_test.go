package kv_test

import (
	"crypto/sha512"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"
	scram "github.com/couchbase/gocbcore/v10/scram"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/kv"
)

// TestLoginWhileUsersPendingIsTmpFail: while a cluster node has not
// loaded the cluster's users since it started (auth.Store.AwaitUsers),
// a stored user's SASL login, PLAIN or SCRAM, is answered TMPFAIL, a
// temporary failure an SDK retries, rather than an authentication error
// (its users.json may hold an old password); the administrator logs in.
// Once the users are loaded, the user logs in.
func TestLoginWhileUsersPendingIsTmpFail(t *testing.T) {
	var users *auth.Store
	f := newFixture(t, func(o *kv.Options) { users = o.Auth })
	records := users.Records()
	users.AwaitUsers()
	c := f.dial(t)
	c.expect(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("PLAIN"), Value: []byte("\x00" + readerUser + "\x00" + readerPass)}, memd.StatusTmpFail)
	sc := scram.NewClient(sha512.New, readerUser, readerPass)
	sc.Step(nil)
	r := c.expect(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("SCRAM-SHA512"), Value: sc.Out()}, memd.StatusAuthContinue)
	if !sc.Step(r.Value) {
		t.Fatalf("client stopped: %v", sc.Err())
	}
	c.expect(&memd.Packet{Command: memd.CmdSASLStep, Key: []byte("SCRAM-SHA512"), Value: sc.Out()}, memd.StatusTmpFail)
	c.login(adminUser, adminPass)

	if _, err := users.ReplaceUsers(records); err != nil {
		t.Fatal(err)
	}
	c = f.dial(t)
	c.login(readerUser, readerPass)
}
