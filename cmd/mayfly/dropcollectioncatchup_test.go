package main

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestDroppedCollectionStaysDroppedOnANodeThatWasDown: a collection
// written and then dropped while one node of three is down holds nothing
// on that node once it is back: its copy counts only the documents that
// remain (curr_items the same on every node, with three copies), and the
// bucket's basicStats.itemCount, whichever node is asked, counts only
// them, as dropping a collection deletes its documents (Couchbase: "All
// documents and indexes in the collection will be lost"). A review found
// the returning node applied the dropped collection first (from the
// cluster's manifest) and then the writes to it from its partitions' Raft
// logs, keeping them as documents of a collection that no longer exists:
// 60 such documents counted in its curr_items and in the bucket's
// itemCount on every node.
func TestDroppedCollectionStaysDroppedOnANodeThatWasDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	t.Parallel() // beside the package's other cluster tests: it mostly waits
	nodes, _ := procCluster(t, "--memcached", "", "--kv", "", "--default-bucket", "")
	startServing(t, nodes...)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	if code, body, err := bucketReq(n1, http.MethodPost, "/pools/default/buckets",
		url.Values{"name": {"b"}, "bucketType": {"couchbase"}, "ramQuotaMB": {"100"}, "numVBuckets": {"16"}}); err != nil || code != http.StatusAccepted {
		t.Fatalf("create bucket b on n1: %d %s %v", code, body, err)
	}
	for _, n := range nodes {
		eventuallyT(t, n.name+" has bucket b", func() error { _, err := bucketOn(n, "b"); return err })
	}
	if code, body, err := bucketReq(n1, http.MethodPost, "/pools/default/buckets/b/scopes", url.Values{"name": {"s"}}); err != nil || code != http.StatusOK {
		t.Fatalf("create scope s: %d %s %v", code, body, err)
	}
	if code, body, err := bucketReq(n1, http.MethodPost, "/pools/default/buckets/b/scopes/s/collections", url.Values{"name": {"c"}}); err != nil || code != http.StatusOK {
		t.Fatalf("create collection s.c: %d %s %v", code, body, err)
	}
	const kept, dropped = 10, 60
	for i := range kept {
		putOnLeader(t, nodes, "b", fmt.Sprintf("d%d", i), `{"n":1}`)
	}
	currItems := func(n *procNode) (int64, error) {
		var st struct {
			CurrItems int64 `json:"curr_items"`
		}
		err := nodeReq(n, http.MethodGet, "/pools/default/buckets/b/stats", &st)
		return st.CurrItems, err
	}
	itemCount := func(n *procNode) (int64, error) {
		var v struct {
			BasicStats struct {
				ItemCount int64 `json:"itemCount"`
			} `json:"basicStats"`
		}
		err := nodeReq(n, http.MethodGet, "/pools/default/buckets/b", &v)
		return v.BasicStats.ItemCount, err
	}
	for _, n := range nodes {
		eventuallyT(t, n.name+" holds the default collection's documents", func() error {
			c, err := currItems(n)
			if err == nil && c != kept {
				err = fmt.Errorf("curr_items %d, want %d", c, kept)
			}
			return err
		})
	}

	// n3 down: s.c written on the two others (a majority), then dropped.
	n3.stop()
	for i := range dropped {
		eventuallyT(t, fmt.Sprintf("writing s.c's c%d", i), func() error {
			var last string
			for _, n := range []*procNode{n1, n2} {
				code, body, _, err := apiReq(n, http.MethodPut, fmt.Sprintf("/b/docs/c%d?collection=s.c", i), `{"x":1}`)
				if err == nil && (code == http.StatusOK || code == http.StatusCreated) {
					return nil
				}
				last = fmt.Sprintf("%s: %d %s %v", n.name, code, body, err)
			}
			return fmt.Errorf("not acknowledged: %s", last)
		})
	}
	if code, body, _, err := apiReq(n2, http.MethodDelete, "/pools/default/buckets/b/scopes/s/collections/c", ""); err != nil || code != http.StatusOK {
		t.Fatalf("drop s.c on n2: %d %s %v", code, body, err)
	}
	startServing(t, n3)

	// Once n3 has caught up, every copy holds the default collection's
	// documents only, and the bucket counts them only.
	putOnLeader(t, nodes, "b", "after", `{"n":2}`)
	for _, n := range nodes {
		eventuallyT(t, n.name+" holds the write made after its return", func() error {
			c, err := currItems(n)
			if err == nil && c < kept+1 {
				err = fmt.Errorf("curr_items %d", c)
			}
			return err
		})
	}
	time.Sleep(2 * time.Second) // not a speed assertion: a moment for any late apply to show in the counts below
	for _, n := range nodes {
		if c, err := currItems(n); err != nil || c != kept+1 {
			t.Errorf("%s: curr_items %d (%v), want %d: the dropped collection's documents are back in its copy", n.name, c, err, kept+1)
		}
		if c, err := itemCount(n); err != nil || c != kept+1 {
			t.Errorf("%s: basicStats.itemCount %d (%v), want %d: the dropped collection's documents are counted", n.name, c, err, kept+1)
		}
	}
}
