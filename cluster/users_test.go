package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// cheapArgon2 keeps the tests' password hashing quick.
var cheapArgon2 = &auth.Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}

// openUsers opens a node's user store in dir, with administrator admin.
func openUsers(t *testing.T, dir, admin string) *auth.Store {
	t.Helper()
	s, err := auth.Open(dir, &auth.Options{AdminUser: admin, AdminPassword: admin + "-pass", Argon2: cheapArgon2})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustRoles(t *testing.T, roles string) []auth.Role {
	t.Helper()
	rs, err := auth.ParseRoles(roles)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// ids lists a store's users.
func ids(s *auth.Store) []string {
	var out []string
	for _, u := range s.Users() {
		out = append(out, u.ID)
	}
	return out
}

// login reports whether user id logs in to s with password.
func login(s *auth.Store, id, password string) error {
	_, err := s.Authenticate(context.Background(), id, password, "")
	return err
}

// TestUserSyncSharesUsersAndKeepsDeletionsDeleted: two nodes' user stores
// kept by UserSyncs on one cluster. Each node's own users are written in
// where the cluster has none of theirs (an upgrade keeps them), a user the
// cluster has already is the cluster's version on both, a user deleted
// from the cluster while a node was down is not brought back by that
// node's copy, a change made through one node is on the other once it
// reached that node's Version, and each node's administrator stays its
// own.
func TestUserSyncSharesUsersAndKeepsDeletionsDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := startAll(t, ctx, []Config{testConfig(t, testPeers(t, 1), "n1", t.TempDir(), &syncLog{})})
	defer closeAll(nodes)
	cli := nodes[0].Client()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// The cluster deleted cy before node b joins with its own cy.
	other := openUsers(t, t.TempDir(), "x")
	c, err := other.PrepareUser("cy", "", "cy-cluster", mustRoles(t, "admin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PutUser(ctx, cli, c); err != nil {
		t.Fatal(err)
	}
	if _, err := DeleteUser(ctx, cli, "cy"); err != nil {
		t.Fatal(err)
	}
	if _, err := DeleteUser(ctx, cli, "cy"); !errors.Is(err, auth.ErrUserNotFound) {
		t.Errorf("deleting a deleted user: %v; want auth.ErrUserNotFound", err)
	}

	dirA, dirB := t.TempDir(), t.TempDir()
	a := openUsers(t, dirA, "Administrator")
	for _, u := range [][2]string{{"ann", "ann-a-pass"}, {"bo", "bo-a-pass"}} {
		if err := a.PutUser(u[0], "", u[1], mustRoles(t, "data_reader[travel]")); err != nil {
			t.Fatal(err)
		}
	}
	b := openUsers(t, dirB, "root")
	if err := b.PutUser("bo", "", "bo-b-pass", mustRoles(t, "admin")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutUser("cy", "", "cy-b-pass", mustRoles(t, "admin")); err != nil {
		t.Fatal(err)
	}

	// travel, on which the users below are given roles through the
	// cluster.
	if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.BucketSettings{Name: "travel", Type: engine.Couchbase, UUID: "t1"}}); err != nil {
		t.Fatal(err)
	}
	syncA := StartUserSync(cli, a, "a", quiet)
	defer syncA.Close()
	if err := syncA.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	syncB := StartUserSync(cli, b, "b", quiet)
	if err := syncB.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*auth.Store{a, b} {
		if got := ids(s); !slices.Equal(got, []string{"ann", "bo"}) {
			t.Errorf("users %v; want [ann bo] (a's seeded, cy deleted by the cluster)", got)
		}
		if err := login(s, "bo", "bo-a-pass"); err != nil {
			t.Errorf("bo with a's password (written first): %v", err)
		}
		if err := login(s, "bo", "bo-b-pass"); !errors.Is(err, auth.ErrBadCredentials) {
			t.Errorf("bo with b's own password: %v; want refused (the cluster's bo is a's)", err)
		}
		if err := login(s, "cy", "cy-b-pass"); !errors.Is(err, auth.ErrBadCredentials) {
			t.Errorf("cy, deleted by the cluster: %v; want refused", err)
		}
	}
	if err := login(b, "root", "root-pass"); err != nil {
		t.Errorf("b's administrator: %v", err)
	}
	if err := login(a, "root", "root-pass"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Errorf("b's administrator on a: %v; want refused (each node's is its own)", err)
	}

	// A role change through b keeps the password a hashed, on a too.
	if err := syncB.PutUser(ctx, "ann", "Ann", "", mustRoles(t, "data_writer[travel]")); err != nil {
		t.Fatal(err)
	}
	if err := syncA.WaitVersion(ctx, syncB.Version()); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*auth.Store{a, b} {
		p, err := s.Authenticate(ctx, "ann", "ann-a-pass", "")
		if err != nil || !p.Allows(auth.Permission{Action: auth.DataWrite, Bucket: "travel"}) {
			t.Errorf("ann after the role change through b: %v, %+v", err, p)
		}
	}

	// b goes down; bo is deleted; b comes back with bo in its users.json.
	syncB.Close()
	if err := syncA.DeleteUser(ctx, "bo"); err != nil {
		t.Fatal(err)
	}
	if err := login(a, "bo", "bo-a-pass"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Errorf("bo on a once DeleteUser returned: %v; want refused", err)
	}
	b = openUsers(t, dirB, "root")
	if err := login(b, "bo", "bo-a-pass"); err != nil {
		t.Fatalf("b's users.json before it is back: bo %v; want there (the test's premise)", err)
	}
	syncB = StartUserSync(cli, b, "b", quiet)
	defer syncB.Close()
	if err := syncB.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ids(b); !slices.Equal(got, []string{"ann"}) {
		t.Errorf("b back: users %v; want [ann] (bo stays deleted)", got)
	}
	if err := syncA.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ids(a); !slices.Equal(got, []string{"ann"}) {
		t.Errorf("a once b is back: users %v; want [ann]", got)
	}
}

// TestDeleteBucketTakesItsRolesFromTheClusterUsers: deleting a bucket from
// the cluster takes the roles on it from the cluster's users in the same
// write (once, not by each node), leaving roles on other buckets and on
// every bucket.
func TestDeleteBucketTakesItsRolesFromTheClusterUsers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := startAll(t, ctx, []Config{testConfig(t, testPeers(t, 1), "n1", t.TempDir(), &syncLog{})})
	defer closeAll(nodes)
	cli := nodes[0].Client()
	s := openUsers(t, t.TempDir(), "Administrator")
	put := func(id, roles string) {
		t.Helper()
		c, err := s.PrepareUser(id, "", id+"-pass", mustRoles(t, roles))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := PutUser(ctx, cli, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range [][2]string{{"travel", "u1"}, {"beer", "u2"}} {
		if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.BucketSettings{Name: b[0], Type: engine.Couchbase, UUID: b[1]}}); err != nil {
			t.Fatal(err)
		}
	}
	put("ann", "data_reader[travel],data_writer[beer]")
	put("bo", "bucket_admin[*]")
	put("cy", "data_reader[travel]")
	if _, err := DeleteUser(ctx, cli, "cy"); err != nil {
		t.Fatal(err)
	}
	if ok, err := DeleteBucket(ctx, cli, "travel", "u1"); !ok || err != nil {
		t.Fatalf("DeleteBucket: %v, %v", ok, err)
	}
	users := clusterUsers(ctx, t, cli)
	roles := map[string][]string{}
	for _, u := range users {
		roles[u.ID] = u.Roles
	}
	if len(roles) != 2 || !slices.Equal(roles["ann"], []string{"data_writer[beer]"}) || !slices.Equal(roles["bo"], []string{"bucket_admin[*]"}) {
		t.Errorf("the cluster's users after travel's deletion: %v; want ann [data_writer[beer]], bo [bucket_admin[*]]", roles)
	}
}

// clusterUsers reads the users the cluster's state holds now, as a node
// applies them (LiveUsers: tombstones left out).
func clusterUsers(ctx context.Context, t *testing.T, cli *clientv3.Client) []auth.User {
	t.Helper()
	resp, err := cli.Get(ctx, defKey(Users, UserDomain, ""), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var defs []Def
	for _, kv := range resp.Kvs {
		d, _ := NewDefMirror(cli, Users).def(kv.Key, kv.Value, kv.ModRevision)
		defs = append(defs, d)
	}
	users, _, err := LiveUsers(defs)
	if err != nil {
		t.Fatal(err)
	}
	return users
}
