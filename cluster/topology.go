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

// TopologyMirror is the one owner of the partition map as a node knows
// it: a copy of the cluster's topology kept current by etcd watches (Run)
// instead of reads per request or polls. It holds each bucket's partition
// map with the revision it was written at (/mayfly/maps/), the nodes up
// with what they published (/mayfly/nodes/: a node's key goes with its
// lease, so one whose lease expired drops out as soon as the watch
// delivers the deletion), and each bucket's layout key's revision
// (/mayfly/layout/, see BumpLayout) with the nodes' records of the
// partitions they lead beside it (see PublishLeads), and each bucket's views' coverage map
// with its revision (/mayfly/coverage/, see CoverageMap). Each prefix is read whole once, then
// watched from the revision read, and read whole again when the watch's
// history was compacted; a node cut off from etcd keeps its last copy.
// Consumers (the router, the map follower, the views' coverage, the KV
// port's configuration) read it, and wait on Changed to react to a change
// at once. It is safe for concurrent use; what it returns is shared and
// must not be modified.
type TopologyMirror struct {
	cli                                   *clientv3.Client
	mapsPrefix, nodesPrefix, layoutPrefix string // the keys followed (others in tests)
	coveragePrefix                        string

	mu            sync.Mutex
	maps          map[string]mirroredMap // by bucket
	mapsAt        revisionGate           // the etcd revision the maps are current to
	nodes         map[string]NodeInfo    // the nodes up; replaced, never changed in place
	last          map[string]NodeInfo    // what each node seen up published last, kept once it is down
	nodesGen      uint64                 // moves with every change of nodes
	nodesRev      int64                  // the highest mod revision of a node's key read
	nodesLoaded   bool
	layouts       map[string]int64                    // by bucket: its layout key's mod revision
	leads         map[string]map[string]mirroredLeads // by bucket and node: the nodes' LeadRecords
	layoutsLoaded bool
	covs          map[string]mirroredCoverage // by bucket
	covAt         revisionGate                // the etcd revision the coverage maps are current to
	known         []NodeStatus                // NodeList's answer; nil: to compute again
	changed       chan struct{}               // closed (and replaced) at every change
}

// mirroredMap is a bucket's map as a TopologyMirror holds it.
type mirroredMap struct {
	m   *PartitionMap
	rev int64
	err error // the map's value did not decode
}

// NewTopologyMirror returns an empty mirror; Run fills it.
func NewTopologyMirror(cli *clientv3.Client) *TopologyMirror {
	t := newTopologyMirror(cli, mapsPrefix, nodesPrefix, layoutPrefix)
	t.coveragePrefix, t.covAt.loaded = coveragePrefix, false
	return t
}

// newTopologyMirror returns an empty mirror of the maps, nodes and layout
// keys under the prefixes given, following no coverage maps (loaded, as
// none).
func newTopologyMirror(cli *clientv3.Client, mapsPrefix, nodesPrefix, layoutPrefix string) *TopologyMirror {
	return &TopologyMirror{cli: cli, mapsPrefix: mapsPrefix, nodesPrefix: nodesPrefix, layoutPrefix: layoutPrefix,
		maps: map[string]mirroredMap{}, nodes: map[string]NodeInfo{}, last: map[string]NodeInfo{}, layouts: map[string]int64{},
		leads:  map[string]map[string]mirroredLeads{},
		mapsAt: newRevisionGate(), changed: make(chan struct{}),
		covs: map[string]mirroredCoverage{}, covAt: revisionGate{loaded: true, advance: make(chan struct{})}}
}

// Run keeps the mirror current until ctx ends.
func (t *TopologyMirror) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { followBuckets(ctx, t, t.mapsPrefix, &t.maps, &t.mapsAt, decodeMirroredMap) })
	wg.Go(func() {
		followPrefix(ctx, t.cli, t.nodesPrefix, func(kvs []*mvccpb.KeyValue, rev int64) {
			nodes := map[string]NodeInfo{}
			var top int64
			for _, kv := range kvs {
				if n, ok := decodeNodeInfo(kv.Value); ok {
					nodes[strings.TrimPrefix(string(kv.Key), t.nodesPrefix)] = n
				}
				top = max(top, kv.ModRevision)
			}
			t.mu.Lock()
			t.nodesRev = max(t.nodesRev, top)
			t.nodes, t.nodesLoaded = nodes, true
			maps.Copy(t.last, nodes)
			t.nodesGen++
			t.changedLocked(true)
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
					t.nodesRev = max(t.nodesRev, ev.Kv.ModRevision)
				}
			}
			t.nodes = nodes
			maps.Copy(t.last, nodes)
			t.nodesGen++
			t.changedLocked(true)
			t.mu.Unlock()
		})
	})
	wg.Go(func() {
		followPrefix(ctx, t.cli, t.layoutPrefix, func(kvs []*mvccpb.KeyValue, rev int64) {
			t.mu.Lock()
			t.layouts, t.leads, t.layoutsLoaded = map[string]int64{}, map[string]map[string]mirroredLeads{}, true
			for _, kv := range kvs {
				t.applyLayoutKVLocked(strings.TrimPrefix(string(kv.Key), t.layoutPrefix), kv)
			}
			t.changedLocked(true)
			t.mu.Unlock()
		}, func(evs []*clientv3.Event, upTo int64) {
			if len(evs) == 0 {
				return
			}
			t.mu.Lock()
			for _, ev := range evs {
				kv := ev.Kv
				if ev.Type == clientv3.EventTypeDelete {
					kv = nil
				}
				t.applyLayoutKVLocked(strings.TrimPrefix(string(ev.Kv.Key), t.layoutPrefix), kv)
			}
			t.changedLocked(true)
			t.mu.Unlock()
		})
	})
	if t.coveragePrefix != "" {
		wg.Go(func() { t.followCoverage(ctx) })
	}
	wg.Wait()
}

// followCoverage keeps the coverage maps current until ctx ends.
func (t *TopologyMirror) followCoverage(ctx context.Context) {
	followBuckets(ctx, t, t.coveragePrefix, &t.covs, &t.covAt, decodeMirroredCoverage)
}

// followBuckets keeps *byBucket, each bucket's key under prefix as decode
// makes it, and gate, the etcd revision they are current to, until ctx
// ends; t.mu guards both, and every change wakes t's waiters.
func followBuckets[T any](ctx context.Context, t *TopologyMirror, prefix string, byBucket *map[string]T, gate *revisionGate, decode func(bucket string, kv *mvccpb.KeyValue) T) {
	followPrefix(ctx, t.cli, prefix, func(kvs []*mvccpb.KeyValue, rev int64) {
		all := map[string]T{}
		for _, kv := range kvs {
			bucket := strings.TrimPrefix(string(kv.Key), prefix)
			all[bucket] = decode(bucket, kv)
		}
		t.mu.Lock()
		*byBucket, gate.loaded = all, true
		gate.moveLocked(rev)
		t.changedLocked(true)
		t.mu.Unlock()
	}, func(evs []*clientv3.Event, upTo int64) {
		t.mu.Lock()
		for _, ev := range evs {
			bucket := strings.TrimPrefix(string(ev.Kv.Key), prefix)
			if ev.Type == clientv3.EventTypeDelete {
				delete(*byBucket, bucket)
			} else {
				(*byBucket)[bucket] = decode(bucket, ev.Kv)
			}
		}
		gate.moveLocked(upTo)
		t.changedLocked(len(evs) > 0)
		t.mu.Unlock()
	})
}

// changedLocked wakes whoever waits on Changed when something changed.
//
// REQUIRES: t.mu held.
func (t *TopologyMirror) changedLocked(changed bool) {
	if !changed {
		return
	}
	t.known = nil
	close(t.changed)
	t.changed = make(chan struct{})
}

// mirroredCoverage is a bucket's coverage map as a TopologyMirror holds
// it.
type mirroredCoverage struct {
	c   *CoverageMap
	rev int64
	err error // the value did not decode
}

// decodeMirroredCoverage decodes a coverage map's key-value.
func decodeMirroredCoverage(bucket string, kv *mvccpb.KeyValue) mirroredCoverage {
	var c CoverageMap
	if err := json.Unmarshal(kv.Value, &c); err != nil {
		return mirroredCoverage{rev: kv.ModRevision, err: fmt.Errorf("cluster: the coverage of %q: %w", bucket, err)}
	}
	return mirroredCoverage{c: &c, rev: kv.ModRevision}
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

// Changed returns a channel closed at the mirror's next change: a map, a
// node, a layout revision, or a whole prefix read again. A consumer takes
// it, then reads what it needs, then waits on it: no change is missed
// between its read and its wait.
func (t *TopologyMirror) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// Loaded reports whether the maps, the nodes and the layout keys were
// each read once (before, the mirror knows nothing, which does not mean
// etcd holds nothing).
func (t *TopologyMirror) Loaded() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.loadedLocked()
}

func (t *TopologyMirror) loadedLocked() bool {
	return t.mapsAt.loaded && t.nodesLoaded && t.layoutsLoaded && t.covAt.loaded
}

// WaitLoaded waits until the mirror is Loaded; ctx bounds the wait.
func (t *TopologyMirror) WaitLoaded(ctx context.Context) error {
	for {
		ch := t.Changed()
		if t.Loaded() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for the first read of the cluster's topology: %w", ctx.Err())
		case <-ch:
		}
	}
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

// NodesRevision returns the highest etcd revision at which a node the
// mirror read registered (wrote what it publishes): it only grows, and
// moves whenever a node's published addresses may have changed (a
// deletion, a node going down, does not move it: a configuration keeps
// listing such a node at what it published last). 0 before the nodes
// were read once.
func (t *TopologyMirror) NodesRevision() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nodesRev
}

// Node returns what the node name published; ErrNodeDown when it is not
// up (its lease expired, it never registered, or the mirror has not read
// the nodes yet).
func (t *TopologyMirror) Node(name string) (NodeInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.nodes[name]
	if !ok {
		return NodeInfo{}, fmt.Errorf("%w: %q", ErrNodeDown, name)
	}
	return n, nil
}

// NodeList returns the nodes known, as ReadStatus lists them without
// peers: the nodes up and the voters of every map, by name, each with what
// it published while it is up; a node down (Up false) with what it
// published last, when the mirror saw it up (its addresses: a
// configuration keeps listing a node down at them, as Couchbase lists a
// node that is down until it is failed over).
func (t *TopologyMirror) NodeList() []NodeStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nodeListLocked()
}

// nodeListLocked is NodeList.
//
// REQUIRES: t.mu held.
func (t *TopologyMirror) nodeListLocked() []NodeStatus {
	if t.known == nil {
		names := map[string]bool{}
		for name := range t.nodes {
			names[name] = true
		}
		for _, e := range t.maps {
			addVoters(names, e.m)
		}
		t.known = nodeStatuses(names, t.nodes)
		for i, ns := range t.known {
			if info, ok := t.last[ns.Name]; ok && !ns.Up {
				t.known[i].Info = &info
			}
		}
	}
	return t.known
}

// LayoutRevision returns bucket's layout revision as LayoutRevision in
// etcd defines it: the revision of its last BumpLayout or of its map,
// whichever is later; 0 when there is neither (or the mirror has not
// loaded).
func (t *TopologyMirror) LayoutRevision(bucket string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(t.layouts[bucket], t.maps[bucket].rev)
}

// BucketLayout is what a bucket's KV configuration lays out, read from a
// TopologyMirror at one instant (Layout): every part of it is what etcd
// held at or before Rev, so two nodes whose mirrors show one Rev show the
// same leaders.
type BucketLayout struct {
	// Map is the bucket's partition map (nil: none yet).
	Map *PartitionMap
	// Leaders are, for each of Map's partitions, the node whose
	// LeadRecord names it (ClaimedLeaders), "" where none does.
	Leaders []string
	// Nodes is NodeList's answer.
	Nodes []NodeStatus
	// Rev is the later of the bucket's LayoutRevision and the
	// NodesRevision: the configuration's revision.
	Rev int64
}

// Layout returns bucket's layout (incarnation uuid) as BucketLayout
// describes it, read under one lock: its leaders and its revision never
// come from two different moments, as separate ClaimedLeaders and
// LayoutRevision calls could (a watch delivering a record between them).
// What it returns is shared and must not be modified.
func (t *TopologyMirror) Layout(bucket, uuid string) BucketLayout {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.maps[bucket]
	l := BucketLayout{Map: e.m, Nodes: t.nodeListLocked(), Rev: max(t.layouts[bucket], e.rev, t.nodesRev)}
	if e.m != nil {
		l.Leaders = latestClaims(t.leads[bucket], uuid, len(e.m.Partitions))
	}
	return l
}

// WaitMaps waits until the maps are current to etcd revision rev or later
// (a node asked for its view share under a map revision its mirror has not
// reached yet waits so); ctx bounds the wait.
func (t *TopologyMirror) WaitMaps(ctx context.Context, rev int64) error {
	return t.mapsAt.wait(ctx, &t.mu, rev, "maps")
}

// Coverage returns bucket's views' coverage map and its mod revision (nil
// and 0 when it has none: the orchestrator has not written it yet); loaded
// is false before the coverage maps were read once.
func (t *TopologyMirror) Coverage(bucket string) (c *CoverageMap, rev int64, loaded bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.covAt.loaded {
		return nil, 0, false, nil
	}
	e := t.covs[bucket]
	return e.c, e.rev, true, e.err
}
