package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/memcache"
	"github.com/mayflydb/mayfly/replica"
)

// router says where a cluster node's front doors send a key's requests
// (issue 22 step 3): to the leader of the key's partition. For a partition
// this node holds a copy of, the leader is the one its Raft group knows
// (while it knows none, as a node just restarted, the node whose
// published lead record names the partition, if another live one, see
// claimed; else the request is refused, 503 or SERVER_ERROR, to be
// retried); for one it holds no copy of, the
// partition map's preferred leader, or, while that node is not live, a
// leader learned from a refusal or another live voter (see pick and
// reroute.go: a node that does not lead refuses a forwarded request,
// naming the leader, and the front door follows that name once), unless
// the map names this node: then its group does not run here yet (a
// restart) and the request is refused, its own copy possibly stale. The
// maps, the nodes' addresses and the layout revisions come from the
// node's cluster.TopologyMirror: no etcd read per request.
type router struct {
	eng    *engine.Engine
	h      *replica.Host
	cli    *clientv3.Client
	self   string
	mirror *cluster.TopologyMirror
	mem    routeMemory
	// layoutPoll, when set, replaces layoutInterval (tests: a change
	// recorded without the poll is recorded at its replica host's word).
	layoutPoll time.Duration
}

// mirrorWait bounds how long a request waits for the mirror's first load
// (a node just started) before it is refused, to be retried.
const mirrorWait = 2 * time.Second

// newRouter returns serve's router over r, following leadership changes
// (followLayouts) until r closes.
func newRouter(eng *engine.Engine, r *replication) *router {
	rt := &router{eng: eng, h: r.h, cli: r.n.Client(), self: r.n.Name(), mirror: r.mirror}
	r.wg.Go(func() { rt.followLayouts(r.ctx) })
	r.wg.Go(func() { rt.followNodes(r.ctx) })
	return rt
}

// leader returns the node leading partition part of bucket, "" when this
// node answers its requests itself (it leads it, or the bucket has no
// partition map yet: its writes are refused here as before). A partition
// whose group here knows no leader, or that the map says this node leads
// but whose group does not run here yet (a node restarted, its groups not
// added), goes to the live node whose published lead record names it
// (claimed), or to the leader the group learns meanwhile, waiting for
// either up to an election timeout (awaitLeader); with neither, it is
// refused with ErrNotMyVBucket (this node's copy may miss what was
// written while it was down).
func (r *router) leader(ctx context.Context, b *engine.Bucket, part int) (string, error) {
	bucket, uuid := b.Name(), b.Settings().UUID
	id := replica.BucketGroup(bucket, uuid, part)
	if r.h.Holds(id) {
		l, ok := r.h.Leader(id)
		if !ok {
			l, ok = r.awaitLeader(ctx, bucket, uuid, id, part)
		}
		switch {
		case !ok:
			return "", fmt.Errorf("%w: partition %d has no leader at the moment; retry shortly", engine.ErrNotMyVBucket, part)
		case l == r.self:
			return "", nil
		}
		return l, nil
	}
	m, err := r.partitionMap(ctx, bucket)
	if err != nil {
		return "", err
	}
	if m == nil || part >= len(m.Partitions) {
		return "", nil
	}
	if p := m.Partitions[part]; p.Leader != r.self {
		return r.pick(bucket, part, p), nil
	}
	if c := r.claimed(bucket, uuid, part); c != "" {
		return c, nil
	}
	return "", fmt.Errorf("%w: partition %d's group is not running on this node yet; retry shortly", engine.ErrNotMyVBucket, part)
}

// claimed returns the node the cluster's published lead records
// (cluster.TopologyMirror.ClaimedLeader) name as partition part's leader,
// when it is another node than this one and live (up in the mirror and
// not found unreachable lately); else "". leader sends a partition's
// requests there while this node's own copy knows no leader: a node just
// restarted, whose groups have not heard from the leader the others
// elected while it was down (a quiet group sends no heartbeat until it
// has something to do), or whose groups are not added yet. The node named
// carries the request out if it still leads; else it refuses it before
// proposing anything (naming the leader it knows, followed once, or none:
// the refusal is the answer), so a record gone stale costs a hop, never
// a write applied twice.
func (r *router) claimed(bucket, uuid string, part int) string {
	c := r.mirror.ClaimedLeader(bucket, uuid, part)
	if c == "" || c == r.self {
		return ""
	}
	now := time.Now() // wall clock: network reachability
	r.mem.mu.Lock()
	defer r.mem.mu.Unlock()
	if !r.liveLocked(c, now) {
		return ""
	}
	return c
}

// leaderPoll is how often awaitLeader looks.
const leaderPoll = 10 * time.Millisecond

// awaitLeader returns where a request for partition part of bucket goes
// while this node's group id of it knows no leader: the node the
// published lead records name (claimed), or the leader the group learns,
// whichever comes first, waiting for either up to an election timeout
// within ctx (a leadership transfer: the old leader stepped down, the new
// one is not heard of yet, nor published); false when neither came.
func (r *router) awaitLeader(ctx context.Context, bucket, uuid string, id replica.GroupID, part int) (string, bool) {
	loaded := r.loaded(ctx) == nil
	until := time.Now().Add(r.h.ElectionTimeout()) // wall clock: network timing
	for {
		if l, ok := r.h.Leader(id); ok {
			return l, true
		}
		if loaded {
			if c := r.claimed(bucket, uuid, part); c != "" {
				return c, true
			}
		}
		if time.Until(until) < leaderPoll {
			return "", false
		}
		t := time.NewTimer(leaderPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", false
		case <-t.C:
		}
	}
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

// loaded waits (up to mirrorWait, within ctx) for the mirror's first
// load; ErrNotMyVBucket, to be retried, when it has not loaded.
func (r *router) loaded(ctx context.Context) error {
	if r.mirror.Loaded() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, mirrorWait)
	defer cancel()
	if err := r.mirror.WaitLoaded(ctx); err != nil {
		return fmt.Errorf("%w: this node has not read the cluster's partition maps yet; retry shortly: %w", engine.ErrNotMyVBucket, err)
	}
	return nil
}

// partitionMap returns bucket's partition map as the mirror holds it, nil
// when it has none (or its value does not decode: the request is answered
// here, as for a bucket not placed yet).
func (r *router) partitionMap(ctx context.Context, bucket string) (*cluster.PartitionMap, error) {
	if err := r.loaded(ctx); err != nil {
		return nil, err
	}
	m, _, _, _ := r.mirror.Map(bucket)
	return m, nil
}

// unreachable is the error of a request whose partition's leader cannot
// be told where to go.
func unreachable(part int, node string, err error) error {
	return fmt.Errorf("%w: partition %d is led by node %s, whose address is not known: %w", engine.ErrNotMyVBucket, part, node, err)
}

// httpRoute is httpapi.Options.Route. A key this node answers itself as
// its partition's leader has a Reroute too: leadership may move before
// the request is carried out, and this node's replication then refuses it
// naming the new leader (engine.NotMyVBucketError), which the front door
// follows once (see follow).
func (r *router) httpRoute(ctx context.Context, bucket, key string) (httpapi.Route, error) {
	l, part, barrier, err := r.keyLeader(ctx, bucket, key)
	if err != nil || l == "" {
		rt := httpapi.Route{Barrier: barrier}
		if barrier != nil {
			rt.Reroute = func(ctx context.Context, named string) (httpapi.Route, bool) {
				next := r.follow(ctx, bucket, key, part, named)
				if next == "" {
					return httpapi.Route{}, false
				}
				rt, err := r.httpRouteTo(bucket, key, part, next)
				return rt, err == nil
			}
		}
		return rt, err
	}
	return r.httpRouteTo(bucket, key, part, l)
}

// follow says where a request for key (partition part of bucket) goes
// that this node's own replication refused naming named as the
// partition's leader (a route without Addr asked its Reroute): named, when
// it is live and not this node (remembered as reroute remembers a
// forward's refusal), else "".
func (r *router) follow(ctx context.Context, bucket, key string, part int, named string) string {
	if named == "" {
		return ""
	}
	return r.reroute(ctx, bucket, key, part, r.self, named)
}

// httpRouteTo is the HTTP route of key (in partition part of bucket) to
// node l, with its Reroute.
func (r *router) httpRouteTo(bucket, key string, part int, l string) (httpapi.Route, error) {
	info, err := r.mirror.Node(l)
	if err == nil && info.HTTP == "" {
		err = errors.New("it serves no HTTP API")
	}
	if err != nil {
		return httpapi.Route{}, unreachable(part, l, err)
	}
	return httpapi.Route{Node: l, Addr: info.HTTP, From: r.self, Gone: r.goneSignal(l), Reroute: func(ctx context.Context, named string) (httpapi.Route, bool) {
		next := r.reroute(ctx, bucket, key, part, l, named)
		if next == "" {
			return httpapi.Route{}, false
		}
		rt, err := r.httpRouteTo(bucket, key, part, next)
		return rt, err == nil
	}}, nil
}

// memcachedRoute is memcache.Options.Route for the memcached port's
// bucket.
func (r *router) memcachedRoute(bucket string) func(ctx context.Context, key string) (memcache.Route, error) {
	return func(ctx context.Context, key string) (memcache.Route, error) {
		l, part, barrier, err := r.keyLeader(ctx, bucket, key)
		if err != nil || l == "" {
			rt := memcache.Route{Barrier: barrier, Partition: part}
			if barrier != nil { // as httpRoute's
				rt.Reroute = func(ctx context.Context, named string) (memcache.Route, bool) {
					next := r.follow(ctx, bucket, key, part, named)
					if next == "" {
						return memcache.Route{}, false
					}
					rt, err := r.memcachedRouteTo(bucket, key, part, next)
					return rt, err == nil
				}
			}
			return rt, err
		}
		return r.memcachedRouteTo(bucket, key, part, l)
	}
}

// memcachedRouteTo is the memcached route of key (in partition part of
// bucket) to node l, with its Reroute.
func (r *router) memcachedRouteTo(bucket, key string, part int, l string) (memcache.Route, error) {
	info, err := r.mirror.Node(l)
	if err == nil && info.Memcached == "" {
		err = errors.New("it serves no memcached port")
	}
	if err != nil {
		return memcache.Route{}, unreachable(part, l, err)
	}
	return memcache.Route{Node: l, Addr: info.Memcached, Gone: r.goneSignal(l), Reroute: func(ctx context.Context, named string) (memcache.Route, bool) {
		next := r.reroute(ctx, bucket, key, part, l, named)
		if next == "" {
			return memcache.Route{}, false
		}
		rt, err := r.memcachedRouteTo(bucket, key, part, next)
		return rt, err == nil
	}}, nil
}

// reroute says where a request for key (partition part of bucket)
// forwarded to node from goes next: named is "" when from could not be
// reached (it is avoided for a while, and the key routed again), else the
// node from's refusal names as the partition's leader (remembered for the
// partition, see learn). "" when there is nowhere else: the request is
// answered with what the forward met.
//
// A refusal naming this node (leadership handed back here while the
// request waited at the old leader: a node just restarted, the map's
// preferred leader) is followed when this node now leads the partition:
// the request goes to this node's own port, as a forwarded request,
// carried out here and never forwarded again.
func (r *router) reroute(ctx context.Context, bucket, key string, part int, from, named string) string {
	if named == r.self && from != r.self {
		if r.leadsHere(bucket, part) {
			return r.self
		}
		return ""
	}
	if named != "" {
		if named == from || !r.learn(bucket, part, named) {
			return ""
		}
		return named
	}
	r.unreachableNode(from)
	l, _, _, err := r.keyLeader(ctx, bucket, key)
	if err != nil || l == from {
		return ""
	}
	return l
}

// leadsHere reports whether this node's group of partition part of
// bucket knows this node as its leader.
func (r *router) leadsHere(bucket string, part int) bool {
	b, err := r.eng.Bucket(bucket)
	if err != nil {
		return false
	}
	l, ok := r.h.Leader(replica.BucketGroup(bucket, b.Settings().UUID, part))
	return ok && l == r.self
}

// topology is the KV port's and /pools' view of bucket's partitions
// (clusterconfig.Topology): every node the mirror knows (its KV
// address), each partition's leader first, then its other voters, under
// the bucket's layout revision. The leader is the node whose published
// record names the partition (cluster.TopologyMirror.Layout: the latest
// record, followLayouts), else the map's preferred leader: what etcd held
// at the configuration's rev, never this node's own Raft knowledge, so
// that two nodes' configurations at one rev name the same leaders (an SDK
// takes a configuration only when its rev is higher than the one it
// holds: one holding a stale layout at rev N ignores every other layout
// at N). A change of leader shows once its new leader records it, at
// once (followLayouts wakes at the change), with a move of the rev. nil
// when the bucket has no partition map yet (a single node's configuration
// is served). Its rev is the later of the bucket's layout revision and
// the nodes' (cluster.TopologyMirror.NodesRevision), so it moves when a
// node registers with other ports. For the bucket "" it is the cluster's
// servers and the nodes' revision, without a map (the configuration of a
// connection that selected no bucket, nodeServices).
func (r *router) topology(ctx context.Context, bucket string) (*clusterconfig.Topology, error) {
	if bucket == "" {
		if err := r.loaded(ctx); err != nil {
			return nil, err
		}
		t := &clusterconfig.Topology{Rev: r.mirror.NodesRevision()}
		t.Servers, _ = topologyServers(r.mirror.NodeList(), r.self)
		return t, nil
	}
	b, err := r.eng.Bucket(bucket)
	if err != nil {
		return nil, nil
	}
	if err := r.loaded(ctx); err != nil {
		return nil, err
	}
	l := r.mirror.Layout(bucket, b.Settings().UUID)
	if l.Map == nil {
		return nil, nil
	}
	t := buildTopology(l.Map, l.Nodes, r.self, func(part int) (string, bool) {
		return l.Leaders[part], l.Leaders[part] != ""
	})
	t.Rev = l.Rev
	return t, nil
}

// layoutInterval is how often a node looks for leadership changes among
// the groups it runs besides the changes its replica.Host tells of
// (replica.Host.LeaderChanges): a record that failed is tried again then.
const layoutInterval = 250 * time.Millisecond

// layoutGap is the least time between two looks of followLayouts: the
// changes told meanwhile (a storm of elections, a rebalance moving many
// leaderships) are recorded together, at most one etcd write per bucket
// per gap.
const layoutGap = 50 * time.Millisecond

// followLayouts records in etcd (cluster.PublishLeads) each change of the
// partitions this node's groups lead, until ctx ends: the partitions it
// leads now, with a move of the bucket's layout revision in the same
// write, so that the KV port's configuration (topology: the leaders the
// records name, under the layout revision, which every node reads alike)
// names a partition's new leader under a new rev, which an SDK takes. It
// looks when the replica host tells of a change of leader
// (replica.Host.LeaderChanges), at most once a layoutGap, and every
// layoutInterval (router.layoutPoll in tests). A leader records a
// partition once it leads it (not at its campaign); what it records is
// the partitions led and their terms' sum, so that leading one again at a
// new term (another node led it between two looks, and recorded it) is
// recorded again. A node that only follows records nothing: the
// partitions it leads did not change. A record that fails is tried again
// at the next look.
func (r *router) followLayouts(ctx context.Context) {
	type look struct {
		sum uint64 // the terms of the partitions led
		led []int  // the partitions led
	}
	seen := map[string]look{} // by bucket name and UUID: what was recorded
	t := time.NewTicker(cmp.Or(r.layoutPoll, layoutInterval))
	defer t.Stop()
	for {
		last := time.Now() // wall clock: network timing
		open := map[string]bool{}
		for _, b := range r.eng.Buckets() {
			name, uuid := b.Name(), b.Settings().UUID
			running, sum, led := r.leadership(name, uuid, b.NumPartitions())
			key := name + "/" + uuid
			open[key] = true
			if was, ok := seen[key]; ok && was.sum == sum && slices.Equal(was.led, led) || !ok && !running {
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := cluster.PublishLeads(wctx, r.cli, name, uuid, r.self, led)
			cancel()
			if err == nil {
				seen[key] = look{sum, led}
			}
		}
		for key := range seen {
			if !open[key] {
				delete(seen, key) // a bucket deleted
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.h.LeaderChanges():
			if wait := layoutGap - time.Since(last); wait > 0 {
				gap := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					gap.Stop()
					return
				case <-gap.C:
				}
			}
		}
	}
}

// leadership says whether any of bucket's groups runs here, and returns
// the partitions among them this node leads and the sum of their Raft
// terms.
func (r *router) leadership(bucket, uuid string, parts int) (running bool, sum uint64, led []int) {
	for p := range parts {
		id := replica.BucketGroup(bucket, uuid, p)
		if t, ok := r.h.Term(id); ok {
			running = true
			if l, ok := r.h.Leader(id); ok && l == r.self {
				sum += t
				led = append(led, p)
			}
		}
	}
	return running, sum, led
}

// buildTopology lays out m for the configuration: the servers are the
// nodes of nodes, the cluster's node list (a stable order: by name), that
// have a KV address (a node down at the one it published last), and this
// node; known must name the partition's leader where this node knows it
// (else the map's preferred leader is listed first); each row has
// numReplicas+1 entries, -1 where a copy's node is not listed.
//
// A node without a KV address is left out rather than listed without a
// port: an SDK (gocbcore) makes its list of KV servers of the nodesExt
// entries that have a KV port, and reads vBucketMap's numbers as indexes
// in that list, so such an entry shifted every later server's partitions
// onto the next server (or past the list's end).
func buildTopology(m *cluster.PartitionMap, nodes []cluster.NodeStatus, self string, known func(part int) (string, bool)) *clusterconfig.Topology {
	t := &clusterconfig.Topology{Replicas: max(m.Copies-1, 0)}
	var index map[string]int
	t.Servers, index = topologyServers(nodes, self)
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
		// A leader the map does not list among the voters (its copy
		// moving away) leaves one voter too many for numReplicas.
		t.Map[p] = row[:t.Replicas+1]
	}
	return t
}

// topologyServers are the servers of a configuration (see buildTopology):
// the nodes of nodes that have a KV address, and self, each with the
// addresses and services it published (a node down: last), and their
// indexes by name.
func topologyServers(nodes []cluster.NodeStatus, self string) ([]clusterconfig.Server, map[string]int) {
	var servers []clusterconfig.Server
	index := map[string]int{}
	for _, ns := range nodes {
		s := clusterconfig.Server{Name: ns.Name, ThisNode: ns.Name == self, Down: !ns.Up && ns.Name != self}
		if ns.Info != nil {
			s.KV, s.HTTP, s.Services = ns.Info.KV, ns.Info.HTTP, clusterconfig.ServicesOf(ns.Info.Services)
		}
		if s.KV == "" && !s.ThisNode {
			continue
		}
		index[ns.Name] = len(servers)
		servers = append(servers, s)
	}
	return servers, index
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
