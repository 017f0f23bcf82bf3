package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// GET /pools/default on a cluster node names, in "mayflyCluster", only the
// buckets the caller has a role on, as GET /pools/default/buckets lists
// only those (README's permission table): a user given data_reader on one
// bucket does not learn the names, partitions and health of the others.
// (A review found every user given any role saw every bucket of the
// cluster there.)
func TestPoolsDefaultNamesOnlyTheCallersBuckets(t *testing.T) {
	nodes, _ := startedKVCluster(t)
	addr := nodes[0].http
	do := func(method, path, user, password, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(user, password)
		if body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := do(http.MethodPost, "/pools/default/buckets", "Administrator", "password", "name=payroll-acme&ramQuotaMB=100"); code/100 != 2 {
		t.Fatalf("creating bucket payroll-acme: %d %s", code, body)
	}
	form := url.Values{"password": {"alicepass"}, "roles": {"data_reader[default]"}}.Encode()
	if code, body := do(http.MethodPut, "/settings/rbac/users/local/alice", "Administrator", "password", form); code != http.StatusOK {
		t.Fatalf("creating alice: %d %s", code, body)
	}
	// The administrator sees the bucket there once the cluster lists it.
	var admin string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) { // wall clock: a hang guard
		code, body := do(http.MethodGet, "/pools/default", "Administrator", "password", "")
		admin = body
		if code == http.StatusOK && strings.Contains(body, `"payroll-acme"`) || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(admin, `"payroll-acme"`) {
		t.Fatalf("the administrator's /pools/default never names bucket payroll-acme: %s", admin)
	}
	code, body := do(http.MethodGet, "/pools/default", "alice", "alicepass", "")
	if code != http.StatusOK {
		t.Fatalf("alice's /pools/default: %d %s", code, body)
	}
	if strings.Contains(body, "payroll-acme") {
		t.Errorf("alice (data_reader[default]) is shown bucket payroll-acme in /pools/default: %s", body)
	}
	if code, body := do(http.MethodGet, "/pools/default/buckets", "alice", "alicepass", ""); code != http.StatusOK || strings.Contains(body, "payroll-acme") {
		t.Errorf("alice's /pools/default/buckets: %d, names payroll-acme: %v", code, strings.Contains(body, "payroll-acme"))
	}
}
