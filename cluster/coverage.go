package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TopologyMirror is a node's copy of what a view query's coverage needs,
// kept current by etcd watches (Run) instead of reads per query: each
// bucket's partition map with the revision it was written at
// (/mayfly/maps/) and the nodes up with their registrations
// (/mayfly/nodes/: a node's key goes with its lease, so one whose lease
// expired drops out as soon as the watch delivers the deletion). Each
// prefix is read whole once, then watched from the revision read, and read
// whole again when the watch's history was compacted. It is safe for
// concurrent use; what it returns is shared and must not be modified.
type TopologyMirror struct {
	cli                     *clientv3.Client
	mapsPrefix, nodesPrefix string // the keys followed (others in tests)

	mu          sync.Mutex
	maps        map[string]mirroredMap // by bucket
	mapsAt      revisionGate           // the etcd revision the maps are current to
	nodes       map[string]NodeInfo    // the nodes up; replaced, never changed in place
	nodesGen    uint64                 // moves with every change of nodes
	nodesLoaded bool
}

// mirroredMap is a bucket's map as a TopologyMirror holds it.
type mirroredMap struct {
	m   *PartitionMap
	rev int64
	err error // the map's value did not decode
}

// NewTopologyMirror returns an empty mirror; Run fills it.
func NewTopologyMirror(cli *clientv3.Client) *TopologyMirror {
	return newTopologyMirror(cli, mapsPrefix, nodesPrefix)
}

// newTopologyMirror returns an empty mirror of the maps under mapsPrefix
// and the nodes under nodesPrefix.
func newTopologyMirror(cli *clientv3.Client, mapsPrefix, nodesPrefix string) *TopologyMirror {
	return &TopologyMirror{cli: cli, mapsPrefix: mapsPrefix, nodesPrefix: nodesPrefix, maps: map[string]mirroredMap{}, nodes: map[string]NodeInfo{}, mapsAt: newRevisionGate()}
}

// Run keeps the mirror current until ctx ends.
func (t *TopologyMirror) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() {
		followPrefix(ctx, t.cli, t.mapsPrefix, func(kvs []*mvccpb.KeyValue, rev int64) {
			byBucket := map[string]mirroredMap{}
			for _, kv := range kvs {
				bucket := strings.TrimPrefix(string(kv.Key), t.mapsPrefix)
				byBucket[bucket] = decodeMirroredMap(bucket, kv)
			}
			t.mu.Lock()
			t.maps, t.mapsAt.loaded = byBucket, true
			t.mapsAt.moveLocked(rev)
			t.mu.Unlock()
		}, func(evs []*clientv3.Event, upTo int64) {
			t.mu.Lock()
			for _, ev := range evs {
				bucket := strings.TrimPrefix(string(ev.Kv.Key), t.mapsPrefix)
				if ev.Type == clientv3.EventTypeDelete {
					delete(t.maps, bucket)
				} else {
					t.maps[bucket] = decodeMirroredMap(bucket, ev.Kv)
				}
			}
			t.mapsAt.moveLocked(upTo)
			t.mu.Unlock()
		})
	})
	wg.Go(func() {
		followPrefix(ctx, t.cli, t.nodesPrefix, func(kvs []*mvccpb.KeyValue, rev int64) {
			nodes := map[string]NodeInfo{}
			for _, kv := range kvs {
				if n, ok := decodeNodeInfo(kv.Value); ok {
					nodes[strings.TrimPrefix(string(kv.Key), t.nodesPrefix)] = n
				}
			}
			t.mu.Lock()
			t.nodes, t.nodesLoaded = nodes, true
			t.nodesGen++
			t.mu.Unlock()
		}, func(evs []*clientv3.Event, upTo int64) {
			if len(evs) == 0 {
				return
			}
			t.mu.Lock()
			nodes := maps.Clone(t.nodes)
			for _, ev := range evs {
				name := strings.TrimPrefix(string(ev.Kv.Key), t.nodesPrefix)
				n, ok := decodeNodeInfo(ev.Kv.Value)
				if ev.Type == clientv3.EventTypeDelete || !ok {
					delete(nodes, name)
				} else {
					nodes[name] = n
				}
			}
			t.nodes = nodes
			t.nodesGen++
			t.mu.Unlock()
		})
	})
	wg.Wait()
}

// decodeMirroredMap decodes a map's key-value.
func decodeMirroredMap(bucket string, kv *mvccpb.KeyValue) mirroredMap {
	var m PartitionMap
	if err := json.Unmarshal(kv.Value, &m); err != nil {
		return mirroredMap{rev: kv.ModRevision, err: fmt.Errorf("cluster: the map of %q: %w", bucket, err)}
	}
	return mirroredMap{m: &m, rev: kv.ModRevision}
}

// decodeNodeInfo decodes a node's registration; false when it does not
// decode (such a node is taken as down, as ReadNode's error does).
func decodeNodeInfo(value []byte) (NodeInfo, bool) {
	var n NodeInfo
	return n, json.Unmarshal(value, &n) == nil
}

// Map returns bucket's partition map and the revision it was written at
// (nil and 0 when it has none, as ReadMap's); loaded is false before the
// maps were read once (the mirror then knows nothing).
func (t *TopologyMirror) Map(bucket string) (m *PartitionMap, rev int64, loaded bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.mapsAt.loaded {
		return nil, 0, false, nil
	}
	e := t.maps[bucket]
	return e.m, e.rev, true, e.err
}

// Nodes returns the nodes up, by name, and a generation that moves with
// every change of them (equal generations: the same nodes); loaded is
// false before they were read once.
func (t *TopologyMirror) Nodes() (nodes map[string]NodeInfo, gen uint64, loaded bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nodes, t.nodesGen, t.nodesLoaded
}

// WaitMaps waits until the maps are current to etcd revision rev or later
// (a node asked for its view share under a map revision its mirror has not
// reached yet waits so); ctx bounds the wait.
func (t *TopologyMirror) WaitMaps(ctx context.Context, rev int64) error {
	return t.mapsAt.wait(ctx, &t.mu, rev, "maps")
}
