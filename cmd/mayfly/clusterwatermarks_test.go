package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// A node down while the cluster changed a bucket's quota (which moved its
// water marks) and then set a water mark back to the value the node held
// comes back with the cluster's settings, and leaves them as they are:
// the user's mem_low_wat stays what was set, on every node.
func TestClusterWaterMarksAfterAMissedChange(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	t.Parallel()
	nodes, _ := procCluster(t, "--memcached", "", "--kv", "", "--default-bucket", "")
	startServing(t, nodes...)
	n1, n3 := nodes[0], nodes[2]
	const low = 50 << 20
	post := func(path string, form url.Values) {
		t.Helper()
		if code, body, err := bucketReq(n1, http.MethodPost, path, form); err != nil || code/100 != 2 {
			t.Fatalf("POST %s %v: %d %s %v", path, form, code, body, err)
		}
	}
	lowOn := func(n *procNode) (quota, lowWat int64, err error) {
		code, body, err := bucketReq(n, http.MethodGet, "/pools/default/buckets/b/settings/waterMarks", nil)
		if err != nil || code != http.StatusOK {
			return 0, 0, fmt.Errorf("%s: %d %s %v", n.name, code, body, err)
		}
		var wm struct {
			MaxSize int64 `json:"ep_max_size"`
			Low     int64 `json:"mem_low_wat"`
		}
		err = json.Unmarshal([]byte(body), &wm)
		return wm.MaxSize, wm.Low, err
	}
	want := func(what string, quotaMB, lowWat int64) {
		for _, n := range nodes {
			eventuallyT(t, n.name+": "+what, func() error {
				q, l, err := lowOn(n)
				if err == nil && (q != quotaMB<<20 || l != lowWat) {
					err = fmt.Errorf("%s: quota %d MiB, mem_low_wat %d; want %d MiB, %d", n.name, q>>20, l, quotaMB, lowWat)
				}
				return err
			})
		}
	}

	post("/pools/default/buckets", url.Values{"name": {"b"}, "bucketType": {"couchbase"}, "ramQuotaMB": {"100"}, "numVBuckets": {"8"}})
	want("bucket b created", 100, 75<<20) // the default mark, 75% of the quota
	post("/pools/default/buckets/b/settings/waterMarks", url.Values{"mem_low_wat": {fmt.Sprint(low)}})
	want("mem_low_wat set", 100, low)

	// n3 down: the quota doubles (mem_low_wat with it), then mem_low_wat
	// is set back to 50 MiB.
	n3.stop()
	post("/pools/default/buckets/b", url.Values{"ramQuotaMB": {"200"}})
	post("/pools/default/buckets/b/settings/waterMarks", url.Values{"mem_low_wat": {fmt.Sprint(low)}})
	if _, l, err := lowOn(n1); err != nil || l != low {
		t.Fatalf("n1 after the changes: mem_low_wat %d (%v), want %d", l, err, low)
	}

	// n3 back: every node has the cluster's settings, the user's mark.
	startServing(t, n3)
	eventuallyT(t, "n3 takes the doubled quota", func() error {
		q, _, err := lowOn(n3)
		if err == nil && q != 200<<20 {
			err = fmt.Errorf("n3: quota %d MiB", q>>20)
		}
		return err
	})
	if _, l, err := lowOn(n3); err != nil || l != low {
		t.Fatalf("n3 back: mem_low_wat %d (%v), want %d, the cluster's", l, err, low)
	}
	want("after n3's restart", 200, low)
}
