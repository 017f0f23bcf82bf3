package sdktest

import (
	"errors"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// gocb's user manager creates, reads, lists and drops a local user over the
// REST paths Couchbase serves, and the user it creates logs in on the KV
// port with its roles.
func TestUserManager(t *testing.T) {
	s := start(t)
	cl, _ := s.connect(t, adminUser, adminPassword)
	um := cl.Users()

	err := um.UpsertUser(gocb.User{
		Username: "carol", DisplayName: "Carol", Password: "carol-secret",
		Roles: []gocb.Role{{Name: "data_reader", Bucket: bucketName}, {Name: "data_writer", Bucket: bucketName}},
	}, nil)
	if err != nil {
		t.Fatalf("upsert user: %v", err)
	}
	u, err := um.GetUser("carol", nil)
	if err != nil {
		t.Fatalf("get user: %v", err)
	}
	if u.User.Username != "carol" || u.User.DisplayName != "Carol" || u.Domain != gocb.LocalDomain || len(u.User.Roles) != 2 {
		t.Fatalf("get user: %+v", u)
	}
	if r := u.EffectiveRoles; len(r) != 2 || r[0].Name != "data_reader" || r[0].Bucket != bucketName || len(r[0].Origins) != 1 || r[0].Origins[0].Type != "user" {
		t.Fatalf("effective roles: %+v", r)
	}
	if u.PasswordChanged.IsZero() || time.Since(u.PasswordChanged) > time.Hour {
		t.Fatalf("password change date %v", u.PasswordChanged)
	}
	all, err := um.GetAllUsers(nil)
	if err != nil {
		t.Fatalf("get all users: %v", err)
	}
	found := map[string]bool{}
	for _, u := range all {
		found[u.User.Username] = true
	}
	if !found["carol"] || !found[user] {
		t.Fatalf("all users: %+v", found)
	}
	roles, err := um.GetRoles(nil)
	if err != nil {
		t.Fatalf("get roles: %v", err)
	}
	var reader *gocb.RoleAndDescription
	for i := range roles {
		if roles[i].Role.Name == "data_reader" {
			reader = &roles[i]
		}
	}
	if reader == nil || reader.Role.Bucket != "*" || reader.DisplayName == "" {
		t.Fatalf("roles: %+v", roles)
	}

	// Carol logs in over the KV port (SCRAM) and writes, as her roles allow.
	_, coll := s.connect(t, "carol", "carol-secret")
	if _, err := coll.Upsert("c1", hotel{"Savoy", 5}, nil); err != nil {
		t.Fatalf("carol upserts: %v", err)
	}

	// An unknown role is refused, and a dropped user is gone.
	err = um.UpsertUser(gocb.User{Username: "dave", Password: "dave-secret", Roles: []gocb.Role{{Name: "emperor"}}}, nil)
	if err == nil {
		t.Fatal("a user with an unknown role was created")
	}
	if err := um.DropUser("carol", nil); err != nil {
		t.Fatalf("drop user: %v", err)
	}
	if _, err := um.GetUser("carol", nil); !errors.Is(err, gocb.ErrUserNotFound) {
		t.Fatalf("get a dropped user: %v, want ErrUserNotFound", err)
	}
	if err := um.DropUser("carol", nil); !errors.Is(err, gocb.ErrUserNotFound) {
		t.Fatalf("drop a dropped user: %v, want ErrUserNotFound", err)
	}
}
