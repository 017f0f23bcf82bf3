package kv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/kv"
)

// notLeader is the Replicator of a cluster node that leads no partition:
// every write is refused naming another node.
type notLeader struct{}

func (notLeader) Writable(_ context.Context, part int) error {
	return fmt.Errorf("%w: partition %d is led by node n2", engine.ErrNotMyVBucket, part)
}

func (n notLeader) Replicate(ctx context.Context, part int, _ []byte) (engine.ReplicatedResult, error) {
	return engine.ReplicatedResult{}, n.Writable(ctx, part)
}

// TestNotMyVBucketCarriesTheConfig: on a cluster node, a write to a
// partition another node leads is answered NOT_MY_VBUCKET with the
// bucket's configuration in its body, laid out over the cluster (every
// node in serverList and nodesExt, in the same order; each partition's
// leader first in its vBucketMap row), so an SDK re-routes it; the
// configuration GET_CLUSTER_CONFIG serves is the same layout. A read is
// refused the same way.
func TestNotMyVBucketCarriesTheConfig(t *testing.T) {
	var f *fixture
	f = newFixture(t, func(o *kv.Options) {
		o.Topology = func(_ context.Context, bucket string) (*clusterconfig.Topology, error) {
			if bucket != bucketName {
				t.Errorf("topology of %q", bucket)
			}
			tp := &clusterconfig.Topology{Replicas: 1, Servers: []clusterconfig.Server{
				{Name: "n1", ThisNode: true},
				{Name: "n2", KV: "127.0.0.2:11210", HTTP: "127.0.0.2:8091"},
			}}
			for range f.bucket.NumPartitions() {
				tp.Map = append(tp.Map, []int{1, 0})
			}
			return tp, nil
		}
	})
	f.bucket.SetReplicator(notLeader{})
	c := f.dial(t)
	c.login(adminUser, adminPass)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusSuccess)

	r := c.expect(&memd.Packet{Command: memd.CmdSet, Key: []byte("k"), Value: []byte(`{}`), Extras: make([]byte, 8)}, memd.StatusNotMyVBucket)
	var cfg struct {
		Rev      int64 `json:"rev"`
		Name     string
		NodesExt []struct {
			Hostname string         `json:"hostname"`
			Services map[string]int `json:"services"`
			ThisNode bool           `json:"thisNode"`
		} `json:"nodesExt"`
		VBucketServerMap struct {
			NumReplicas int      `json:"numReplicas"`
			ServerList  []string `json:"serverList"`
			VBucketMap  [][]int  `json:"vBucketMap"`
		} `json:"vBucketServerMap"`
	}
	if err := json.Unmarshal(r.Value, &cfg); err != nil {
		t.Fatalf("NOT_MY_VBUCKET's body is not a configuration: %v: %q", err, r.Value)
	}
	port := f.addr[len("127.0.0.1:"):]
	m := cfg.VBucketServerMap
	if cfg.Name != bucketName || len(m.ServerList) != 2 || m.ServerList[0] != "$HOST:"+port || m.ServerList[1] != "127.0.0.2:11210" ||
		m.NumReplicas != 1 || len(m.VBucketMap) != f.bucket.NumPartitions() || m.VBucketMap[f.bucket.PartitionOf("k")][0] != 1 {
		t.Fatalf("NOT_MY_VBUCKET's configuration: %s", r.Value)
	}
	if len(cfg.NodesExt) != 2 || !cfg.NodesExt[0].ThisNode || cfg.NodesExt[1].Hostname != "127.0.0.2" ||
		cfg.NodesExt[1].Services["kv"] != 11210 || cfg.NodesExt[1].Services["mgmt"] != 8091 {
		t.Fatalf("nodesExt: %s", r.Value)
	}
	// A read is refused alike: this node's copy may lag the leader's.
	if rr := c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusNotMyVBucket); string(rr.Value) != string(r.Value) {
		t.Fatalf("a GET's NOT_MY_VBUCKET carries %s", rr.Value)
	}
	g := c.expect(&memd.Packet{Command: memd.CmdGetClusterConfig}, memd.StatusSuccess)
	var served map[string]any
	if err := json.Unmarshal(g.Value, &served); err != nil {
		t.Fatal(err)
	}
	if string(g.Value) != string(r.Value) {
		t.Fatalf("GET_CLUSTER_CONFIG serves\n%s\nNOT_MY_VBUCKET carried\n%s", g.Value, r.Value)
	}
	if n := f.bucket.Stats().CurrItems; n != 0 {
		t.Fatalf("a refused write was stored: %d items", n)
	}
}

// TestVBucketOutOfRange: a key-value command naming a vBucket the bucket
// does not have (an SDK that mapped the key with another count) is
// answered NOT_MY_VBUCKET with the configuration, as Couchbase answers
// it, changes nothing, and the connection goes on.
func TestVBucketOutOfRange(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	c.login(adminUser, adminPass)
	c.expect(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte(bucketName)}, memd.StatusSuccess)
	n := uint16(f.bucket.NumPartitions())
	for _, vb := range []uint16{n, 2000, 0xffff} {
		c.expect(&memd.Packet{Command: memd.CmdSet, Key: []byte("k"), Vbucket: vb, Value: []byte(`{}`), Extras: make([]byte, 8)}, memd.StatusNotMyVBucket)
		c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k"), Vbucket: vb}, memd.StatusNotMyVBucket)
	}
	c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k"), Vbucket: n - 1}, memd.StatusKeyNotFound)
	c.expect(&memd.Packet{Command: memd.CmdSet, Key: []byte("k"), Vbucket: n - 1, Value: []byte(`{}`), Extras: make([]byte, 8)}, memd.StatusSuccess)
	c.expect(&memd.Packet{Command: memd.CmdNoop}, memd.StatusSuccess)
}
