package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/httpapi"
)

// definedBuckets is a cluster node's UserStore as far as roles go: the
// buckets it checks a user's roles against are the cluster's definitions
// (here, a set), not this node's copies, as cluster.PutUser checks them.
type definedBuckets struct {
	store   *auth.Store
	buckets map[string]bool
}

func (d *definedBuckets) PutUser(_ context.Context, id, name, password string, roles []auth.Role) error {
	var missing []string
	for _, r := range roles {
		if r.Bucket != "" && r.Bucket != "*" && !d.buckets[r.Bucket] {
			missing = append(missing, r.String())
		}
	}
	if len(missing) > 0 {
		return auth.RolesOnMissingBuckets(missing)
	}
	return d.store.PutUser(id, name, password, roles)
}

func (d *definedBuckets) DeleteUser(_ context.Context, id string) error {
	return d.store.DeleteUser(id)
}

func (*definedBuckets) Version() int64 { return 1 }

func (*definedBuckets) WaitVersion(context.Context, int64) error { return nil }

// TestClusterRoleChecksTheClusterBuckets: on a cluster node, a user's
// role on a bucket is checked against the cluster's buckets, not this
// node's copies. A bucket just created through another node (defined in
// the cluster, not yet here) takes roles; one the cluster deleted (this
// node still deleting its copy) does not. Before, the node's engine was
// asked: the first was refused (400) and the second taken.
func TestClusterRoleChecksTheClusterBuckets(t *testing.T) {
	us := &definedBuckets{buckets: map[string]bool{"travel": true}}
	f := newFixtureOpts(t, &httpapi.Options{Users: us}, nil)
	us.store = f.users
	if _, err := f.eng.Bucket("travel"); err == nil {
		t.Fatal("this node has bucket travel (the test's premise: created through another node, not here yet)")
	}
	st, _, body := f.do(http.MethodPut, "/settings/rbac/users/local/ann", "application/x-www-form-urlencoded", "password=annpass&roles=data_reader[travel]")
	if st != http.StatusOK {
		t.Errorf("a role on travel, which the cluster defines and this node has not created yet: %d %s; want 200", st, body)
	}
	st, _, body = f.do(http.MethodPut, "/settings/rbac/users/local/bo", "application/x-www-form-urlencoded", "password=bopass&roles=data_reader[default],views_reader[*]")
	if st != http.StatusBadRequest || !strings.Contains(body, "data_reader[default]") || strings.Contains(body, "views_reader") {
		t.Errorf("a role on default, which the cluster deleted and this node still has: %d %s; want 400 naming data_reader[default] alone", st, body)
	}
}

// TestUsersPendingAnswer503: while a cluster node has not loaded the
// cluster's users since it started (auth.Store.AwaitUsers), a stored
// user's request is answered 503 temporary_failure with Retry-After,
// its password unchecked (a stale users.json may hold a user deleted
// since, or an old password), and the failure is not counted against
// the user or address; the node's administrator gets in. Once the users
// are loaded, the user is answered as they say.
func TestUsersPendingAnswer503(t *testing.T) {
	f := newFixture(t)
	f.addUser("alice", "alicepw", "data_reader[default]")
	records := f.users.Records()
	f.users.AwaitUsers()
	for range 12 { // past the throttle's 10 failures for a name, were they counted
		st, h, body := f.doAs("alice", "alicepw", http.MethodGet, "/default/docs/a", "", "")
		if st != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(body, "temporary_failure") {
			t.Fatalf("alice before the cluster's users are loaded: %d %q %s; want 503 temporary_failure with Retry-After", st, h.Get("Retry-After"), body)
		}
	}
	if st, _, body := f.doAs("alice", "wrong-password", http.MethodGet, "/default/docs/a", "", ""); st != http.StatusServiceUnavailable {
		t.Errorf("alice with a wrong password before the users are loaded: %d %s; want 503 (unchecked)", st, body)
	}
	if st, _, body := f.do(http.MethodGet, "/pools/default/buckets", "", ""); st != http.StatusOK {
		t.Errorf("the administrator before the users are loaded: %d %s; want 200", st, body)
	}
	if _, err := f.users.ReplaceUsers(records); err != nil {
		t.Fatal(err)
	}
	if st, _, body := f.doAs("alice", "alicepw", http.MethodGet, "/default/docs/a", "", ""); st != http.StatusNotFound {
		t.Errorf("alice once the users are loaded: %d %s; want 404 (no such document)", st, body)
	}
}
