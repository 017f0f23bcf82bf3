package auth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var cheap = &Argon2Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 32}

func TestParseRoles(t *testing.T) {
	roles, err := ParseRoles("data_reader[travel], admin,views_admin[*],data_reader[travel]")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range roles {
		got = append(got, r.String())
	}
	if strings.Join(got, ",") != "admin,data_reader[travel],views_admin[*]" {
		t.Fatalf("roles: %v", got)
	}
	for _, bad := range []string{"root", "data_reader", "admin[x]", "data_reader[", "data_reader[]", "data_reader[a]b"} {
		if _, err := ParseRoles(bad); !errors.Is(err, ErrInvalidRole) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestPermissions(t *testing.T) {
	p := func(roles string) *Principal {
		rs, err := ParseRoles(roles)
		if err != nil {
			t.Fatal(err)
		}
		return &Principal{Name: "u", Roles: rs}
	}
	for _, c := range []struct {
		roles string
		perm  Permission
		want  bool
	}{
		{"admin", Permission{BucketsCreate, ""}, true},
		{"ro_admin", Permission{MetricsRead, ""}, true},
		{"ro_admin", Permission{DataRead, "a"}, false},
		{"ro_admin", Permission{SettingsWrite, "a"}, false},
		{"data_reader[a]", Permission{DataRead, "a"}, true},
		{"data_reader[a]", Permission{DataRead, "b"}, false},
		{"data_reader[a]", Permission{DataWrite, "a"}, false},
		{"data_reader[a]", Permission{StatsRead, "a"}, true},
		{"data_reader[a]", Permission{StatsRead, "b"}, false},
		{"data_writer[*]", Permission{DataWrite, "zz"}, true},
		{"data_writer[*]", Permission{DataRead, "zz"}, false},
		{"views_reader[a]", Permission{ViewsWrite, "a"}, false},
		{"views_admin[a]", Permission{ViewsWrite, "a"}, true},
		{"bucket_admin[a]", Permission{SettingsWrite, "a"}, true},
		{"bucket_admin[a]", Permission{BucketDelete, "a"}, false},
		{"bucket_admin[a]", Permission{SecurityRead, ""}, false},
		{"bucket_admin[*]", Permission{MetricsRead, ""}, false},
	} {
		if got := p(c.roles).Allows(c.perm); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.roles, c.perm, got, c.want)
		}
	}
}

func TestStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, &Options{AdminUser: "Administrator", AdminPassword: "password", Argon2: cheap})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.Authenticate(context.Background(), "Administrator", "password", ""); err != nil || !p.Allows(Permission{SecurityWrite, ""}) {
		t.Fatalf("admin: %v %v", p, err)
	}
	for _, c := range [][2]string{{"Administrator", "wrong"}, {"Administrator", ""}, {"nobody", "password"}} {
		if _, err := s.Authenticate(context.Background(), c[0], c[1], ""); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("%v: %v", c, err)
		}
	}
	roles, _ := ParseRoles("data_reader[default]")
	if err := s.PutUser("alice", "Alice", "secret1", roles); err != nil {
		t.Fatal(err)
	}
	if err := s.PutUser("Administrator", "", "whatever", roles); !errors.Is(err, ErrInvalidUser) {
		t.Fatalf("overwriting the administrator: %v", err)
	}
	if err := s.PutUser("bob", "", "", roles); !errors.Is(err, ErrInvalidUser) {
		t.Fatalf("new user without a password: %v", err)
	}
	st, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("users.json: %v %v", st, err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, FileName))
	if strings.Contains(string(data), "secret1") || strings.Contains(string(data), "Administrator") || !strings.Contains(string(data), `"argon2id"`) {
		t.Fatalf("users.json holds %s", data)
	}
	// A restart sees alice; the cache does not outlive a password change.
	s2, err := Open(dir, &Options{Argon2: cheap})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if p, err := s2.Authenticate(context.Background(), "alice", "secret1", ""); err != nil || !p.Allows(Permission{DataRead, "default"}) || p.Allows(Permission{DataWrite, "default"}) {
			t.Fatalf("alice: %v %v", p, err)
		}
	}
	if err := s2.PutUser("alice", "Alice", "secret2", roles); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Authenticate(context.Background(), "alice", "secret1", ""); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("old password after a change: %v", err)
	}
	// An update without a password keeps it, and its change date.
	changed, err := s2.User("alice")
	if err != nil || changed.PasswordChanged.IsZero() {
		t.Fatalf("password change date after a set: %+v %v", changed, err)
	}
	if err := s2.PutUser("alice", "A.", "", nil); err != nil {
		t.Fatal(err)
	}
	if u, err := s2.User("alice"); err != nil || !u.PasswordChanged.Equal(changed.PasswordChanged) {
		t.Fatalf("password change date after an update without one: %+v %v", u, err)
	}
	if _, err := s2.Authenticate(context.Background(), "alice", "secret2", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Authenticate(context.Background(), "Administrator", "password", ""); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("no admin configured, yet: %v", err)
	}
	if err := s2.DeleteUser("alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Authenticate(context.Background(), "alice", "secret2", ""); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("deleted user: %v", err)
	}
	if err := s2.DeleteUser("alice"); !errors.Is(err, ErrUserNotFound) {
		t.Fatal(err)
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "*.tmp*")); len(matches) != 0 {
		t.Fatalf("temporary files left: %v", matches)
	}
}

// ParsePermission reads back every permission String writes, and refuses
// anything else.
func TestParsePermission(t *testing.T) {
	for a := PoolsRead; (Permission{Action: a}).String() != "unknown"; a++ {
		p := Permission{Action: a}
		if strings.HasPrefix(p.String(), "cluster.bucket[") {
			p.Bucket = "travel-sample"
		}
		got, err := ParsePermission(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePermission(%q) = %+v, %v; want %+v", p.String(), got, err, p)
		}
	}
	for _, bad := range []string{"", "cluster.bucket[].data.docs!read", "cluster.bucket[b].data.docs!eat", "cluster.bucket[b", "cluster.bucket[a[b]].views!read", "cluster.buckets!delete", "unknown", "cluster.bucket[b]unknown"} {
		if _, err := ParsePermission(bad); !errors.Is(err, ErrInvalidPermission) {
			t.Errorf("ParsePermission(%q): %v, want ErrInvalidPermission", bad, err)
		}
	}
}

// Every role the catalog lists parses, on a bucket where it takes one, and
// every role ParseRole accepts is in the catalog.
func TestRolesCatalog(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range Roles() {
		s := d.Role
		if d.TakesBucket {
			s += "[*]"
		}
		if _, err := ParseRole(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
		if d.DisplayName == "" || d.Description == "" {
			t.Errorf("%s: no name or description", d.Role)
		}
		seen[d.Role] = true
	}
	for name := range bucketRoles {
		if !seen[name] {
			t.Errorf("%s is missing from Roles()", name)
		}
	}
	if !seen[RoleAdmin] || !seen[RoleROAdmin] {
		t.Error("admin or ro_admin missing from Roles()")
	}
}

// A users.json of a newer format is refused at open, naming what to do: read
// in part, its users would be rewritten in this format at the next change,
// losing what this version cannot read.
func TestOpenRefusesNewerUsersFile(t *testing.T) {
	dir := t.TempDir()
	newer := `{"version":2,"users":[{"id":"alice","roles":["admin"],"credentials":{},"future":{"x":1}}]}`
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(newer), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, &Options{Argon2: cheap})
	if err == nil || !strings.Contains(err.Error(), "newer Mayfly") {
		t.Fatalf("open of a users.json of format 2: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, FileName)); string(data) != newer {
		t.Errorf("the newer file was changed: %s", data)
	}
}
