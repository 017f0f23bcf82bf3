package main

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/cluster"
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
// change too. Lowered to 0 again, every partition sheds the copies beside
// its preferred leader's: the item counts add up to one copy again, and
// writes made during the change and after it too. Every acknowledged write
// reads the same from every node throughout.
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
	readEverywhere("with three copies")

	// Lowered from 2 to 0: each partition keeps its preferred leader's
	// copy; the two others leave their groups once the conf change
	// removing them applied (had they left at once, the partition would
	// have had no majority to commit it, nor any write after it), and
	// drop their documents.
	before, err := readMap(peers, "r")
	if err != nil {
		t.Fatal(err)
	}
	if code := post(t, nodes[0], "/pools/default/buckets/r", url.Values{"replicaNumber": {"0"}}); code != http.StatusOK {
		t.Fatalf("replicaNumber=0 through %s: %d", nodes[0].name, code)
	}
	// Writes go on, one a poll, until the map has one voter per
	// partition, and ten more while the copies shed leave their groups.
	during := 0
	eventuallyT(t, "the map lowered, written to meanwhile", func() error {
		k := fmt.Sprintf("r/l%d", during)
		acked[k] = writeAnywhere(t, nodes, http.MethodPut, k, fmt.Sprintf(`{"v":%d}`, during))
		during++
		m, err := readMap(peers, "r")
		if err != nil {
			return err
		}
		if i := slices.IndexFunc(m.Partitions, func(p cluster.Partition) bool { return len(p.Voters) > 1 }); i >= 0 {
			return fmt.Errorf("partition %d: voters %v", i, m.Partitions[i].Voters)
		}
		return nil
	})
	t.Logf("%d writes while the map was being lowered", during)
	if m, err := readMap(peers, "r"); err != nil {
		t.Fatal(err)
	} else {
		for p, part := range m.Partitions {
			if part.Voters[0] != before.Partitions[p].Leader {
				t.Errorf("partition %d: kept %v, its preferred leader was %s", p, part.Voters, before.Partitions[p].Leader)
			}
		}
	}
	write("l2-", 10)
	eventuallyT(t, "one copy of every document again", func() error { return copiesOnNodes(nodes, peers, "r", 1, int64(len(acked))) })
	readEverywhere("with replicaNumber lowered to 0")
	for _, n := range nodes {
		var b struct {
			ReplicaNumber int `json:"replicaNumber"`
		}
		eventuallyT(t, n.name+" shows replicaNumber 0", func() error {
			if err := nodeReq(n, http.MethodGet, "/pools/default/buckets/r", &b); err != nil {
				return err
			}
			if b.ReplicaNumber != 0 {
				return fmt.Errorf("replicaNumber %d", b.ReplicaNumber)
			}
			return nil
		})
	}
	code, out, errOut := runCmd("cluster", "status", "--peers", strings.Join(peers, ","))
	if code != 0 || !strings.Contains(out, fmt.Sprintf("bucket r (replicaNumber 0): %d partitions, 0 degraded", testVBuckets)) {
		t.Errorf("cluster status: %d %q %q", code, out, errOut)
	}
}
