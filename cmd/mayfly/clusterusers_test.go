package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestUserCreatedOnOneNodeWorksThroughEvery: a user created over REST on
// one node of a cluster (PUT /settings/rbac/users/local/NAME, as the
// console and Couchbase's SDKs' user manager do) is a user of the
// cluster, as Couchbase's users are: its writes through that node land
// on every partition's leader, and the other nodes list it. Today each
// node's user store is its own: the write of a key another node leads is
// forwarded with the user's credentials and refused there (401), and the
// other nodes do not know the user.
//
// Then, as a user of Couchbase relies on too: a change of the user's roles
// made through another node applies through the first; a user created
// while a node is down is known to that node once it is back; and a user
// deleted through another node (while that node was down, its users.json
// still holding the user) is refused (401) through every node.
func TestUserCreatedOnOneNodeWorksThroughEvery(t *testing.T) {
	nodes, _ := startedKVCluster(t)
	do := func(method, addr, path, user, password, ctype, body string) (int, string, error) {
		req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		req.SetBasicAuth(user, password)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		cl := http.Client{Timeout: time.Minute}
		resp, err := cl.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	form := url.Values{"password": {"alicepass"}, "roles": {"data_reader[default],data_writer[default]"}}.Encode()
	if code, body, err := do(http.MethodPut, nodes[0].http, "/settings/rbac/users/local/alice", "Administrator", "password",
		"application/x-www-form-urlencoded", form); err != nil || code != http.StatusOK {
		t.Fatalf("creating alice on %s: %d %s %v", nodes[0].name, code, body, err)
	}
	// Every key through n1: about two thirds of them are led elsewhere.
	var refused []string
	for i := range 30 {
		key := fmt.Sprintf("u%d", i)
		var code int
		var body string
		var err error
		for deadline := time.Now().Add(time.Minute); ; { // a partition between leaders answers 503: retried
			code, body, err = do(http.MethodPut, nodes[0].http, "/default/docs/"+key, "alice", "alicepass", "application/json", `{"v":1}`)
			if err != nil || code != http.StatusServiceUnavailable || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil || code != http.StatusOK && code != http.StatusCreated {
			refused = append(refused, fmt.Sprintf("PUT %s: %d %s %v", key, code, strings.TrimSpace(body), err))
		}
	}
	if len(refused) > 0 {
		t.Errorf("%d of 30 writes by alice through %s refused:\n%s", len(refused), nodes[0].name, strings.Join(refused, "\n"))
	}
	for _, n := range nodes[1:] {
		if code, body, err := do(http.MethodGet, n.http, "/settings/rbac/users/local/alice", "Administrator", "password", "", ""); err != nil || code != http.StatusOK {
			t.Errorf("alice on %s: %d %s %v", n.name, code, strings.TrimSpace(body), err)
		}
	}
	if t.Failed() {
		return
	}
	// answers waits until user's request through node n answers want
	// (the other nodes apply a change a moment after the node asked).
	answers := func(n *procNode, method, path, user, password, body string, want int) {
		t.Helper()
		eventuallyT(t, fmt.Sprintf("%s %s by %s through %s answering %d", method, path, user, n.name, want), func() error {
			code, got, err := do(method, n.http, path, user, password, "application/json", body)
			if err != nil || code != want {
				return fmt.Errorf("%d %s %v", code, strings.TrimSpace(got), err)
			}
			return nil
		})
	}

	// Alice's roles changed through n3 (no password: hers stays): a
	// reader now, through n1 too.
	form = url.Values{"roles": {"data_reader[default]"}}.Encode()
	if code, body, err := do(http.MethodPut, nodes[2].http, "/settings/rbac/users/local/alice", "Administrator", "password",
		"application/x-www-form-urlencoded", form); err != nil || code != http.StatusOK {
		t.Fatalf("changing alice's roles on %s: %d %s %v", nodes[2].name, code, body, err)
	}
	answers(nodes[0], http.MethodPut, "/default/docs/u0", "alice", "alicepass", `{"v":2}`, http.StatusForbidden)
	answers(nodes[0], http.MethodGet, "/default/docs/u0", "alice", "alicepass", "", http.StatusOK)

	// n2 down: bob created through n1, alice deleted through n3.
	nodes[1].stop()
	form = url.Values{"password": {"bobpass"}, "roles": {"data_reader[default]"}}.Encode()
	if code, body, err := do(http.MethodPut, nodes[0].http, "/settings/rbac/users/local/bob", "Administrator", "password",
		"application/x-www-form-urlencoded", form); err != nil || code != http.StatusOK {
		t.Fatalf("creating bob on %s with %s down: %d %s %v", nodes[0].name, nodes[1].name, code, body, err)
	}
	if code, body, err := do(http.MethodDelete, nodes[2].http, "/settings/rbac/users/local/alice", "Administrator", "password", "", ""); err != nil || code != http.StatusOK {
		t.Fatalf("deleting alice on %s with %s down: %d %s %v", nodes[2].name, nodes[1].name, code, body, err)
	}
	nodes[1].start(t)
	nodes[1].started(t)
	for _, n := range nodes {
		answers(n, http.MethodGet, "/default/docs/u1", "bob", "bobpass", "", http.StatusOK)
		answers(n, http.MethodGet, "/default/docs/u1", "alice", "alicepass", "", http.StatusUnauthorized)
		answers(n, http.MethodGet, "/settings/rbac/users/local/alice", "Administrator", "password", "", http.StatusNotFound)
	}
}
