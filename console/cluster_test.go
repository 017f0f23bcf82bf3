package console_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
)

// The Cluster page shows what `mayfly cluster status` prints, from GET
// /pools/default: the nodes up and down, the orchestrator, the partitions
// each node leads and holds, the degraded ones and the lagging replicas;
// and it follows the cluster as it changes (a node back, its partitions
// whole again) without a reload. The cluster's state is given to the HTTP
// API as a cluster node's serve gives it (cmd/mayfly's TestServeCluster
// reads the same fields from three real nodes).
func TestConsoleCluster(t *testing.T) {
	b := newBrowser(t)
	var mu sync.Mutex
	st := threeNodes()
	st.Nodes[2].Up, st.Nodes[2].Info = false, nil
	st.Buckets[0].Degraded = []int{0, 1, 2, 3, 7}
	st.Buckets[0].Leading = map[string]int{"n1": 512, "n2": 512} // n3's partitions elected others
	st.Buckets[0].Lagging = []cluster.Lagging{{Bucket: "default", Follower: "n3", Leader: "n1", Why: "down", Partitions: []int{0, 1, 2, 3, 7}, MaxBehind: 42}}
	srv := newClusterServer(t, func() *cluster.Status { mu.Lock(); defer mu.Unlock(); return st })
	b.login(srv)
	b.click(`#nav a[href="#/cluster"]`)
	b.waitAllText("#cluster-summary", "Orchestrator: n2", "2 of 3 nodes up", "degraded or lagging")
	b.waitAllText(`#cluster-nodes tr[data-node="n1"]`, "n1 (this node)", "up", "127.0.0.1:18191")
	b.waitText(`#cluster-nodes tr[data-node="n3"]`, "down")
	b.waitText(`section[data-bucket="default"] .degraded`, "5 degraded partitions: 0-3,7")
	b.waitText(`section[data-bucket="default"] .lagging`, "n3 behind n1 (down) in 5 partitions, at most 42 entries: 0-3,7")
	b.waitAllText(`section[data-bucket="default"] tr[data-node="n2"]`, "n2", "342 (leading 512 now)", "1,024")
	b.waitText(`section[data-bucket="default"] tr[data-node="n3"] .leads`, "340 (leading 0 now)")
	b.screenshot("cluster-degraded")

	// n3 comes back and catches up: the page shows it at its next poll.
	mu.Lock()
	st = threeNodes()
	mu.Unlock()
	b.waitAllText("#cluster-summary", "3 of 3 nodes up", "Every partition has all its copies")
	b.waitText(`#cluster-nodes tr[data-node="n3"]`, "up")
	b.waitText(`section[data-bucket="default"] .degraded`, "No degraded partition.")
	b.waitText(`section[data-bucket="default"] .lagging`, "No replica lagging.")
	if got := b.text(`section[data-bucket="default"] tr[data-node="n2"] .leads`); got != "342" {
		t.Fatalf("n2's leads cell with leadership back where the map puts it: %q, want 342", got)
	}
	b.screenshot("cluster")
}

// Just after a cluster forms, or a node dies, some partitions' groups are
// still electing a leader and their writes answer "retry shortly": the
// Cluster page says so under the bucket whose partitions they are (as
// `mayfly cluster status` does), and not under a bucket whose partitions all
// have a leader; once the elections end, the line goes at the next poll.
func TestConsoleClusterLeaderless(t *testing.T) {
	b := newBrowser(t)
	var mu sync.Mutex
	formed := func() *cluster.Status {
		st := threeNodes()
		travel := st.Buckets[0]
		travel.Name = "travel"
		st.Buckets = append(st.Buckets, travel)
		return st
	}
	st := formed()
	st.Buckets[0].Leaderless = []int{0, 1, 2, 3, 17}
	srv := newClusterServer(t, func() *cluster.Status { mu.Lock(); defer mu.Unlock(); return st })
	b.login(srv)
	b.click(`#nav a[href="#/cluster"]`)
	b.waitText("#cluster-summary", "Some partitions are without a leader yet (below).")
	b.waitText(`section[data-bucket="default"] .leaderless`,
		"No leader yet in 5 partitions: 0-3,17 — an election is under way; writes there answer “retry shortly”.")
	b.waitText(`section[data-bucket="travel"] .degraded`, "No degraded partition.")
	if got := b.text(`section[data-bucket="travel"]`); strings.Contains(got, "No leader") {
		t.Errorf("a bucket whose partitions all have a leader shows a leaderless line: %q", got)
	}
	if !eval[bool](b, `document.querySelector('section[data-bucket="default"] .leaderless').matches('.note')`) {
		t.Error("the leaderless line is not drawn as a warning (the console's .note)")
	}
	b.screenshot("cluster-leaderless")

	// The elections end: the line goes at the next poll.
	mu.Lock()
	st = formed()
	mu.Unlock()
	b.waitText("#cluster-summary", "Every partition has all its copies and a leader")
	if got := b.text("#cluster"); strings.Contains(got, "No leader") {
		t.Errorf("the Cluster page still shows a leaderless line once every partition has a leader: %q", got)
	}
}

// On a single node the Cluster page says there is no cluster, and how to
// start one.
func TestConsoleClusterSingleNode(t *testing.T) {
	b := newBrowser(t)
	srv := newTestServer(t)
	b.login(srv)
	b.click(`#nav a[href="#/cluster"]`)
	b.waitAllText("#cluster-single", "A single node", "no cluster", "--peers")
	if got := b.text("#main"); strings.Contains(got, "Orchestrator") {
		t.Errorf("a single node's Cluster page shows a cluster: %q", got)
	}
}

// newClusterServer is a test server whose GET /pools/default answers the
// status current returns, as a cluster node's serve would: "balanced" as
// the status says, and the other nodes healthy while up.
func newClusterServer(t *testing.T, current func() *cluster.Status) *testServer {
	return newTestServer(t, func(o *httpapi.Options) {
		o.Cluster = func(_ context.Context, sees func(string) bool) (*httpapi.ClusterView, error) {
			all := current()
			st := *all // only the buckets the caller sees, as serve's
			st.Buckets = slices.DeleteFunc(slices.Clone(all.Buckets), func(b cluster.BucketStatus) bool { return !sees(b.Name) })
			cv := &httpapi.ClusterView{Status: &st, Balanced: all.Balanced()}
			for _, n := range st.Nodes[1:] {
				state := "unhealthy"
				if n.Up {
					state = "healthy"
				}
				cv.Nodes = append(cv.Nodes, clusterconfig.Node{Hostname: n.Name, Status: state, ClusterMembership: "active"})
			}
			return cv, nil
		}
	})
}

// threeNodes is a healthy three-node cluster's status as n1 serves it: the
// default bucket's 1024 partitions, three copies each, led 342/341/341.
func threeNodes() *cluster.Status {
	st := &cluster.Status{Orchestrator: "n2", ThisNode: "n1"}
	for i, name := range []string{"n1", "n2", "n3"} {
		info := &cluster.NodeInfo{Name: name, Cluster: fmt.Sprintf("127.0.0.1:191%d0", i), HTTP: fmt.Sprintf("127.0.0.1:18%d91", i+1), Version: "test"}
		st.Nodes = append(st.Nodes, cluster.NodeStatus{Name: name, Up: true, Info: info})
	}
	bs := cluster.BucketStatus{Name: "default", ReplicaNumber: 2, Placed: true,
		Leads:   map[string]int{"n1": 342, "n2": 342, "n3": 340},
		Leading: map[string]int{"n1": 342, "n2": 342, "n3": 340},
		Holds:   map[string]int{"n1": 1024, "n2": 1024, "n3": 1024}}
	st.Buckets = []cluster.BucketStatus{bs}
	return st
}
