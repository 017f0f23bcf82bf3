package auth

import (
	"context"
	"errors"
	"testing"
)

// recordOf is user id as another node would make it (its own store's
// hashing): the record a cluster node receives from the cluster's state.
func recordOf(t *testing.T, other *Store, id, password, roles string) User {
	t.Helper()
	rs, err := ParseRoles(roles)
	if err != nil {
		t.Fatal(err)
	}
	c, err := other.PrepareUser(id, "", password, rs)
	if err != nil {
		t.Fatal(err)
	}
	u, err := c.Apply(nil)
	if err != nil {
		t.Fatal(err)
	}
	return *u
}

// TestReplaceUsersAppliesAnotherNodesRecords: the users a cluster node
// applies from the cluster's state (hashed by another node) replace the
// node's own: a user added logs in with its password, a user removed and a
// password changed stop working at once, even for a login the node had
// cached, roles changed apply, the node's built-in administrator is kept
// whatever the records say, Generation moves only when something changed,
// and the result is what users.json holds after a restart.
func TestReplaceUsersAppliesAnotherNodesRecords(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := &Options{AdminUser: "Administrator", AdminPassword: "password", Argon2: cheap}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Open(t.TempDir(), &Options{AdminUser: "root", AdminPassword: "rootpass", Argon2: cheap})
	if err != nil {
		t.Fatal(err)
	}
	mustRoles := func(roles string) []Role {
		rs, err := ParseRoles(roles)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	if err := s.PutUser("ann", "", "ann-password", mustRoles("data_reader[travel]")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutUser("bo", "", "bo-password", mustRoles("data_reader[*]")); err != nil {
		t.Fatal(err)
	}
	for _, u := range [][2]string{{"ann", "ann-password"}, {"bo", "bo-password"}} {
		if _, err := s.Authenticate(ctx, u[0], u[1], ""); err != nil { // cached from here on
			t.Fatalf("%s before: %v", u[0], err)
		}
	}
	// The cluster's state: ann with a new password and a role more, bo
	// gone, cy new, and a record named as this node's administrator.
	recs := []User{
		recordOf(t, other, "ann", "ann-new-password", "data_reader[travel],data_writer[travel]"),
		recordOf(t, other, "cy", "cy-password", "admin"),
		recordOf(t, other, "Administrator", "not-the-admins", "data_reader[travel]"),
	}
	gen := s.Generation()
	changed := s.Changed()
	ok, err := s.ReplaceUsers(recs)
	if err != nil || !ok {
		t.Fatalf("ReplaceUsers: %v, %v; want true, nil", ok, err)
	}
	if s.Generation() == gen {
		t.Error("the users changed but Generation did not move (open KV connections would keep the old roles)")
	}
	select {
	case <-changed:
	default:
		t.Error("the users changed but Changed's channel was not closed (streams would keep the old roles)")
	}
	check := func(s *Store, when string) {
		t.Helper()
		if _, err := s.Authenticate(ctx, "ann", "ann-password", ""); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("%s: ann's old password (cached before) answers %v; want ErrBadCredentials", when, err)
		}
		p, err := s.Authenticate(ctx, "ann", "ann-new-password", "")
		if err != nil || !p.Allows(Permission{DataWrite, "travel"}) {
			t.Errorf("%s: ann's new password: %v, %+v; want a writer of travel", when, err, p)
		}
		if _, err := s.Authenticate(ctx, "bo", "bo-password", ""); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("%s: bo, removed, (cached before) answers %v; want ErrBadCredentials", when, err)
		}
		if p, err := s.Authenticate(ctx, "cy", "cy-password", ""); err != nil || !p.Allows(Permission{BucketsCreate, ""}) {
			t.Errorf("%s: cy: %v, %+v; want an administrator", when, err, p)
		}
		if p, err := s.Authenticate(ctx, "Administrator", "password", ""); err != nil || !p.Allows(Permission{BucketsCreate, ""}) {
			t.Errorf("%s: this node's administrator: %v, %+v; want it kept", when, err, p)
		}
		if _, err := s.Authenticate(ctx, "Administrator", "not-the-admins", ""); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("%s: the record named as the administrator took its place: %v", when, err)
		}
		var ids []string
		for _, u := range s.Users() {
			ids = append(ids, u.ID)
		}
		if len(ids) != 2 || ids[0] != "ann" || ids[1] != "cy" {
			t.Errorf("%s: users %v; want [ann cy]", when, ids)
		}
	}
	check(s, "applied")

	// The same records again change nothing.
	gen = s.Generation()
	if ok, err := s.ReplaceUsers(recs); err != nil || ok {
		t.Errorf("the same records again: %v, %v; want false, nil", ok, err)
	}
	if s.Generation() != gen {
		t.Error("nothing changed but Generation moved")
	}

	again, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	check(again, "after a restart")

	// A record whose roles do not parse is left out and reported; the
	// others still apply.
	bad := recordOf(t, other, "dee", "dee-password", "data_reader[travel]")
	bad.Roles = []string{"no_such_role"}
	ok, err = s.ReplaceUsers([]User{recs[0], bad})
	if err == nil || !ok {
		t.Errorf("a bad record: %v, %v; want true and an error naming it", ok, err)
	}
	if _, err := s.User("dee"); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("the bad record was stored: %v", err)
	}
	if _, err := s.User("cy"); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("cy, not in the records, is still there: %v", err)
	}
}

// TestUserChangeKeepsThePasswordItDoesNotSet: a change without a password
// keeps the credentials of the user it applies to (a role change made on
// one node keeps the password another node hashed), and a new user
// without one is refused.
func TestUserChangeKeepsThePasswordItDoesNotSet(t *testing.T) {
	s, err := Open(t.TempDir(), &Options{Argon2: cheap})
	if err != nil {
		t.Fatal(err)
	}
	cur := recordOf(t, s, "ann", "ann-password", "data_reader[travel]")
	rs, _ := ParseRoles("data_writer[travel]")
	c, err := s.PrepareUser("ann", "Ann", "", rs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(nil); !errors.Is(err, ErrInvalidUser) {
		t.Errorf("a new user without a password: %v; want ErrInvalidUser", err)
	}
	u, err := c.Apply(&cur)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReplaceUsers([]User{*u}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Authenticate(context.Background(), "ann", "ann-password", "")
	if err != nil || !p.Allows(Permission{DataWrite, "travel"}) || p.Allows(Permission{DataRead, "beer"}) {
		t.Errorf("ann after a role change: %v, %+v; want the old password and the new role", err, p)
	}
	if len(cur.Roles) != 1 || cur.Roles[0] != "data_reader[travel]" {
		t.Errorf("Apply changed the record it applied to: %v", cur.Roles)
	}
}

// TestAwaitUsersHoldsEveryLoginOfAStoredUser: from AwaitUsers until the
// next ReplaceUsers (a cluster node's first apply of the cluster's users,
// its users.json perhaps stale), a stored user is refused by every way in
// (a password, a SCRAM exchange, a lookup of a connection's user) with
// ErrUsersPending, nothing checked nor counted as a failure; the
// administrator is not. A ReplaceUsers that changes nothing ends the
// wait as well as one that does; one that fails (users.json not written)
// does not.
func TestAwaitUsersHoldsEveryLoginOfAStoredUser(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), &Options{AdminUser: "Administrator", AdminPassword: "password", Argon2: cheap})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ParseRoles("data_reader[*]")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutUser("ann", "", "ann-password", rs); err != nil {
		t.Fatal(err)
	}
	s.AwaitUsers()
	held := func(when string) {
		t.Helper()
		for range 12 { // past the throttle's failures for a name, were they counted
			if _, err := s.Authenticate(ctx, "ann", "ann-password", "10.0.0.1"); !errors.Is(err, ErrUsersPending) {
				t.Fatalf("%s: ann's password: %v; want ErrUsersPending", when, err)
			}
		}
		if _, ok := s.ScramCredential("ann", CredScramSHA512); ok {
			t.Errorf("%s: ann's SCRAM credential is shown", when)
		}
		if _, _, err := s.VerifyScram("ann", CredScramSHA512, "10.0.0.1", []byte("msg"), make([]byte, 64)); !errors.Is(err, ErrUsersPending) {
			t.Errorf("%s: ann's SCRAM proof: %v; want ErrUsersPending", when, err)
		}
		if _, err := s.Lookup("ann"); !errors.Is(err, ErrUsersPending) {
			t.Errorf("%s: looking ann up: %v; want ErrUsersPending", when, err)
		}
		if _, err := s.Authenticate(ctx, "Administrator", "password", "10.0.0.1"); err != nil {
			t.Errorf("%s: the administrator: %v", when, err)
		}
	}
	held("awaiting")
	records := s.Records()
	good := s.path
	s.path = "/nonexistent-dir/users.json" // the apply cannot write users.json
	if _, err := s.ReplaceUsers(nil); err == nil {
		t.Fatal("ReplaceUsers wrote a file in a directory that does not exist")
	}
	s.path = good
	held("after a failed apply")
	if changed, err := s.ReplaceUsers(records); err != nil || changed {
		t.Fatalf("ReplaceUsers with the same users: %v, %v", changed, err)
	}
	if _, err := s.Authenticate(ctx, "ann", "ann-password", "10.0.0.1"); err != nil {
		t.Errorf("ann once the users are applied: %v", err)
	}
}
