package kv_test

import (
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/kv"
)

// A user deleted while its KV connection is open is logged out: the
// connection gets access errors until it authenticates again, even when a
// new user of the same name is created before its next command (an
// administrator replacing a leaked account by deleting it and creating it
// afresh with a new password). The new user's roles and password are not
// the old connection's to use. (A review found the connection looked its
// user up by name only, so it went on as the new user without logging in.)
func TestUserDeletedAndCreatedAgainLogsConnectionOut(t *testing.T) {
	var users *auth.Store
	f := newFixture(t, func(o *kv.Options) { users = o.Auth })
	c := f.dial(t)
	c.login(readerUser, readerPass)
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusKeyNotFound)
	if err := users.DeleteUser(readerUser); err != nil {
		t.Fatal(err)
	}
	if err := users.PutUser(readerUser, "", "a-new-password", mustParseRoles(t, "data_reader["+bucketName+"],data_writer["+bucketName+"]")); err != nil {
		t.Fatal(err)
	}
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusAccessError)
	c.set(memd.CmdSet, "k", "v", 0, 0, 0, memd.StatusAccessError)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusAccessError)
}
