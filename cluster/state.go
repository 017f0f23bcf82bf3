package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mayflydb/mayfly/engine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Key prefixes in etcd.
const (
	nodesPrefix        = "/mayfly/nodes/"
	bucketsPrefix      = "/mayfly/buckets/"
	mapsPrefix         = "/mayfly/maps/"
	orchestratorPrefix = "/mayfly/orchestrator/"
	adminsPrefix       = "/mayfly/admins/"
)

// DefaultReplicaNumber is a cluster bucket's replicaNumber when none is
// given: two replicas, three copies of each partition (issue 22's default;
// Couchbase's is one, as a single node's: engine.Options.ReplicaNumber).
const DefaultReplicaNumber = 2

// NodeInfo is what a node publishes about itself under /mayfly/nodes/NAME,
// on its lease.
type NodeInfo struct {
	// Name is the node's name in the peer list.
	Name string `json:"name"`
	// Cluster is the node's cluster address (HOST:PORT).
	Cluster string `json:"cluster"`
	// EtcdPeer and EtcdClient are its etcd member's URLs, empty on a node
	// that is an etcd client only.
	EtcdPeer   string `json:"etcdPeer,omitempty"`
	EtcdClient string `json:"etcdClient,omitempty"`
	// HTTP is its HTTP API address, when it serves one.
	HTTP string `json:"http,omitempty"`
	// KV is its binary KV port's address, when it serves one.
	KV string `json:"kv,omitempty"`
	// Memcached is its memcached text port's address, when it serves
	// one: where another node forwards a memcached command for a
	// partition this node leads.
	Memcached string `json:"memcached,omitempty"`
	// Services are the ports of the services it serves, named as a
	// cluster configuration's nodesExt names them ("mgmt", "kv", "capi",
	// "fts", and the TLS twins "mgmtSSL", "kvSSL", "capiSSL", "ftsSSL"
	// when it serves them), so that every node lists it with all of
	// them. Absent from what a node published before nodes published
	// them: not known.
	Services map[string]int `json:"services,omitempty"`
	// Version is the Mayfly version it runs.
	Version string `json:"version,omitempty"`
	// Started is when the node registered.
	Started time.Time `json:"started"`
}

// BucketDef is a bucket's definition under /mayfly/buckets/NAME: the
// bucket's settings, replicaNumber among them (each partition has
// replicaNumber + 1 copies). The settings own the count: a definition
// written before they did, with replicaNumber beside the settings at the
// JSON's top level, reads the same, since the embedded settings' fields
// are that level.
type BucketDef struct {
	engine.BucketSettings
}

// Replicas returns the definition's replicaNumber: its settings', or
// DefaultReplicaNumber when they have none (DefineBucket writes that).
func (d BucketDef) Replicas() int {
	return d.ReplicaNumber.Or(DefaultReplicaNumber)
}

// Partitions returns how many partitions the bucket has: its settings'
// NumVBuckets, or NumPartitions for a definition written before buckets
// said.
func (d BucketDef) Partitions() int {
	if d.NumVBuckets > 0 {
		return d.NumVBuckets
	}
	return NumPartitions
}

// state is one consistent read of the cluster state (a single etcd
// revision).
type state struct {
	rev     int64
	nodes   map[string]NodeInfo
	buckets map[string]BucketDef
	maps    map[string]*PartitionMap
	mapRevs map[string]int64 // mod revision of each map key
	covs    map[string]*CoverageMap
	covRevs map[string]int64                    // mod revision of each coverage key
	ready   map[string]map[string]CoverageReady // by bucket, by node
}

// readState reads the nodes, bucket definitions and maps at one revision.
func readState(ctx context.Context, cli *clientv3.Client) (*state, error) {
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(nodesPrefix, clientv3.WithPrefix()),
		clientv3.OpGet(bucketsPrefix, clientv3.WithPrefix()),
		clientv3.OpGet(mapsPrefix, clientv3.WithPrefix()),
		clientv3.OpGet(coveragePrefix, clientv3.WithPrefix()),
		clientv3.OpGet(readyPrefix, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("cluster: reading the cluster state: %w", err)
	}
	st := &state{rev: resp.Header.Revision, nodes: map[string]NodeInfo{}, buckets: map[string]BucketDef{},
		maps: map[string]*PartitionMap{}, mapRevs: map[string]int64{},
		covs: map[string]*CoverageMap{}, covRevs: map[string]int64{}}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var n NodeInfo
		if err := json.Unmarshal(kv.Value, &n); err != nil {
			return nil, fmt.Errorf("cluster: %s: %w", kv.Key, err)
		}
		st.nodes[strings.TrimPrefix(string(kv.Key), nodesPrefix)] = n
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		var b BucketDef
		if err := json.Unmarshal(kv.Value, &b); err != nil {
			return nil, fmt.Errorf("cluster: %s: %w", kv.Key, err)
		}
		st.buckets[strings.TrimPrefix(string(kv.Key), bucketsPrefix)] = b
	}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		var m PartitionMap
		if err := json.Unmarshal(kv.Value, &m); err != nil {
			return nil, fmt.Errorf("cluster: %s: %w", kv.Key, err)
		}
		name := strings.TrimPrefix(string(kv.Key), mapsPrefix)
		st.maps[name] = &m
		st.mapRevs[name] = kv.ModRevision
	}
	for _, kv := range resp.Responses[3].GetResponseRange().Kvs {
		name := strings.TrimPrefix(string(kv.Key), coveragePrefix)
		var c CoverageMap
		if err := json.Unmarshal(kv.Value, &c); err != nil {
			c = CoverageMap{} // no partitions: written again from the partition map
		}
		st.covs[name] = &c
		st.covRevs[name] = kv.ModRevision
	}
	st.ready = decodeReady(resp.Responses[4].GetResponseRange().Kvs)
	return st, nil
}

// DefineBucket writes a bucket's definition if the bucket is not defined
// yet (ErrBucketExists otherwise) and its incarnation (UUID) was not
// deleted (ErrBucketDeleted: its tombstone is there); the orchestrator
// then places its partitions. A definition without a replicaNumber is
// written with DefaultReplicaNumber; one outside 0..engine.MaxReplicas is
// refused; ErrUnavailable when etcd did not take it within WriteTimeout
// (Unavailable).
func DefineBucket(ctx context.Context, cli *clientv3.Client, def BucketDef) error {
	return bounded(ctx, func(ctx context.Context) error { return defineBucket(ctx, cli, def) })
}

// defineBucket is DefineBucket, unbounded.
func defineBucket(ctx context.Context, cli *clientv3.Client, def BucketDef) error {
	if def.Name == "" {
		return fmt.Errorf("cluster: a bucket definition needs a name")
	}
	def.ReplicaNumber = engine.Replicas(def.Replicas())
	if n := def.Replicas(); n < 0 || n > engine.MaxReplicas {
		return fmt.Errorf("%w: replicaNumber: bucket %q: %d is not 0..%d", engine.ErrInvalidSetting, def.Name, n, engine.MaxReplicas)
	}
	data, err := json.Marshal(def)
	if err != nil {
		return err
	}
	key, tomb := bucketsPrefix+def.Name, deletedPrefix+def.Name+"/"+def.UUID
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0), clientv3.Compare(clientv3.CreateRevision(tomb), "=", 0)).
		Then(clientv3.OpPut(key, string(data))).
		Else(clientv3.OpGet(tomb, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return fmt.Errorf("cluster: defining bucket %q: %w", def.Name, err)
	}
	if !resp.Succeeded {
		if len(resp.Responses) > 0 && len(resp.Responses[0].GetResponseRange().Kvs) > 0 {
			return fmt.Errorf("%w: %q with UUID %s", ErrBucketDeleted, def.Name, def.UUID)
		}
		return fmt.Errorf("%w: %q", ErrBucketExists, def.Name)
	}
	return nil
}

// ReadMap reads a bucket's partition map and the revision it was last
// written at; nil and 0 when it has none yet.
func ReadMap(ctx context.Context, cli *clientv3.Client, bucket string) (*PartitionMap, int64, error) {
	resp, err := cli.Get(ctx, mapsPrefix+bucket)
	if err != nil {
		return nil, 0, fmt.Errorf("cluster: reading the map of %q: %w", bucket, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	var m PartitionMap
	if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
		return nil, 0, fmt.Errorf("cluster: the map of %q: %w", bucket, err)
	}
	return &m, resp.Kvs[0].ModRevision, nil
}

// ReadNode reads what node name publishes under /mayfly/nodes/NAME;
// ErrNodeDown when the key is absent (the node's lease expired, or it
// never registered).
func ReadNode(ctx context.Context, cli *clientv3.Client, name string) (NodeInfo, error) {
	resp, err := cli.Get(ctx, nodesPrefix+name)
	if err != nil {
		return NodeInfo{}, fmt.Errorf("cluster: reading node %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return NodeInfo{}, fmt.Errorf("%w: %q", ErrNodeDown, name)
	}
	var n NodeInfo
	if err := json.Unmarshal(resp.Kvs[0].Value, &n); err != nil {
		return NodeInfo{}, fmt.Errorf("cluster: node %q: %w", name, err)
	}
	return n, nil
}
