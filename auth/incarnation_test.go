package auth

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A principal refreshed after the users changed (Store.Refresh, as a KV
// connection or a stream does) follows its user's password and role
// changes, but a user deleted and created again under the same name is
// another user: the old principal gets ErrUserNotFound, also on another
// node that applied the cluster's records (ReplaceUsers), and a user
// stored before incarnations were recorded keeps working. (A review found
// the lookup was by name only, so the old login went on as the new user.)
func TestRefreshTellsAUserCreatedAgainFromTheOneLoggedIn(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, &Options{Argon2: cheap})
	if err != nil {
		t.Fatal(err)
	}
	reader, _ := ParseRoles("data_reader[b]")
	both, _ := ParseRoles("data_reader[b],data_writer[b]")
	if err := s.PutUser("u", "", "first-pass", reader); err != nil {
		t.Fatal(err)
	}
	p, err := s.Authenticate(ctx, "u", "first-pass", "")
	if err != nil {
		t.Fatal(err)
	}
	// A role change and a password change keep the user.
	if err := s.PutUser("u", "", "", both); err != nil {
		t.Fatal(err)
	}
	if err := s.PutUser("u", "", "second-pass", both); err != nil {
		t.Fatal(err)
	}
	cur, err := s.Refresh(p)
	if err != nil || !cur.Allows(Permission{DataWrite, "b"}) {
		t.Fatalf("refresh after role and password changes: %v %+v", err, cur)
	}
	// Another node, given this node's records, refreshes it alike.
	other, err := Open(t.TempDir(), &Options{Argon2: cheap})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ReplaceUsers(s.Records()); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Refresh(p); err != nil {
		t.Fatalf("refresh on another node: %v", err)
	}
	// Deleted and created again: not the principal's user.
	if err := s.DeleteUser("u"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutUser("u", "", "third-pass", both); err != nil {
		t.Fatal(err)
	}
	if cur, err := s.Refresh(p); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("refresh after delete and create: %v %+v, want ErrUserNotFound", err, cur)
	}
	if _, err := other.ReplaceUsers(s.Records()); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Refresh(p); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("refresh on another node after delete and create: %v, want ErrUserNotFound", err)
	}
	p3, err := s.Authenticate(ctx, "u", "third-pass", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Refresh(p3); err != nil {
		t.Fatalf("the new user's own login: %v", err)
	}

	// A users.json written before incarnations were recorded.
	old := t.TempDir()
	rec := s.Records()[0]
	rec.Incarnation = ""
	st, err := Open(old, &Options{Argon2: cheap})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReplaceUsers([]User{rec}); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(old, FileName)); err != nil || bytes.Contains(data, []byte("incarnation")) {
		t.Fatalf("users.json of a user without an incarnation: %v %s", err, data)
	}
	st, err = Open(old, &Options{Argon2: cheap})
	if err != nil {
		t.Fatal(err)
	}
	po, err := st.Authenticate(ctx, "u", "third-pass", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutUser("u", "", "", reader); err != nil {
		t.Fatal(err)
	}
	if cur, err := st.Refresh(po); err != nil || cur.Allows(Permission{DataWrite, "b"}) {
		t.Fatalf("an old user's refresh after a role change: %v %+v", err, cur)
	}
}
