package main

import (
	"testing"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
)

// TestTopologyServersAllHaveAKVPort: a bucket's configuration on a cluster
// node lists, in serverList and nodesExt alike, only servers with a KV
// port, so that the vBucketMap's numbers are indexes in the list an SDK
// makes of them (gocbcore keeps the nodesExt entries that have a KV port,
// in order): a node down is listed at the addresses it published last,
// "unhealthy", and one never seen up is left out, its partitions' rows
// naming -1 for it. Before, a node down was listed with no address and
// no port: gocbcore left it out of its list and every partition of a node
// after it (by name) went to the next server, or past the list's end,
// NOT_MY_VBUCKET after NOT_MY_VBUCKET under the same rev, for as long as
// the node was down (with three nodes, until it returned).
func TestTopologyServersAllHaveAKVPort(t *testing.T) {
	info := func(name, kv string) *cluster.NodeInfo {
		return &cluster.NodeInfo{Name: name, KV: kv, HTTP: kv + "0"}
	}
	nodes := []cluster.NodeStatus{
		{Name: "n1", Up: true, Info: info("n1", "127.0.0.1:11")},
		{Name: "n2", Info: info("n2", "127.0.0.1:12")}, // down, seen up
		{Name: "n3"}, // down, never seen up
		{Name: "n4", Up: true, Info: info("n4", "127.0.0.1:14")},
	}
	m := &cluster.PartitionMap{Bucket: "b", Copies: 3, Partitions: []cluster.Partition{
		{Voters: []string{"n1", "n2", "n3"}, Leader: "n1", Epoch: 1},
		{Voters: []string{"n2", "n3", "n4"}, Leader: "n2", Epoch: 1},
		{Voters: []string{"n3", "n4", "n1"}, Leader: "n3", Epoch: 1},
		{Voters: []string{"n4", "n1", "n2"}, Leader: "n4", Epoch: 1},
	}}
	top := buildTopology(m, nodes, "n1", func(int) (string, bool) { return "", false })
	cfg := (&clusterconfig.Bucket{Nodes: []clusterconfig.Node{{Hostname: "127.0.0.1:10"}}}).WithTopology(top, "127.0.0.1", clusterconfig.Ports{KV: 11, Mgmt: 10})
	sm := cfg.VBucketServerMap
	if len(sm.ServerList) != len(cfg.NodesExt) || len(cfg.Nodes) != len(cfg.NodesExt) {
		t.Fatalf("serverList %v, %d nodesExt, %d nodes: want one length", sm.ServerList, len(cfg.NodesExt), len(cfg.Nodes))
	}
	// The list gocbcore makes: the nodesExt entries with a KV port.
	var kvList []string
	for i, ne := range cfg.NodesExt {
		if ne.Services.KV > 0 {
			kvList = append(kvList, sm.ServerList[i])
		}
	}
	want := []string{"127.0.0.1:11", "127.0.0.1:12", "127.0.0.1:14"}
	if len(kvList) != len(sm.ServerList) || len(kvList) != len(want) {
		t.Fatalf("serverList %v, KV servers as an SDK lists them %v: want %v in both", sm.ServerList, kvList, want)
	}
	for i := range want {
		if kvList[i] != want[i] || sm.ServerList[i] != want[i] {
			t.Fatalf("serverList %v, KV servers as an SDK lists them %v: want %v in both", sm.ServerList, kvList, want)
		}
	}
	if cfg.Nodes[1].Status != "unhealthy" || cfg.Nodes[2].Status != "healthy" {
		t.Fatalf("nodes' statuses %q, %q: want n2 (down) unhealthy, n4 healthy", cfg.Nodes[1].Status, cfg.Nodes[2].Status)
	}
	leaders := map[int]string{0: "127.0.0.1:11", 1: "127.0.0.1:12", 3: "127.0.0.1:14"}
	for p, row := range sm.VBucketMap {
		if len(row) != 3 {
			t.Fatalf("partition %d's row %v: want 3 entries", p, row)
		}
		for _, i := range row {
			if i < -1 || i >= len(kvList) {
				t.Fatalf("partition %d's row %v: %d is not an index in the KV servers %v", p, row, i, kvList)
			}
		}
		if w, ok := leaders[p]; ok && (row[0] < 0 || kvList[row[0]] != w) {
			t.Fatalf("partition %d's row %v: its leader at %v; want %s", p, row, row[0], w)
		}
	}
	if row := sm.VBucketMap[2]; row[0] != -1 {
		t.Fatalf("partition 2, led by n3, never seen up: row %v; want -1 first", row)
	}
}
