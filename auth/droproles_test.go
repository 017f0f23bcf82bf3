package auth

import (
	"context"
	"testing"
)

// TestDropBucketRoles: a deleted bucket's roles leave every user that had
// one, at once for a login already cached and for good (the store read
// again from disk); roles on other buckets and on every bucket ([*]) stay.
func TestDropBucketRoles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, &Options{Argon2: cheap})
	if err != nil {
		t.Fatal(err)
	}
	put := func(id, roles string) {
		t.Helper()
		rs, err := ParseRoles(roles)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.PutUser(id, "", id+"-password", rs); err != nil {
			t.Fatal(err)
		}
	}
	put("ann", "data_reader[travel],data_writer[beer]")
	put("bo", "bucket_admin[*]")
	put("cy", "data_reader[travel2]")
	if p, err := s.Authenticate(ctx, "ann", "ann-password", "test"); err != nil || !p.Allows(Permission{DataRead, "travel"}) {
		t.Fatalf("ann before: %v, %+v", err, p)
	}
	gen := s.Generation()
	n, err := s.DropBucketRoles("travel")
	if err != nil || n != 1 {
		t.Fatalf("DropBucketRoles(travel): %d users, %v; want 1", n, err)
	}
	if s.Generation() == gen {
		t.Error("the users changed but Generation did not move (open KV connections would keep the old roles)")
	}
	check := func(s *Store, when string) {
		t.Helper()
		p, err := s.Authenticate(ctx, "ann", "ann-password", "test")
		if err != nil {
			t.Fatalf("%s: ann: %v", when, err)
		}
		if p.Allows(Permission{DataRead, "travel"}) || !p.Allows(Permission{DataWrite, "beer"}) {
			t.Errorf("%s: ann's roles %v, want data_writer[beer] alone", when, p.Roles)
		}
		for id, want := range map[string]string{"bo": "bucket_admin[*]", "cy": "data_reader[travel2]"} {
			u, err := s.User(id)
			if err != nil || len(u.Roles) != 1 || u.Roles[0].String() != want {
				t.Errorf("%s: %s: %+v %v, want %s", when, id, u.Roles, err, want)
			}
		}
	}
	check(s, "after the drop")
	again, err := Open(dir, &Options{Argon2: cheap})
	if err != nil {
		t.Fatal(err)
	}
	check(again, "read again from disk")
	if n, err := s.DropBucketRoles("travel"); err != nil || n != 0 {
		t.Errorf("a second drop: %d users, %v; want 0", n, err)
	}
}
