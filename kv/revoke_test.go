package kv_test

import (
	"context"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

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
