package cluster

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
)

// TestDeleteBucketWithManyUsersOnIt: a bucket on which many users hold a
// role (an application user each, say) can be deleted, and the roles
// leave every one of them. Before, the roles were taken in the deletion's
// own etcd transaction, one write per user, and etcd refuses a
// transaction of over 128 operations: past about 120 such users the
// bucket could not be deleted at all ("too many operations in txn
// request"), however often it was tried.
func TestDeleteBucketWithManyUsersOnIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := startAll(t, ctx, []Config{testConfig(t, testPeers(t, 1), "n1", t.TempDir(), &syncLog{})})
	defer closeAll(nodes)
	cli := nodes[0].Client()
	s, err := auth.Open(t.TempDir(), &auth.Options{Argon2: cheapArgon2, ScramIterations: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][2]string{{"travel", "u1"}, {"beer", "u2"}} {
		if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.BucketSettings{Name: b[0], Type: engine.Couchbase, UUID: b[1]}}); err != nil {
			t.Fatal(err)
		}
	}
	const users = 300
	for i := range users {
		c, err := s.PrepareUser("app"+strconv.Itoa(i), "", "app-pass-"+strconv.Itoa(i), mustRoles(t, "data_reader[travel],data_writer[beer]"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := PutUser(ctx, cli, c); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := DeleteBucket(ctx, cli, "travel", "u1"); !ok || err != nil {
		t.Fatalf("DeleteBucket with %d users holding a role on it: %v, %v", users, ok, err)
	}
	live := clusterUsers(ctx, t, cli)
	if len(live) != users {
		t.Fatalf("%d users after the deletion; want %d", len(live), users)
	}
	for _, u := range live {
		if !slices.Equal(u.Roles, []string{"data_writer[beer]"}) {
			t.Fatalf("user %s after travel's deletion: roles %v; want [data_writer[beer]]", u.ID, u.Roles)
		}
	}
}
