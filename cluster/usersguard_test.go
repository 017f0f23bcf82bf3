package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
)

// TestNoUserTakesANodesAdministratorName: on a cluster whose nodes have
// administrators of different names (--admin-user), no user of the
// cluster may be named as any node's administrator: not created through
// another node (it would be every node's user, shadowing that
// administrator on the others and colliding with it on its own), nor
// written in from another node's users.json at its start. A user that
// predates the name (the node started later) is left out by that node,
// whose administrator stays. A node started again with another
// administrator frees the old name. Before, only the node's own
// administrator's name was refused, by the node asked.
func TestNoUserTakesANodesAdministratorName(t *testing.T) {
	ctx, cli := oneNode(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// Node b's administrator is root.
	dirB := t.TempDir()
	b := openUsers(t, dirB, "root")
	syncB := StartUserSync(cli, b, "b", quiet)
	if err := syncB.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// Node a's users.json holds a root of its own (its administrator is
	// Administrator), from before it joined.
	a := openUsers(t, t.TempDir(), "Administrator")
	if err := a.PutUser("root", "", "a-root-pass", mustRoles(t, "admin")); err != nil {
		t.Fatal(err)
	}
	syncA := StartUserSync(cli, a, "a", quiet)
	defer syncA.Close()
	if err := syncA.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, u := range clusterUsers(ctx, t, cli) {
		if u.ID == "root" {
			t.Errorf("a's root was written to the cluster's users, named as b's administrator")
		}
	}
	if slices.Contains(ids(a), "root") {
		t.Errorf("a's users %v hold root, named as b's administrator", ids(a))
	}
	err := syncA.PutUser(ctx, "root", "", "another-pass", mustRoles(t, "admin"))
	if !errors.Is(err, auth.ErrInvalidUser) {
		t.Errorf("creating root, b's administrator, through a: %v; want auth.ErrInvalidUser", err)
	}
	if err := login(b, "root", "root-pass"); err != nil {
		t.Errorf("b's administrator: %v", err)
	}

	// cy is a user of the cluster before node c, whose administrator is
	// cy, starts: c leaves it out, and its administrator stays.
	if err := syncA.PutUser(ctx, "cy", "", "cy-user-pass", mustRoles(t, "ro_admin")); err != nil {
		t.Fatal(err)
	}
	c := openUsers(t, t.TempDir(), "cy")
	syncC := StartUserSync(cli, c, "c", quiet)
	defer syncC.Close()
	if err := syncC.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := c.Authenticate(ctx, "cy", "cy-pass", "")
	if err != nil || !p.Allows(auth.Permission{Action: auth.SecurityWrite}) {
		t.Errorf("c's administrator with the cluster's user cy: %v, %+v; want the administrator", err, p)
	}
	if err := login(c, "cy", "cy-user-pass"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Errorf("the user cy on c: %v; want refused (c's cy is its administrator)", err)
	}
	// It can be deleted, not created again.
	if err := syncA.DeleteUser(ctx, "cy"); err != nil {
		t.Errorf("deleting the user cy: %v", err)
	}
	if err := syncA.PutUser(ctx, "cy", "", "cy-user-pass", mustRoles(t, "ro_admin")); !errors.Is(err, auth.ErrInvalidUser) {
		t.Errorf("creating cy, c's administrator, again: %v; want auth.ErrInvalidUser", err)
	}

	// b starts again with another administrator: root is free.
	syncB.Close()
	b = openUsers(t, dirB, "admin2")
	syncB = StartUserSync(cli, b, "b", quiet)
	defer syncB.Close()
	if err := syncB.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := syncA.PutUser(ctx, "root", "", "root-user-pass", mustRoles(t, "ro_admin")); err != nil {
		t.Errorf("creating root once b's administrator is named otherwise: %v", err)
	}
}

// TestUserRolesNeedTheClusterBuckets: a user's role on a bucket is taken
// when the cluster defines the bucket, whichever node's copy exists yet,
// and refused when it does not (never defined, or deleted); a bucket's
// deletion and a role given on it do not both win. Before, the cluster's
// users took any bucket name, and the node asked checked its own copies.
func TestUserRolesNeedTheClusterBuckets(t *testing.T) {
	ctx, cli := oneNode(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := openUsers(t, t.TempDir(), "Administrator")
	syncA := StartUserSync(cli, a, "a", quiet)
	defer syncA.Close()
	if err := syncA.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	err := syncA.PutUser(ctx, "ann", "", "ann-pass", mustRoles(t, "data_reader[travel],views_reader[*]"))
	if !errors.Is(err, auth.ErrInvalidRole) || !strings.Contains(err.Error(), "data_reader[travel]") || strings.Contains(err.Error(), "views_reader") {
		t.Errorf("a role on travel, not defined: %v; want auth.ErrInvalidRole naming data_reader[travel] alone", err)
	}
	if slices.Contains(ids(a), "ann") {
		t.Error("ann was stored though refused")
	}
	if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.BucketSettings{Name: "travel", Type: engine.Couchbase, UUID: "t1"}}); err != nil {
		t.Fatal(err)
	}
	if err := syncA.PutUser(ctx, "ann", "", "ann-pass", mustRoles(t, "data_reader[travel],views_reader[*]")); err != nil {
		t.Errorf("a role on travel once the cluster defines it: %v", err)
	}
	if ok, err := DeleteBucket(ctx, cli, "travel", "t1"); !ok || err != nil {
		t.Fatalf("DeleteBucket: %v, %v", ok, err)
	}
	if err := syncA.PutUser(ctx, "bo", "", "bo-pass", mustRoles(t, "data_reader[travel]")); !errors.Is(err, auth.ErrInvalidRole) {
		t.Errorf("a role on travel once deleted: %v; want auth.ErrInvalidRole", err)
	}

	// Deletions of a bucket racing roles given on it: whichever comes
	// first, no user is left with a role on the deleted bucket.
	for i := range 5 {
		uuid := "r" + string(rune('0'+i))
		if err := DefineBucket(ctx, cli, BucketDef{BucketSettings: engine.BucketSettings{Name: "race", Type: engine.Couchbase, UUID: uuid}}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if ok, err := DeleteBucket(ctx, cli, "race", uuid); !ok || err != nil {
				t.Errorf("DeleteBucket race %s: %v, %v", uuid, ok, err)
			}
		})
		wg.Go(func() {
			err := syncA.PutUser(ctx, "cy", "", "cy-pass", mustRoles(t, "data_reader[race]"))
			if err != nil && !errors.Is(err, auth.ErrInvalidRole) {
				t.Errorf("a role on race while it is deleted: %v", err)
			}
		})
		wg.Wait()
		for _, u := range clusterUsers(ctx, t, cli) {
			if slices.Contains(u.Roles, "data_reader[race]") {
				t.Fatalf("after race %s's deletion, %s holds %v", uuid, u.ID, u.Roles)
			}
		}
	}
}

// TestStaleUsersFileLogsNoUserInBeforeTheClusterUsers: a node restarted
// with the users.json it had when it stopped, while the cluster deleted
// one of them and changed another's password, does not let the deleted
// user in, nor refuse the new password as wrong, before it has applied
// the cluster's users: it answers a temporary failure
// (auth.ErrUsersPending) for them, for as long as etcd has no quorum;
// its administrator logs in meanwhile. Once the quorum is back and the
// users applied, they are the cluster's. Before, the stale file was used
// until the first apply.
func TestStaleUsersFileLogsNoUserInBeforeTheClusterUsers(t *testing.T) {
	t.Parallel() // it mostly waits for etcd's members
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes, cfgs, _ := startCluster(t, ctx, 3)
	defer func() { closeAll(nodes) }()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	dirB := t.TempDir()
	b := openUsers(t, dirB, "root")
	syncB := StartUserSync(nodes[2].Client(), b, "n3", quiet)
	for _, u := range [][2]string{{"bo", "bo-pass"}, {"cy", "cy-old-pass"}} {
		if err := syncB.PutUser(ctx, u[0], "", u[1], mustRoles(t, "ro_admin")); err != nil {
			t.Fatal(err)
		}
	}
	syncB.Close() // b stops

	a := openUsers(t, t.TempDir(), "root")
	syncA := StartUserSync(nodes[0].Client(), a, "n1", quiet)
	if err := syncA.DeleteUser(ctx, "bo"); err != nil {
		t.Fatal(err)
	}
	if err := syncA.PutUser(ctx, "cy", "", "cy-new-pass", mustRoles(t, "ro_admin")); err != nil {
		t.Fatal(err)
	}
	syncA.Close()
	// n1 and n2 stop: no quorum.
	for _, i := range []int{0, 1} {
		if err := nodes[i].stop(false); err != nil {
			t.Log(err)
		}
		nodes[i] = nil
	}

	// b starts again, its users.json as it was.
	b = openUsers(t, dirB, "root")
	if err := login(b, "bo", "bo-pass"); err != nil {
		t.Fatalf("b's users.json: bo %v; want there (the test's premise)", err)
	}
	syncB = StartUserSync(nodes[2].Client(), b, "n3", quiet)
	defer syncB.Close()
	for _, c := range []struct{ user, password string }{{"bo", "bo-pass"}, {"cy", "cy-new-pass"}, {"cy", "cy-old-pass"}} {
		if err := login(b, c.user, c.password); !errors.Is(err, auth.ErrUsersPending) {
			t.Errorf("%s with %s before b applied the cluster's users (no quorum): %v; want auth.ErrUsersPending", c.user, c.password, err)
		}
	}
	if err := login(b, "root", "root-pass"); err != nil {
		t.Errorf("b's administrator before b applied the cluster's users: %v", err)
	}

	// The quorum is back.
	var wg sync.WaitGroup
	for _, i := range []int{0, 1} {
		wg.Go(func() {
			n, err := Start(ctx, cfgs[i])
			if err != nil {
				t.Errorf("restarting %s: %v", cfgs[i].Node, err)
				return
			}
			nodes[i] = n
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	eventually(t, "b applies the cluster's users", func() (bool, string) {
		return syncB.Version() > 0, "not yet"
	})
	if err := login(b, "bo", "bo-pass"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Errorf("bo, deleted, once b applied the cluster's users: %v; want refused", err)
	}
	if err := login(b, "cy", "cy-new-pass"); err != nil {
		t.Errorf("cy with its new password once b applied the cluster's users: %v", err)
	}
	if err := login(b, "cy", "cy-old-pass"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Errorf("cy with its old password once b applied the cluster's users: %v; want refused", err)
	}
}
