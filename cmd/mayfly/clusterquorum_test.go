package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestClusterWritesWithoutQuorumAnswer503: with two of a cluster's three
// etcd members gone, every HTTP write that changes the cluster's state,
// asked of the node left, is answered 503 (a temporary failure the client
// may retry) within the bound on such writes, instead of hanging for as
// long as the client waits (before, a design document, a search index, a
// scope or a collection did: etcd's client tries again for minutes); and
// none of them is applied on that node. A node whose etcd member lost its
// quorum has no way to know more.
func TestClusterWritesWithoutQuorumAnswer503(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	t.Parallel()
	nodes := startDefsCluster(t)
	n3 := nodes[2]
	nodes[0].kill()
	nodes[1].kill()

	form := "application/x-www-form-urlencoded"
	writes := []struct {
		what, method, path, ctype, body string
	}{
		{"design document put", http.MethodPut, "/default/_design/dd", "application/json", `{"views":{"v":{"map":"function(d,m){emit(m.id,null)}"}}}`},
		{"search index put", http.MethodPut, "/api/index/fts", "application/json", `{"type":"fulltext-index","sourceType":"couchbase","sourceName":"default"}`},
		{"scope created", http.MethodPost, "/pools/default/buckets/default/scopes", form, url.Values{"name": {"s1"}}.Encode()},
		{"collection created", http.MethodPost, "/pools/default/buckets/default/scopes/_default/collections", form, url.Values{"name": {"c1"}}.Encode()},
		{"bucket created", http.MethodPost, "/pools/default/buckets", form, url.Values{"name": {"nb"}, "bucketType": {"couchbase"}, "ramQuotaMB": {"100"}}.Encode()},
		{"bucket settings changed", http.MethodPost, "/pools/default/buckets/default", form, url.Values{"maxTTL": {"600"}}.Encode()},
		{"bucket deleted", http.MethodDelete, "/pools/default/buckets/default", "", ""},
		{"user created", http.MethodPut, "/settings/rbac/users/local/bo", form, url.Values{"password": {"bopass1"}, "roles": {"admin"}}.Encode()},
	}
	type answer struct {
		code int
		body string
		took time.Duration
		err  error
	}
	answers := make([]chan answer, len(writes))
	for i, w := range writes {
		answers[i] = make(chan answer, 1)
		go func() {
			req, err := http.NewRequest(w.method, "http://"+n3.http+w.path, strings.NewReader(w.body))
			if err != nil {
				answers[i] <- answer{err: err}
				return
			}
			req.SetBasicAuth("Administrator", "password")
			if w.ctype != "" {
				req.Header.Set("Content-Type", w.ctype)
			}
			start := time.Now()                         // wall clock: reported only
			cl := http.Client{Timeout: 3 * time.Minute} // a hang guard, not a speed
			resp, err := cl.Do(req)
			if err != nil {
				answers[i] <- answer{err: err, took: time.Since(start)}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			answers[i] <- answer{resp.StatusCode, string(b), time.Since(start), err}
		}()
	}
	for i, w := range writes {
		a := <-answers[i]
		t.Logf("%s: %d after %v: %s %v", w.what, a.code, a.took.Round(time.Millisecond), strings.TrimSpace(a.body), a.err)
		if a.err != nil || a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "etcd without a quorum?") {
			t.Errorf("%s without a quorum: %d %s %v; want a 503 that says the cluster's state did not answer", w.what, a.code, a.body, a.err)
		}
	}

	// Nothing of them here.
	for _, c := range []struct{ what, path string }{
		{"the design document", "/default/_design/dd"},
		{"the search index", "/api/index/fts"},
		{"the bucket created", "/pools/default/buckets/nb"},
		{"the user", "/settings/rbac/users/local/bo"},
	} {
		code, body, _, err := apiReq(n3, http.MethodGet, c.path, "")
		if err != nil || code == http.StatusOK {
			t.Errorf("%s, whose write failed, is on %s: %d %s %v", c.what, n3.name, code, body, err)
		}
	}
	code, body, _, err := apiReq(n3, http.MethodGet, "/pools/default/buckets/default/scopes", "")
	if err != nil || code != http.StatusOK || strings.Contains(body, `"s1"`) || strings.Contains(body, `"c1"`) {
		t.Errorf("the default bucket's scopes after failed writes: %d %s %v; want it there without s1 or c1", code, body, err)
	}
	code, body, _, err = apiReq(n3, http.MethodGet, "/pools/default/buckets/default", "")
	if err != nil || code != http.StatusOK || strings.Contains(body, `"maxTTL":600`) {
		t.Errorf("the default bucket after a failed change and deletion: %d %s %v; want it there, maxTTL unchanged", code, body, err)
	}
}
