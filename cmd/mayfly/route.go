package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/memcache"
	"github.com/mayflydb/mayfly/replica"
)

// routeCacheTTL is how long the router trusts what it read of a node's
// addresses or a bucket's partition map in etcd before it reads it again.
const routeCacheTTL = 2 * time.Second

// router says where a cluster node's front doors send a key's requests
// (issue 22 step 3): to the leader of the key's partition. For a partition
// this node holds a copy of, the leader is the one its Raft group knows
// (none while the group elects: the request is refused, 503 or
// SERVER_ERROR, as before routing); for one it holds no copy of, the
// partition map's preferred leader (a request that node no longer leads is
// refused there, naming the leader, never forwarded twice), unless the map
// names this node: then its group does not run here yet (a restart) and
// the request is refused, its own copy possibly stale. Nodes'
// addresses come from etcd (nodes/NAME), cached for routeCacheTTL.
type router struct {
	eng  *engine.Engine
	h    *replica.Host
	cli  *clientv3.Client
	self string

	// ctx bounds the background refreshes of the caches (serve's
	// replication context: they end with it).
	ctx context.Context

	mu         sync.Mutex
	nodes      map[string]cachedNode
	maps       map[string]cachedMap
	refreshing map[string]bool      // cache keys ("node/NAME", "map/BUCKET") being read again
	mapReads   uint64               // map reads begun, numbering them
	layouts    map[string]cachedRev // by bucket: its layout revision
	status     *cluster.Status      // the node list of the configurations, read at statusAt
	statusAt   time.Time
}

type cachedNode struct {
	info cluster.NodeInfo
	at   time.Time
}

type cachedRev struct {
	rev int64
	at  time.Time
}

type cachedMap struct {
	m      *cluster.PartitionMap
	rev    int64  // the map's etcd mod revision
	ticket uint64 // the read's place in the order reads began (router.mapReads)
	at     time.Time
}

// newRouter returns serve's router over r, following leadership changes
// (followLayouts) until r closes.
func newRouter(eng *engine.Engine, r *replication) *router {
	rt := &router{eng: eng, h: r.h, cli: r.n.Client(), self: r.n.Name(), ctx: r.ctx,
		nodes: map[string]cachedNode{}, maps: map[string]cachedMap{}, refreshing: map[string]bool{},
		layouts: map[string]cachedRev{}}
	r.wg.Go(func() { rt.followLayouts(r.ctx) })
	return rt
}

// leader returns the node leading partition part of bucket, "" when this
// node answers its requests itself (it leads it, or the bucket has no
// partition map yet: its writes are refused here as before). A partition
// the map says this node leads but whose group does not run here yet (a
// node restarted, its groups not added) is refused with ErrNotMyVBucket:
// its copy may miss what was written while it was down.
func (r *router) leader(ctx context.Context, b *engine.Bucket, part int) (string, error) {
	bucket := b.Name()
	id := replica.BucketGroup(bucket, b.Settings().UUID, part)
	if r.h.Holds(id) {
		l, ok := r.h.Leader(id)
		switch {
		case !ok:
			return "", fmt.Errorf("%w: partition %d has no leader at the moment; retry shortly", engine.ErrNotMyVBucket, part)
		case l == r.self:
			return "", nil
		}
		return l, nil
	}
	m := r.partitionMap(ctx, bucket)
	if m == nil || part >= len(m.Partitions) {
		return "", nil
	}
	if l := m.Partitions[part].Leader; l != r.self {
		return l, nil
	}
	return "", fmt.Errorf("%w: partition %d's group is not running on this node yet; retry shortly", engine.ErrNotMyVBucket, part)
}

// keyLeader is leader for key's partition in bucket; "" too for a bucket
// this node does not have (its request is answered here: not found).
// barrier is set when this node answers the key's requests as the leader
// of its partition's group: a read takes it first (the partition's read
// index, engine.Bucket.ConfirmRead), so that a leader cut off from the
// others, or deposed without knowing it yet, answers no read from its
// memory.
func (r *router) keyLeader(ctx context.Context, bucket, key string) (l string, part int, barrier func(context.Context) error, err error) {
	b, err := r.eng.Bucket(bucket)
	if err != nil {
		return "", 0, nil, nil
	}
	part = b.PartitionOf(key)
	if l, err = r.leader(ctx, b, part); err != nil || l != "" {
		return l, part, nil, err
	}
	if r.h.Holds(replica.BucketGroup(bucket, b.Settings().UUID, part)) {
		barrier = func(ctx context.Context) error { return b.ConfirmRead(ctx, part) }
	}
	return "", part, barrier, nil
}

// node returns what node name publishes in etcd, cached. An entry older
// than routeCacheTTL is still answered while it is read again in the
// background, so a request (one on the memcached port's event loop among
// them) waits on etcd only for a node it never looked up; a node whose key
// cannot be read keeps its last known addresses, and one whose lease
// expired (down) is forgotten.
func (r *router) node(ctx context.Context, name string) (cluster.NodeInfo, error) {
	r.mu.Lock()
	c, ok := r.nodes[name]
	r.mu.Unlock()
	if ok {
		if time.Since(c.at) >= routeCacheTTL { // wall clock: cache age
			r.refresh("node/"+name, func(ctx context.Context) { _, _ = r.readNode(ctx, name) })
		}
		return c.info, nil
	}
	return r.readNode(ctx, name)
}

// readNode reads name's entry from etcd into the cache.
func (r *router) readNode(ctx context.Context, name string) (cluster.NodeInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := cluster.ReadNode(ctx, r.cli, name)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case errors.Is(err, cluster.ErrNodeDown):
		delete(r.nodes, name)
		return cluster.NodeInfo{}, err
	case err != nil:
		if c, ok := r.nodes[name]; ok {
			return c.info, nil
		}
		return cluster.NodeInfo{}, err
	}
	r.nodes[name] = cachedNode{info: info, at: time.Now()} // wall clock: cache age
	return info, nil
}

// partitionMap returns bucket's partition map, cached as node's entries
// are (an old map answered while it is read again; an old "none" is read
// again at once); nil when it has none (or etcd cannot be read and none is
// known).
func (r *router) partitionMap(ctx context.Context, bucket string) *cluster.PartitionMap {
	m, _ := r.partitionMapRev(ctx, bucket)
	return m
}

// partitionMapRev is partitionMap with the map's etcd mod revision.
func (r *router) partitionMapRev(ctx context.Context, bucket string) (*cluster.PartitionMap, int64) {
	r.mu.Lock()
	c, ok := r.maps[bucket]
	r.mu.Unlock()
	switch {
	case ok && time.Since(c.at) < routeCacheTTL: // wall clock: cache age
		return c.m, c.rev
	case ok && c.m != nil:
		r.refresh("map/"+bucket, func(ctx context.Context) { r.readMap(ctx, bucket) })
		return c.m, c.rev
	}
	// Never read, or read before the bucket had a map: a map placed since
	// must be seen now, not after another round.
	return r.readMap(ctx, bucket)
}

// readMap reads bucket's map from etcd into the cache. Reads of one
// bucket's map may run at once (requests finding none cached); what a
// read started earlier found never replaces what a later one stored.
func (r *router) readMap(ctx context.Context, bucket string) (*cluster.PartitionMap, int64) {
	r.mu.Lock()
	r.mapReads++
	ticket := r.mapReads
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	m, rev, err := cluster.ReadMap(ctx, r.cli, bucket)
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.maps[bucket]
	if err != nil || c.ticket > ticket {
		return c.m, c.rev
	}
	r.maps[bucket] = cachedMap{m: m, rev: rev, ticket: ticket, at: time.Now()} // wall clock: cache age
	return m, rev
}

// refresh runs read on a goroutine of its own unless one for key is
// running already.
func (r *router) refresh(key string, read func(ctx context.Context)) {
	r.mu.Lock()
	if r.refreshing[key] || r.ctx.Err() != nil {
		r.mu.Unlock()
		return
	}
	r.refreshing[key] = true
	r.mu.Unlock()
	go func() {
		defer func() {
			r.mu.Lock()
			delete(r.refreshing, key)
			r.mu.Unlock()
		}()
		read(r.ctx)
	}()
}

// unreachable is the error of a request whose partition's leader cannot
// be told where to go.
func unreachable(part int, node string, err error) error {
	return fmt.Errorf("%w: partition %d is led by node %s, whose address is not known: %w", engine.ErrNotMyVBucket, part, node, err)
}

// httpRoute is httpapi.Options.Route.
func (r *router) httpRoute(ctx context.Context, bucket, key string) (httpapi.Route, error) {
	l, part, barrier, err := r.keyLeader(ctx, bucket, key)
	if err != nil || l == "" {
		return httpapi.Route{Barrier: barrier}, err
	}
	info, err := r.node(ctx, l)
	if err == nil && info.HTTP == "" {
		err = errors.New("it serves no HTTP API")
	}
	if err != nil {
		return httpapi.Route{}, unreachable(part, l, err)
	}
	return httpapi.Route{Node: l, Addr: info.HTTP, From: r.self}, nil
}

// memcachedRoute is memcache.Options.Route for the memcached port's
// bucket.
func (r *router) memcachedRoute(bucket string) func(ctx context.Context, key string) (memcache.Route, error) {
	return func(ctx context.Context, key string) (memcache.Route, error) {
		l, part, barrier, err := r.keyLeader(ctx, bucket, key)
		if err != nil || l == "" {
			return memcache.Route{Barrier: barrier, Partition: part}, err
		}
		info, err := r.node(ctx, l)
		if err == nil && info.Memcached == "" {
			err = errors.New("it serves no memcached port")
		}
		if err != nil {
			return memcache.Route{}, unreachable(part, l, err)
		}
		return memcache.Route{Node: l, Addr: info.Memcached}, nil
	}
}

// topology is the KV port's and /pools' view of bucket's partitions
// (clusterconfig.Topology): every node of the cluster (its KV address),
// and each partition's leader first, then its other voters. nil when the
// bucket has no partition map yet (a single node's configuration is
// served).
func (r *router) topology(ctx context.Context, bucket string) (*clusterconfig.Topology, error) {
	b, err := r.eng.Bucket(bucket)
	if err != nil {
		return nil, nil
	}
	uuid := b.Settings().UUID
	m, mapRev := r.partitionMapRev(ctx, bucket)
	if m == nil {
		return nil, nil
	}
	st, err := r.clusterStatus(ctx)
	if err != nil {
		return nil, err
	}
	t := buildTopology(m, st, r.self, func(part int) (string, bool) {
		id := replica.BucketGroup(bucket, uuid, part)
		if !r.h.Holds(id) {
			return "", false
		}
		return r.h.Leader(id)
	})
	t.Rev = max(mapRev, r.layoutRevision(ctx, bucket))
	return t, nil
}

// layoutRevision returns bucket's layout revision (cluster.LayoutRevision),
// cached as maps are; 0 when it cannot be read and none is known (the
// map's revision then stands).
func (r *router) layoutRevision(ctx context.Context, bucket string) int64 {
	r.mu.Lock()
	c, ok := r.layouts[bucket]
	r.mu.Unlock()
	if ok {
		if time.Since(c.at) >= routeCacheTTL { // wall clock: cache age
			r.refresh("layout/"+bucket, func(ctx context.Context) { r.readLayout(ctx, bucket) })
		}
		return c.rev
	}
	return r.readLayout(ctx, bucket)
}

// readLayout reads bucket's layout revision into the cache; a revision
// never goes back (a read that began before a bump stored another).
func (r *router) readLayout(ctx context.Context, bucket string) int64 {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rev, err := cluster.LayoutRevision(ctx, r.cli, bucket)
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.layouts[bucket]
	if err != nil {
		return c.rev
	}
	r.layouts[bucket] = cachedRev{rev: max(rev, c.rev), at: time.Now()} // wall clock: cache age
	return max(rev, c.rev)
}

// layoutInterval is how often a node looks for leadership changes among
// the groups it runs.
const layoutInterval = 250 * time.Millisecond

// followLayouts records in etcd (cluster.BumpLayout) each change of
// leadership among the groups this node runs, until ctx ends, so that the
// KV port's configuration rev (Topology.Rev: the layout revision, which
// every node reads alike) grows when a partition's leader changes and an
// SDK takes the new layout. A change of leader comes with a new Raft term,
// so the sum of the terms of a bucket's groups running here tells a
// change; each node that sees one records it (several records of one
// change cost an etcd write each and nothing else). A record that fails
// is tried again at the next look.
func (r *router) followLayouts(ctx context.Context) {
	seen := map[string]uint64{} // by bucket name and UUID: the sum recorded
	t := time.NewTicker(layoutInterval)
	defer t.Stop()
	for {
		for _, b := range r.eng.Buckets() {
			name, uuid := b.Name(), b.Settings().UUID
			sum := r.termSum(name, uuid, b.NumPartitions())
			key := name + "/" + uuid
			if sum == 0 || seen[key] == sum {
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			rev, err := cluster.BumpLayout(wctx, r.cli, name, r.self)
			cancel()
			if err != nil {
				continue
			}
			seen[key] = sum
			r.mu.Lock()
			if c := r.layouts[name]; rev > c.rev {
				r.layouts[name] = cachedRev{rev: rev, at: time.Now()} // wall clock: cache age
			}
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// termSum is the sum of the Raft terms of bucket's groups running here.
func (r *router) termSum(bucket, uuid string, parts int) uint64 {
	var sum uint64
	for p := range parts {
		if t, ok := r.h.Term(replica.BucketGroup(bucket, uuid, p)); ok {
			sum += t
		}
	}
	return sum
}

// clusterStatus returns the cluster's status (its node list), cached.
func (r *router) clusterStatus(ctx context.Context) (*cluster.Status, error) {
	r.mu.Lock()
	st, at := r.status, r.statusAt
	r.mu.Unlock()
	if st != nil && time.Since(at) < routeCacheTTL { // wall clock: cache age
		return st, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	fresh, err := cluster.ReadStatus(ctx, r.cli, nil)
	if err != nil {
		if st != nil {
			return st, nil
		}
		return nil, err
	}
	r.mu.Lock()
	r.status, r.statusAt = fresh, time.Now() // wall clock: cache age
	r.mu.Unlock()
	return fresh, nil
}

// buildTopology lays out m for the configuration: the servers are every
// node the cluster status lists (a stable order: by name), known must
// name the partition's leader where this node knows it (else the map's
// preferred leader is listed first).
func buildTopology(m *cluster.PartitionMap, st *cluster.Status, self string, known func(part int) (string, bool)) *clusterconfig.Topology {
	t := &clusterconfig.Topology{Replicas: max(m.Copies-1, 0)}
	index := map[string]int{}
	for _, ns := range st.Nodes {
		index[ns.Name] = len(t.Servers)
		s := clusterconfig.Server{Name: ns.Name, ThisNode: ns.Name == self}
		if ns.Info != nil {
			s.KV, s.HTTP = ns.Info.KV, ns.Info.HTTP
		}
		t.Servers = append(t.Servers, s)
	}
	t.Map = make([][]int, len(m.Partitions))
	for p, part := range m.Partitions {
		leader := part.Leader
		if l, ok := known(p); ok {
			leader = l
		}
		row := []int{-1}
		if i, ok := index[leader]; ok {
			row[0] = i
		}
		for _, v := range part.Voters {
			if i, ok := index[v]; ok && v != leader {
				row = append(row, i)
			}
		}
		for len(row) < t.Replicas+1 {
			row = append(row, -1)
		}
		t.Map[p] = row
	}
	return t
}

// httpRouteFunc is httpRoute as httpapi.Options.Route, nil without a
// cluster.
func (r *router) httpRouteFunc() func(context.Context, string, string) (httpapi.Route, error) {
	if r == nil {
		return nil
	}
	return r.httpRoute
}

// memcachedRouteFunc is memcachedRoute, nil without a cluster.
func (r *router) memcachedRouteFunc(bucket string) func(context.Context, string) (memcache.Route, error) {
	if r == nil {
		return nil
	}
	return r.memcachedRoute(bucket)
}

// topologyFunc is topology as the front doors take it, nil without a
// cluster.
func (r *router) topologyFunc() func(context.Context, string) (*clusterconfig.Topology, error) {
	if r == nil {
		return nil
	}
	return r.topology
}
