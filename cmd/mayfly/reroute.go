package main

import (
	"context"
	"sync"
	"time"

	"github.com/mayflydb/mayfly/cluster"
)

// Where a partition this node holds no copy of is actually led. The map's
// preferred leader is where its requests go while all is well; while that
// node is cut off or dead, and until the orchestrator fails it over (tens
// of seconds), the partition's surviving voters elect a leader of their
// own within seconds. The router then sends the partition's requests to a
// live voter instead (one that is up in the mirror and was not found
// unreachable), and learns the real leader from that voter's refusal:
// a voter that does not lead refuses a forwarded request naming its Raft
// group's leader, the front door follows that name once (Route.Reroute)
// and the router remembers it for the partition for a short while, so
// that the partition's next requests go there directly. No request is
// forwarded twice by a node: the first node makes every hop (at most
// three sends: the target, another voter when the target could not be
// reached, the leader a refusal names).

// learnedFor is how long a leader learned from a refusal is remembered
// for its partition at most; a change of the bucket's map or layout
// revision (a new map, a change of leadership seen by any node) drops it
// at once.
const learnedFor = 10 * time.Second

// downFor is how long a node a forward could not reach is avoided (unless
// nothing else is left): its lease expires within a few seconds when it
// is really gone, and the mirror then says so itself.
const downFor = 5 * time.Second

// routeMemory is what a router learned beyond the mirror: leaders named
// by refusals, per partition, and nodes a forward could not reach. Its
// zero value is empty and ready; it is safe for concurrent use.
type routeMemory struct {
	mu      sync.Mutex
	learned map[partKey]learnedLeader
	down    map[string]time.Time     // node → until when it is avoided
	gone    map[string]chan struct{} // node → closed once it is not up in the mirror
}

// partKey names a bucket's partition.
type partKey struct {
	bucket string
	part   int
}

// learnedLeader is a partition's leader as a refusal named it, under the
// bucket's layout revision then.
type learnedLeader struct {
	node   string
	layout int64
	until  time.Time
}

// pick returns where a request for partition part of bucket (p in the
// map, this node holding no copy of it) goes: the leader learned for it,
// while its bucket's layout revision has not moved, if that node is live;
// else the map's preferred leader if live; else the first live voter;
// else the preferred leader all the same (the forward fails, saying so).
func (r *router) pick(bucket string, part int, p cluster.Partition) string {
	now := time.Now() // wall clock: network reachability
	layout := r.mirror.LayoutRevision(bucket)
	mem := &r.mem
	mem.mu.Lock()
	defer mem.mu.Unlock()
	k := partKey{bucket, part}
	if l, ok := mem.learned[k]; ok {
		if l.layout == layout && now.Before(l.until) && r.liveLocked(l.node, now) {
			return l.node
		}
		delete(mem.learned, k)
	}
	if r.liveLocked(p.Leader, now) {
		return p.Leader
	}
	for _, v := range p.Voters {
		if v != p.Leader && v != r.self && r.liveLocked(v, now) {
			return v
		}
	}
	return p.Leader
}

// liveLocked reports whether node is up in the mirror and was not found
// unreachable lately.
//
// REQUIRES: r.mem.mu held.
func (r *router) liveLocked(node string, now time.Time) bool {
	if until, ok := r.mem.down[node]; ok {
		if now.Before(until) {
			return false
		}
		delete(r.mem.down, node)
	}
	_, err := r.mirror.Node(node)
	return err == nil
}

// unreachableNode records that a forward could not reach node: it is
// avoided for downFor, and forgotten as any partition's learned leader.
func (r *router) unreachableNode(node string) {
	now := time.Now() // wall clock: network reachability
	mem := &r.mem
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if mem.down == nil {
		mem.down = map[string]time.Time{}
	}
	mem.down[node] = now.Add(downFor)
	for k, l := range mem.learned {
		if l.node == node {
			delete(mem.learned, k)
		}
	}
}

// learn records node as the leader of partition part of bucket, named by
// a refusal; false (nothing recorded) when node is this node or is not
// live: a name the first node cannot use.
func (r *router) learn(bucket string, part int, node string) bool {
	if node == r.self {
		return false
	}
	now := time.Now() // wall clock: network reachability
	layout := r.mirror.LayoutRevision(bucket)
	mem := &r.mem
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if !r.liveLocked(node, now) {
		return false
	}
	if mem.learned == nil {
		mem.learned = map[partKey]learnedLeader{}
	}
	mem.learned[partKey{bucket, part}] = learnedLeader{node: node, layout: layout, until: now.Add(learnedFor)}
	return true
}

// closedChan is a channel closed from the start.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// goneSignal returns a channel closed once node is not up in the mirror
// (its lease expired: cut off, or dead), so that a forward in flight to it
// is abandoned rather than waited out (followNodes closes it); closed
// already when node is not up now.
func (r *router) goneSignal(node string) <-chan struct{} {
	mem := &r.mem
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if _, err := r.mirror.Node(node); err != nil {
		return closedChan
	}
	c, ok := mem.gone[node]
	if !ok {
		if mem.gone == nil {
			mem.gone = map[string]chan struct{}{}
		}
		c = make(chan struct{})
		mem.gone[node] = c
	}
	return c
}

// followNodes closes the goneSignal of each node as it leaves the
// mirror's nodes up, until ctx ends.
func (r *router) followNodes(ctx context.Context) {
	for {
		changed := r.mirror.Changed()
		nodes, _, loaded := r.mirror.Nodes()
		if loaded {
			mem := &r.mem
			mem.mu.Lock()
			for name, c := range mem.gone {
				if _, up := nodes[name]; !up {
					close(c)
					delete(mem.gone, name)
				}
			}
			mem.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
