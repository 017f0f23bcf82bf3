package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestClusterChangesFeedRefused: on a cluster's bucket the change feed, and
// _all_docs' update_seq (a position in it), answer 501 not_implemented
// saying why, rather than a feed that loses writes. A review found the
// feed served from each node's own copy: a node holding no copy of a
// partition left its documents out, a position taken on one node was a
// rollback on another, and a client following last_seq missed writes
// (positions are CAS values that several leaders stamp from their own
// clocks, applied by a follower in any order). Listings still answer.
func TestClusterChangesFeedRefused(t *testing.T) {
	nodes, peers := startedKVCluster(t)
	placedAndLed(t, nodes, peers)
	for i := range 6 {
		writeAnywhere(t, nodes[i%3:], http.MethodPut, fmt.Sprintf("feed%d", i), fmt.Sprintf(`{"v":%d}`, i))
	}
	for _, n := range nodes {
		for _, path := range []string{"/default/_changes?since=0", "/default/_changes?feed=longpoll&since=now&timeout=100", "/default/_all_docs?update_seq=true"} {
			code, body, err := viewReq(http.MethodGet, n.http, path, "")
			if err != nil || code != http.StatusNotImplemented || !strings.Contains(body, `"not_implemented"`) || !strings.Contains(body, "cluster") {
				t.Errorf("%s %s: %d %s %v, want 501 not_implemented naming the cluster", n.name, path, code, body, err)
			}
		}
		code, body, err := viewReq(http.MethodGet, n.http, "/default/_all_docs", "")
		if err != nil || code != http.StatusOK || !strings.Contains(body, `"feed5"`) {
			t.Errorf("%s _all_docs: %d %s %v, want every document", n.name, code, body, err)
		}
	}
}
