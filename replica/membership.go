package replica

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mayflydb/mayfly/cluster"
)

// GroupID names a Raft group on every node. Step 2b gives each (bucket,
// partition) pair one; the Host treats it as opaque.
type GroupID uint64

// NodeID is the Raft ID of the node named name: the FNV-64a hash of the
// name (never 0, raft's "none"). Every node computes the same IDs from the
// partition map's names, so no ID has to be agreed on; Host.AddGroup
// refuses a group whose voters' IDs collide.
func NodeID(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	if id := h.Sum64(); id != 0 {
		return id
	}
	return 1
}

// Resolver maps a node's name to its cluster address (HOST:PORT).
type Resolver interface {
	// Addr returns node's cluster address, or an error when it is not
	// known (yet). The transport gives each lookup a second of its own,
	// before the dial's time: one that cannot ask its source by then
	// should answer what it knows (as ClusterResolver does).
	Addr(ctx context.Context, node string) (string, error)
}

// StaticResolver is a fixed name-to-address table.
type StaticResolver map[string]string

// Addr implements Resolver.
func (s StaticResolver) Addr(_ context.Context, node string) (string, error) {
	if a, ok := s[node]; ok {
		return a, nil
	}
	return "", fmt.Errorf("replica: no address for node %q", node)
}

// ClusterResolver resolves names through etcd's /mayfly/nodes/NAME (the
// cluster address each node publishes), remembering the last address seen
// so a node whose lease just expired can still be redialled when it comes
// back at the same address.
func ClusterResolver(cli *clientv3.Client) Resolver {
	return &etcdResolver{cli: cli, seen: map[string]string{}}
}

type etcdResolver struct {
	cli  *clientv3.Client
	mu   sync.Mutex
	seen map[string]string
}

func (r *etcdResolver) Addr(ctx context.Context, node string) (string, error) {
	info, err := cluster.ReadNode(ctx, r.cli, node)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil && info.Cluster != "" {
		r.seen[node] = info.Cluster
		return info.Cluster, nil
	}
	if a, ok := r.seen[node]; ok {
		return a, nil
	}
	if err == nil {
		err = fmt.Errorf("replica: node %q publishes no cluster address", node)
	}
	return "", err
}

// MapGroup is one partition of a map whose voters include a given node.
type MapGroup struct {
	// Partition is the partition's number in the map.
	Partition int
	// Voters are its voters, from the map.
	Voters []string
}

// MapGroups lists the partitions of m of which node is a voter: the groups
// its Host runs for the bucket.
func MapGroups(m *cluster.PartitionMap, node string) []MapGroup {
	var out []MapGroup
	for p, part := range m.Partitions {
		for _, v := range part.Voters {
			if v == node {
				out = append(out, MapGroup{Partition: p, Voters: append([]string(nil), part.Voters...)})
				break
			}
		}
	}
	return out
}
