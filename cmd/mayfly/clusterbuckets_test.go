package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// bucketReq sends an administrator's request to node n: a form body when
// form is not nil. It returns the status and body.
func bucketReq(n *procNode, method, path string, form url.Values) (int, string, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, "http://"+n.http+path, body)
	if err != nil {
		return 0, "", err
	}
	req.SetBasicAuth("Administrator", "password")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
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

// bucketDoc sends a document request for bucket b to node n.
func bucketDoc(n *procNode, method, b, key, value string) (int, string, error) {
	req, err := http.NewRequest(method, "http://"+n.http+"/"+b+"/docs/"+key, strings.NewReader(value))
	if err != nil {
		return 0, "", err
	}
	req.SetBasicAuth("Administrator", "password")
	if value != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	cl := http.Client{Timeout: time.Minute}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// putOnLeader writes key of bucket b on whichever live node takes it (a
// node that does not lead the partition, or a partition without a leader
// yet, answers 503: retried until a generous deadline).
func putOnLeader(t *testing.T, nodes []*procNode, b, key, value string) {
	t.Helper()
	eventuallyT(t, "writing "+b+"/"+key, func() error {
		var last string
		for _, n := range nodes {
			if n.cmd == nil {
				continue
			}
			code, body, err := bucketDoc(n, http.MethodPut, b, key, value)
			switch {
			case err != nil:
				last = err.Error()
			case code == http.StatusOK || code == http.StatusCreated:
				return nil
			case code == http.StatusServiceUnavailable || code == http.StatusNotFound:
				last = fmt.Sprintf("%s: %d %s", n.name, code, body) // not the leader, no leader yet, or not created there yet
			default:
				t.Fatalf("PUT %s/%s on %s: %d %s", b, key, n.name, code, body)
			}
		}
		return fmt.Errorf("not acknowledged: %s", last)
	})
}

// bucketSettingsOn reads bucket b's maxTTL on node n; 404 is an error
// naming it.
func bucketMaxTTL(n *procNode, b string) (int64, error) {
	v, err := bucketOn(n, b)
	return v.MaxTTL, err
}

// bucketShown is the part of GET /pools/default/buckets/NAME the cluster
// tests read.
type bucketShown struct {
	MaxTTL      int64 `json:"maxTTL"`
	NumVBuckets int   `json:"numVBuckets"`
}

// bucketOn reads bucket b as node n shows it.
func bucketOn(n *procNode, b string) (bucketShown, error) {
	var v bucketShown
	code, body, err := bucketReq(n, http.MethodGet, "/pools/default/buckets/"+b, nil)
	if err != nil {
		return v, err
	}
	if code != http.StatusOK {
		return v, fmt.Errorf("%s: GET bucket %s: %d %s", n.name, b, code, body)
	}
	err = json.Unmarshal([]byte(body), &v)
	return v, err
}

// bucketGone checks that node n has no bucket b.
func bucketGone(n *procNode, b string) error {
	code, body, err := bucketReq(n, http.MethodGet, "/pools/default/buckets/"+b, nil)
	if err != nil {
		return err
	}
	if code != http.StatusNotFound {
		return fmt.Errorf("%s: GET bucket %s: %d %s", n.name, b, code, body)
	}
	return nil
}

// TestClusterBucketLifecycle runs three `mayfly serve --peers` processes:
// a bucket created over HTTP on one node exists on every node, a settings
// change on another reaches every node, a name already defined is refused,
// and a deletion on a third deletes it everywhere. Then the review's case:
// with one node down, the bucket is deleted, created again under its name
// and written; the node comes back and after every node restarts none of
// the old incarnation's keys is readable anywhere, the new one's are on
// every node, and a node restarted after the bucket's last deletion does
// not bring it back.
func TestClusterBucketLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	// Beside the package's other cluster tests: it mostly waits out
	// elections and timeouts, and this package is make test's longest.
	t.Parallel()
	nodes, _ := procCluster(t, "--memcached", "", "--kv", "", "--default-bucket", "")
	startServing(t, nodes...)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	create := func(n *procNode) (int, string) {
		code, body, err := bucketReq(n, http.MethodPost, "/pools/default/buckets",
			url.Values{"name": {"b"}, "bucketType": {"couchbase"}, "ramQuotaMB": {"100"}, "numVBuckets": {"24"}})
		if err != nil {
			t.Fatal(err)
		}
		return code, body
	}
	readable := func(n *procNode, keys []string) error {
		for _, k := range keys {
			if code, body, err := bucketDoc(n, http.MethodGet, "b", k, ""); err != nil || code != http.StatusOK {
				return fmt.Errorf("%s: %s reads %d %s %v", n.name, k, code, body, err)
			}
		}
		return nil
	}
	var oldKeys, newKeys []string
	for i := range 8 {
		oldKeys = append(oldKeys, fmt.Sprintf("old%d", i))
		newKeys = append(newKeys, fmt.Sprintf("new%d", i))
	}

	// Created on n1: on every node, with its settings (its numVBuckets
	// too, not the nodes' --num-vbuckets).
	if code, body := create(n1); code != http.StatusAccepted {
		t.Fatalf("create b on n1: %d %s", code, body)
	}
	for _, n := range nodes {
		eventuallyT(t, n.name+" has bucket b", func() error {
			v, err := bucketOn(n, "b")
			if err == nil && v.NumVBuckets != 24 {
				err = fmt.Errorf("%s: numVBuckets %d, want 24", n.name, v.NumVBuckets)
			}
			return err
		})
	}
	if code, body := create(n2); code != http.StatusBadRequest || !strings.Contains(body, "Bucket with given name already exists") {
		t.Fatalf("creating b again on n2: %d %s, want 400 already exists", code, body)
	}
	for _, k := range oldKeys {
		putOnLeader(t, nodes, "b", k, `{"incarnation":1}`)
	}
	for _, n := range nodes {
		eventuallyT(t, n.name+" reads the first incarnation's keys", func() error { return readable(n, oldKeys) })
	}

	// A settings change on n2 reaches every node.
	if code, body, err := bucketReq(n2, http.MethodPost, "/pools/default/buckets/b", url.Values{"maxTTL": {"600"}}); err != nil || code != http.StatusOK {
		t.Fatalf("maxTTL on n2: %d %s %v", code, body, err)
	}
	for _, n := range nodes {
		eventuallyT(t, n.name+" has b's new maxTTL", func() error {
			ttl, err := bucketMaxTTL(n, "b")
			if err == nil && ttl != 600 {
				err = fmt.Errorf("%s: maxTTL %d", n.name, ttl)
			}
			return err
		})
	}

	// n3 down: deleted on n1, created again on n2 and written.
	n3.stop()
	if code, body, err := bucketReq(n1, http.MethodDelete, "/pools/default/buckets/b", nil); err != nil || code != http.StatusOK {
		t.Fatalf("delete b on n1: %d %s %v", code, body, err)
	}
	eventuallyT(t, "n2 deletes b", func() error { return bucketGone(n2, "b") })
	if code, body := create(n2); code != http.StatusAccepted {
		t.Fatalf("create b again on n2: %d %s", code, body)
	}
	eventuallyT(t, "n1 has the new b", func() error { _, err := bucketMaxTTL(n1, "b"); return err })

	// n3 back: it drops its old copy and takes the new one (placed once
	// every node is up: the failover timeout is long), which is written;
	// then every node restarts.
	startServing(t, n3)
	for _, k := range newKeys {
		putOnLeader(t, nodes, "b", k, `{"incarnation":2}`)
	}
	eventuallyT(t, "n3 reads the new incarnation's keys", func() error { return readable(n3, newKeys) })
	for _, n := range nodes {
		n.stop()
	}
	startServing(t, nodes...)
	for _, n := range nodes {
		eventuallyT(t, n.name+" reads the new incarnation's keys after a restart", func() error { return readable(n, newKeys) })
		if ttl, err := bucketMaxTTL(n, "b"); err != nil || ttl != 0 {
			t.Errorf("%s: the new b's maxTTL %d (%v), want 0: the old incarnation's settings", n.name, ttl, err)
		}
		for _, k := range oldKeys {
			// A read goes to the key's leader: right after the restart its
			// partition may still be electing one (503, retried).
			eventuallyT(t, n.name+" answers the deleted incarnation's "+k+" not found", func() error {
				code, body, err := bucketDoc(n, http.MethodGet, "b", k, "")
				switch {
				case err == nil && code == http.StatusServiceUnavailable:
					return fmt.Errorf("%d %s", code, body)
				case err != nil || code != http.StatusNotFound:
					t.Errorf("%s: the deleted incarnation's %s reads %d %s %v", n.name, k, code, body, err)
				}
				return nil
			})
		}
	}
	// Nor does a write of the new incarnation meet an old entry.
	putOnLeader(t, nodes, "b", "new-after", `{"incarnation":2}`)

	// Deleted on n3 while n1 is down: n1 does not bring it back.
	n1.stop()
	if code, body, err := bucketReq(n3, http.MethodDelete, "/pools/default/buckets/b", nil); err != nil || code != http.StatusOK {
		t.Fatalf("delete b on n3: %d %s %v", code, body, err)
	}
	eventuallyT(t, "n2 deletes b", func() error { return bucketGone(n2, "b") })
	startServing(t, n1) // it serves once it dropped (or defined again) its copy
	for _, n := range nodes {
		if err := bucketGone(n, "b"); err != nil {
			t.Errorf("the deleted bucket came back: %v", err)
		}
	}
}
