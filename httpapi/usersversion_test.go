package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/httpapi"
)

// clusterUsers is a node's UserStore as a cluster node's is, with the
// cluster's users reaching the node only when it waits for them: its
// Version stays where it is until WaitVersion is asked for a later one,
// which then applies the users of from (the node they were changed
// through), as a node's etcd watch would deliver them.
type clusterUsers struct {
	mu      sync.Mutex
	store   *auth.Store
	version int64
	from    *auth.Store
	asked   []int64 // the versions WaitVersion was asked for
}

func (c *clusterUsers) PutUser(_ context.Context, id, name, password string, roles []auth.Role) error {
	return c.store.PutUser(id, name, password, roles)
}

func (c *clusterUsers) DeleteUser(_ context.Context, id string) error { return c.store.DeleteUser(id) }

func (c *clusterUsers) Version() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

func (c *clusterUsers) WaitVersion(_ context.Context, v int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, v)
	if v > c.version && c.from != nil {
		if _, err := c.store.ReplaceUsers(c.from.Records()); err != nil {
			return err
		}
		c.version = v
	}
	return nil
}

// TestForwardedRequestWaitsForTheSendersUsers: a user created through one
// node writes a key another node leads through it at once: the forwarded
// request (a document's, and a _bulk line's) carries how far the sending
// node's users have come, and the leader, whose users have not come that
// far yet, waits to know them before it authenticates the request, rather
// than refusing the user it does not know yet (401, and a failed login
// counted against the sending node's address). A request without the
// header is authenticated at once, as the node's users stand.
func TestForwardedRequestWaitsForTheSendersUsers(t *testing.T) {
	lu := &clusterUsers{version: 1}
	leader := newFixtureOpts(t, &httpapi.Options{Users: lu}, nil)
	addr := strings.TrimPrefix(leader.srv.URL, "http://")
	route := func(_ context.Context, bucket, key string) (httpapi.Route, error) {
		if strings.HasPrefix(key, "far") {
			return httpapi.Route{Node: "lead", Addr: addr, From: "follow"}, nil
		}
		return httpapi.Route{}, nil
	}
	fu := &clusterUsers{version: 5}
	follower := newFixtureOpts(t, &httpapi.Options{Route: route, Users: fu}, nil)
	fu.store = follower.users
	lu.mu.Lock()
	lu.store, lu.from = leader.users, follower.users
	lu.mu.Unlock()

	// alice, created through the follower (its users at version 5).
	code, _, body := follower.do(http.MethodPut, "/settings/rbac/users/local/alice", "application/x-www-form-urlencoded",
		"password=alicepass&roles=data_writer[default],data_reader[default]")
	if code != http.StatusOK {
		t.Fatalf("creating alice: %d %s", code, body)
	}
	if code, _, body := leader.doAs("alice", "alicepass", http.MethodGet, "/default/docs/near", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("alice straight to the leader, whose users lag: %d %s; want 401 (the test's premise)", code, body)
	}

	if code, _, body := follower.doAs("alice", "alicepass", http.MethodPut, "/default/docs/far1", "application/json", `{"v":1}`); code != http.StatusOK && code != http.StatusCreated {
		t.Errorf("alice's write forwarded to the leader: %d %s", code, body)
	}
	code, _, body = follower.doAs("alice", "alicepass", http.MethodPost, "/default/_bulk", "application/x-ndjson", `{"op":"upsert","id":"far2","doc":{"v":2}}`+"\n")
	if code != http.StatusOK || strings.Contains(body, "error") {
		t.Errorf("alice's _bulk line forwarded to the leader: %d %s", code, body)
	}
	lu.mu.Lock()
	asked := append([]int64(nil), lu.asked...)
	lu.mu.Unlock()
	if len(asked) == 0 || asked[0] != 5 {
		t.Errorf("the leader waited for its users' versions %v; want the follower's, 5, first", asked)
	}
	if _, err := leader.mustBucket("default").DefaultCollection().Get(context.Background(), "far1"); err != nil {
		t.Errorf("the leader lacks far1: %v", err)
	}
}
