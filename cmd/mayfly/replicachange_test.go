package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// copiesOnNodes checks that every partition of bucket's map
// has copies voters, none degraded, that no leader reports a follower
// lagging (the groups hold the map's voters and the new copies caught up),
// and that the nodes' own item counts add up to copies of each of items
// documents.
func copiesOnNodes(nodes []*procNode, peers []string, bucket string, copies int, items int64) error {
	m, err := readMap(peers, bucket)
	if err != nil {
		return err
	}
	if m.Copies != copies {
		return fmt.Errorf("the map wants %d copies", m.Copies)
	}
	for p, part := range m.Partitions {
		if len(part.Voters) != copies || part.Degraded {
			return fmt.Errorf("partition %d: voters %v, degraded %v", p, part.Voters, part.Degraded)
		}
	}
	st, err := clusterStatus(peers)
	if err != nil {
		return err
	}
	for _, b := range st.Buckets {
		if b.Name == bucket && len(b.Lagging) > 0 {
			return fmt.Errorf("bucket %s: lagging replicas %+v", b.Name, b.Lagging)
		}
	}
	var sum int64
	for _, n := range nodes {
		var s struct {
			CurrItems int64 `json:"curr_items"`
		}
		if err := nodeReq(n, http.MethodGet, "/pools/default/buckets/"+bucket+"/stats", &s); err != nil {
			return err
		}
		sum += s.CurrItems
	}
	if want := int64(copies) * items; sum != want {
		return fmt.Errorf("the nodes hold %d copies of documents, want %d", sum, want)
	}
	return nil
}

// post POSTs form to path on node n as the administrator and returns the
// answer's status (bucketReq's, failing the test on a transport error).
func post(t *testing.T, n *procNode, path string, form url.Values) int {
	t.Helper()
	code, body, err := bucketReq(n, http.MethodPost, path, form)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("POST %s on %s: %d %.200s", path, n.name, code, body)
	return code
}

// TestReplicaNumberRaisedAddsCopies runs three `mayfly serve --peers`
// processes with a bucket of replicaNumber 0 (one copy of each
// partition): the nodes' item counts add up to one copy of each document.
// Raised to 1, then to 2, through different nodes, every partition gets
// new voters, which join their groups and are sent a snapshot: the item
// counts add up to two, then three, copies, documents written after each
// change too. Every acknowledged write reads the same from every node
// throughout. Lowering it is refused (400), changing nothing.
func TestReplicaNumberRaisedAddsCopies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	t.Parallel()
	nodes, peers := procCluster(t, "--memcached", "127.0.0.1:0", "--kv", "")
	for _, n := range nodes {
		n.start(t)
	}
	for _, n := range nodes {
		n.started(t)
	}
	// The default bucket holds three copies; the test's own starts with one.
	if code := post(t, nodes[0], "/pools/default/buckets", url.Values{"name": {"r"}, "ramQuotaMB": {"100"}, "replicaNumber": {"0"}}); code != http.StatusAccepted {
		t.Fatalf("create bucket r: %d", code)
	}
	acked := map[string]ackedDoc{}
	write := func(prefix string, count int) {
		for i := range count {
			k := fmt.Sprintf("r/%s%d", prefix, i) // bucket r (docPath)
			acked[k] = writeAnywhere(t, nodes, http.MethodPut, k, fmt.Sprintf(`{"v":%d}`, i))
		}
	}
	readEverywhere := func(when string) {
		for _, n := range nodes {
			eventuallyT(t, n.name+" reads every acknowledged write "+when, func() error { return readsAcked(n, acked) })
		}
	}
	write("a", 30)
	eventuallyT(t, "one copy of every document", func() error { return copiesOnNodes(nodes, peers, "r", 1, int64(len(acked))) })
	readEverywhere("with replicaNumber 0")

	for i, replicas := range []int{1, 2} {
		if code := post(t, nodes[i+1], "/pools/default/buckets/r", url.Values{"replicaNumber": {fmt.Sprint(replicas)}}); code != http.StatusOK {
			t.Fatalf("replicaNumber=%d through %s: %d", replicas, nodes[i+1].name, code)
		}
		copies := replicas + 1
		eventuallyT(t, fmt.Sprintf("%d copies of every document", copies), func() error {
			return copiesOnNodes(nodes, peers, "r", copies, int64(len(acked)))
		})
		readEverywhere(fmt.Sprintf("with replicaNumber %d", replicas))
		write(fmt.Sprintf("r%d-", replicas), 10)
		eventuallyT(t, fmt.Sprintf("%d copies of the new documents too", copies), func() error {
			return copiesOnNodes(nodes, peers, "r", copies, int64(len(acked)))
		})
	}
	readEverywhere("at the end")
	if code := post(t, nodes[0], "/pools/default/buckets/r", url.Values{"replicaNumber": {"1"}}); code != http.StatusBadRequest {
		t.Errorf("lowering replicaNumber: %d, want 400", code)
	}
	code, out, errOut := runCmd("cluster", "status", "--peers", strings.Join(peers, ","))
	if code != 0 || !strings.Contains(out, fmt.Sprintf("bucket r (replicaNumber 2): %d partitions, 0 degraded", testVBuckets)) {
		t.Errorf("cluster status: %d %q %q", code, out, errOut)
	}
}
