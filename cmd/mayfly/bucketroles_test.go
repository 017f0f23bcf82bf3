package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestRoleDoesNotOutliveItsBucket: a role on a bucket is a role on that
// bucket, not on a later one that takes its name. A user given
// data_reader[travel] reads travel; once travel is deleted and created
// again, the user reads nothing of the new one (403) until given a role
// on it, as Couchbase drops a deleted bucket's roles; a role on another
// bucket stays.
func TestRoleDoesNotOutliveItsBucket(t *testing.T) {
	t.Setenv("MAYFLY_ADMIN_PASSWORD", "password")
	var stdout syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--memcached", "", "--kv", "", "--kv-tls", "", "--views", "", "--search", "", "--log-level", "error"}, &stdout, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	addr := served(t, &stdout, "serving HTTP on http://")[0]
	req := func(user, pass, method, path, ct, body string) (int, string) {
		t.Helper()
		r, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.SetBasicAuth(user, pass)
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	admin := func(method, path, ct, body string, want int) {
		t.Helper()
		if st, b := req("Administrator", "password", method, path, ct, body); st != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, st, b, want)
		}
	}
	const form = "application/x-www-form-urlencoded"
	create := func() {
		t.Helper()
		admin("POST", "/pools/default/buckets", form, "name=travel&ramQuotaMB=100", http.StatusAccepted)
		eventuallyT(t, "travel takes writes", func() error {
			st, b := req("Administrator", "password", "PUT", "/travel/docs/secret", "application/json", `{"owner":"new"}`)
			if st != http.StatusCreated {
				return &httpStatusError{st, b}
			}
			return nil
		})
	}
	create()
	admin("PUT", "/settings/rbac/users/local/u", form, url.Values{"password": {"u-password"}, "roles": {"data_reader[travel],data_reader[default]"}}.Encode(), http.StatusOK)
	if st, b := req("u", "u-password", "GET", "/travel/docs/secret", "", ""); st != http.StatusOK {
		t.Fatalf("data_reader[travel] reading travel: %d %s", st, b)
	}
	admin("DELETE", "/pools/default/buckets/travel", "", "", http.StatusOK)
	create()
	if st, b := req("u", "u-password", "GET", "/travel/docs/secret", "", ""); st != http.StatusForbidden {
		t.Errorf("a reader of the deleted travel reading the new one: %d %s, want 403", st, b)
	}
	if st, b := req("u", "u-password", "GET", "/default/docs/none", "", ""); st != http.StatusNotFound {
		t.Errorf("the role on default after travel's deletion: %d %s, want 404 (allowed, no such document)", st, b)
	}
}

// httpStatusError is an answer's unexpected status, for eventuallyT.
type httpStatusError struct {
	status int
	body   string
}

func (e *httpStatusError) Error() string { return http.StatusText(e.status) + ": " + e.body }
