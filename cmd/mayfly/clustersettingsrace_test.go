package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// A bucket's settings changed on the node that created it, at once after
// the creation, reach every node and stay: the other nodes create their
// copies from the definition as created, and must not write those older
// settings back as the bucket's definition.
func TestClusterSettingsChangedRightAfterCreate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	t.Parallel()
	nodes, _ := procCluster(t, "--memcached", "", "--kv", "", "--default-bucket", "")
	startServing(t, nodes...)
	n1 := nodes[0]
	post := func(path string, form url.Values) {
		t.Helper()
		if code, body, err := bucketReq(n1, http.MethodPost, path, form); err != nil || code/100 != 2 {
			t.Fatalf("POST %s %v on n1: %d %s %v", path, form, code, body, err)
		}
	}
	post("/pools/default/buckets", url.Values{"name": {"b"}, "bucketType": {"couchbase"}, "ramQuotaMB": {"100"}, "numVBuckets": {"8"}})
	post("/pools/default/buckets/b/settings/waterMarks", url.Values{"mem_low_wat": {fmt.Sprint(50 << 20)}})
	post("/pools/default/buckets/b", url.Values{"maxTTL": {"600"}})
	seen := func(n *procNode) error {
		_, body, err := bucketReq(n, http.MethodGet, "/pools/default/buckets/b/settings/waterMarks", nil)
		if err != nil {
			return err
		}
		var wm struct {
			Low int64 `json:"mem_low_wat"`
		}
		if err := json.Unmarshal([]byte(body), &wm); err != nil {
			return fmt.Errorf("%s: %s: %w", n.name, body, err)
		}
		ttl, err := bucketMaxTTL(n, "b")
		if err == nil && (wm.Low != 50<<20 || ttl != 600) {
			err = fmt.Errorf("%s: mem_low_wat %d, maxTTL %d; want %d, 600", n.name, wm.Low, ttl, 50<<20)
		}
		return err
	}
	deadline := time.Now().Add(2 * time.Minute) // wall clock: the watch's delivery, generous
	for _, n := range nodes {
		for err := seen(n); err != nil; err = seen(n) {
			if time.Now().After(deadline) {
				var all []error
				for _, m := range nodes {
					all = append(all, seen(m))
				}
				t.Fatalf("after 2 min: %v", all)
			}
			time.Sleep(time.Second)
		}
	}
}
