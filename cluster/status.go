package cluster

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// NodeStatus is a node as the status shows it.
type NodeStatus struct {
	// Name is the node's name.
	Name string `json:"name"`
	// Up says the node holds its lease.
	Up bool `json:"up"`
	// Info is what the node published, while it is up.
	Info *NodeInfo `json:"info,omitempty"`
}

// BucketStatus is a bucket's partition map summed up.
type BucketStatus struct {
	// Name is the bucket's name.
	Name string `json:"name"`
	// ReplicaNumber is its replicaNumber.
	ReplicaNumber int `json:"replicaNumber"`
	// Placed says the orchestrator has written its map.
	Placed bool `json:"placed"`
	// Partitions is how many partitions (numVBuckets) the bucket has.
	Partitions int `json:"partitions"`
	// Leads is, per node, how many partitions it is the preferred leader
	// of (the map's: where leadership goes back to once the node is up
	// and caught up); Holds how many copies it holds.
	Leads map[string]int `json:"leads"`
	Holds map[string]int `json:"holds"`
	// Leading is, per node up, how many partitions its Raft groups lead
	// now, as it reports them (its LeadRecord): it differs from Leads
	// while a node is down (its partitions elected other leaders at
	// once) or leadership is on its way back to the map's leader.
	Leading map[string]int `json:"leading"`
	// Degraded lists the degraded partitions.
	Degraded []int `json:"degraded"`
	// Shed is, per node, the partitions whose copies a lowered
	// replicaNumber takes from it (Partition.Shed): each leaves once the
	// conf change removing it has committed, or its leader reports it
	// applied (ClearShed).
	Shed map[string][]int `json:"shed,omitempty"`
	// Leaderless lists the partitions no node up reports leading (its
	// LeadRecord, published when the leaderships of its groups change):
	// their groups are electing a leader, as after the cluster forms or a
	// node dies, and a write there is answered "no leader at the moment;
	// retry shortly" until one is elected and known.
	Leaderless []int `json:"leaderless,omitempty"`
	// Lagging lists the replicas that do not keep up, as the leaders that
	// are up report them (each a few seconds old at most).
	Lagging []Lagging `json:"lagging,omitempty"`
	// Covers is, per node, how many partitions its view indexes answer
	// for (the coverage map's coverer); empty before the orchestrator
	// wrote the bucket's coverage map.
	Covers map[string]int `json:"covers,omitempty"`
	// CoverMoves lists the partitions whose coverage is moving: their
	// next coverer indexes them and takes over once caught up.
	CoverMoves []CoverMove `json:"coverMoves,omitempty"`
}

// CoverMove is a partition whose view coverage moves from one node to
// another.
type CoverMove struct {
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
}

// Status is the cluster as `mayfly cluster status` shows it.
type Status struct {
	// Nodes are the nodes known: listed peers, registered nodes and voters
	// of the maps, by name.
	Nodes []NodeStatus `json:"nodes"`
	// Orchestrator is the elected orchestrator's name, "" when there is
	// none.
	Orchestrator string `json:"orchestrator"`
	// Buckets are the defined buckets, by name.
	Buckets []BucketStatus `json:"buckets"`
	// ThisNode names the node that serves the status, when a node does
	// (GET /pools/default's "mayflyCluster"); ReadStatus leaves it empty.
	ThisNode string `json:"thisNode,omitempty"`
}

// Balanced is Couchbase's "balanced" (GET /pools/default) for the status:
// every bucket placed (the orchestrator has written its map), and none
// with a partition degraded, without a leader, or with a replica lagging.
func (st *Status) Balanced() bool {
	for _, bs := range st.Buckets {
		if !bs.Placed || len(bs.Degraded) > 0 || len(bs.Lagging) > 0 || len(bs.Leaderless) > 0 {
			return false
		}
	}
	return true
}

// ReadStatus reads the cluster's status; peers are node names to show
// even when they never registered.
func ReadStatus(ctx context.Context, cli *clientv3.Client, peers []string) (*Status, error) {
	st, err := readState(ctx, cli)
	if err != nil {
		return nil, err
	}
	orch, err := cli.Get(ctx, orchestratorPrefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return nil, fmt.Errorf("cluster: reading the orchestrator: %w", err)
	}
	out := &Status{}
	if len(orch.Kvs) > 0 {
		out.Orchestrator = string(orch.Kvs[0].Value)
	}
	known := map[string]bool{}
	for _, p := range peers {
		known[p] = true
	}
	for name := range st.nodes {
		known[name] = true
	}
	for _, m := range st.maps {
		addVoters(known, m)
	}
	out.Nodes = nodeStatuses(known, st.nodes)
	isUp := func(n string) bool { _, ok := st.nodes[n]; return ok }
	for _, name := range slices.Sorted(maps.Keys(st.buckets)) {
		def := st.buckets[name]
		bs := BucketStatus{Name: name, ReplicaNumber: def.Replicas(), Partitions: def.Partitions(), Leads: map[string]int{}, Holds: map[string]int{}}
		if m := st.maps[name]; m != nil {
			bs.Placed = true
			leaders, err := readRaftLeaders(ctx, cli, name, m.UUID, len(m.Partitions), isUp)
			if err != nil {
				return nil, err
			}
			bs.Leading = map[string]int{}
			for i, l := range leaders {
				if l == "" {
					bs.Leaderless = append(bs.Leaderless, i)
					continue
				}
				bs.Leading[l]++
			}
			for i, p := range m.Partitions {
				bs.Leads[p.Leader]++
				for _, v := range p.Voters {
					bs.Holds[v]++
				}
				if p.Degraded {
					bs.Degraded = append(bs.Degraded, i)
				}
				for _, n := range p.Shed {
					if bs.Shed == nil {
						bs.Shed = map[string][]int{}
					}
					bs.Shed[n] = append(bs.Shed[n], i)
				}
			}
		}
		if c := st.covs[name]; c != nil {
			bs.Covers = map[string]int{}
			for i, e := range c.Partitions {
				if e.Coverer != "" {
					bs.Covers[e.Coverer]++
				}
				if e.Next != "" {
					bs.CoverMoves = append(bs.CoverMoves, CoverMove{Partition: i, From: e.Coverer, To: e.Next})
				}
			}
		}
		out.Buckets = append(out.Buckets, bs)
	}
	lags, err := readLag(ctx, cli)
	if err != nil {
		return nil, err
	}
	for _, leader := range slices.Sorted(maps.Keys(lags)) {
		if _, up := st.nodes[leader]; !up {
			continue // its report is as old as its death
		}
		for _, l := range lags[leader] {
			for i := range out.Buckets {
				if out.Buckets[i].Name == l.Bucket {
					out.Buckets[i].Lagging = append(out.Buckets[i].Lagging, l)
				}
			}
		}
	}
	return out, nil
}

// addVoters adds the voters of m's partitions (none for a nil m) to names.
func addVoters(names map[string]bool, m *PartitionMap) {
	if m == nil {
		return
	}
	for _, p := range m.Partitions {
		for _, v := range p.Voters {
			names[v] = true
		}
	}
}

// nodeStatuses lists names by name, each up with what it published when
// up has it.
func nodeStatuses(names map[string]bool, up map[string]NodeInfo) []NodeStatus {
	var out []NodeStatus
	for _, name := range slices.Sorted(maps.Keys(names)) {
		ns := NodeStatus{Name: name}
		if info, ok := up[name]; ok {
			ns.Up, ns.Info = true, &info
		}
		out = append(out, ns)
	}
	return out
}

// Node is the named node's status, and whether it is known.
func (s *Status) Node(name string) (NodeStatus, bool) {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return NodeStatus{}, false
}

// Bucket is the named bucket's status, and whether it is defined.
func (s *Status) Bucket(name string) (BucketStatus, bool) {
	for _, b := range s.Buckets {
		if b.Name == name {
			return b, true
		}
	}
	return BucketStatus{}, false
}

// WriteText writes the status for a person to read.
func (s *Status) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString("Documents are replicated, a Raft group per partition; any node takes any request and routes it to the partition's leader.\n")
	orch := s.Orchestrator
	if orch == "" {
		orch = "(none elected)"
	}
	fmt.Fprintf(&b, "orchestrator: %s\nnodes:\n", orch)
	for _, n := range s.Nodes {
		state := "down"
		if n.Up {
			state = "up"
		}
		fmt.Fprintf(&b, "  %-12s %-4s", n.Name, state)
		if n.Info != nil {
			fmt.Fprintf(&b, " cluster %s", n.Info.Cluster)
			if n.Info.HTTP != "" {
				fmt.Fprintf(&b, "  http %s", n.Info.HTTP)
			}
			if n.Info.EtcdClient != "" {
				b.WriteString("  etcd member")
			}
			if n.Info.Version != "" {
				fmt.Fprintf(&b, "  version %s", n.Info.Version)
			}
		}
		b.WriteString("\n")
	}
	for _, bs := range s.Buckets {
		fmt.Fprintf(&b, "bucket %s (replicaNumber %d):", bs.Name, bs.ReplicaNumber)
		if !bs.Placed {
			b.WriteString(" partitions not placed yet\n")
			continue
		}
		fmt.Fprintf(&b, " %d partitions, %d degraded\n", bs.Partitions, len(bs.Degraded))
		for _, n := range slices.Sorted(maps.Keys(bs.Holds)) {
			fmt.Fprintf(&b, "  %-12s leads %4d  holds %4d", n, bs.Leads[n], bs.Holds[n])
			if bs.Covers != nil {
				fmt.Fprintf(&b, "  views cover %4d", bs.Covers[n])
			}
			if bs.Leading != nil && bs.Leading[n] != bs.Leads[n] {
				fmt.Fprintf(&b, "  (leading %d now)", bs.Leading[n])
			}
			b.WriteString("\n")
		}
		if len(bs.CoverMoves) > 0 {
			moves := map[string][]int{}
			for _, m := range bs.CoverMoves {
				from := m.From
				if from == "" {
					from = "(none)"
				}
				k := from + " to " + m.To
				moves[k] = append(moves[k], m.Partition)
			}
			for _, k := range slices.Sorted(maps.Keys(moves)) {
				fmt.Fprintf(&b, "  views moving from %s (catching up) in %d partitions: %s\n", k, len(moves[k]), shortRanges(moves[k], 12))
			}
		}
		if len(bs.Degraded) > 0 {
			fmt.Fprintf(&b, "  degraded: %s\n", ranges(bs.Degraded))
		}
		if len(bs.Leaderless) > 0 {
			fmt.Fprintf(&b, "  no leader yet (an election under way; writes there answer \"retry shortly\") in %d partitions: %s\n", len(bs.Leaderless), shortRanges(bs.Leaderless, 12))
		}
		for _, n := range slices.Sorted(maps.Keys(bs.Shed)) {
			fmt.Fprintf(&b, "  shed: %s leaving %d partitions (replicaNumber lowered): %s\n", n, len(bs.Shed[n]), shortRanges(bs.Shed[n], 12))
		}
		for _, l := range bs.Lagging {
			fmt.Fprintf(&b, "  lagging: %s behind %s (%s) in %d partitions, at most %d entries: %s\n",
				l.Follower, l.Leader, l.Why, len(l.Partitions), l.MaxBehind, shortRanges(l.Partitions, 12))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shortRanges is ranges cut after its first max runs, with how many
// numbers it left out (--json has them all).
func shortRanges(ns []int, max int) string {
	runs := strings.Split(ranges(ns), ",")
	if len(runs) <= max {
		return strings.Join(runs, ",")
	}
	shown := 0
	for _, r := range runs[:max] {
		lo, hi, found := strings.Cut(r, "-")
		if !found {
			shown++
			continue
		}
		var a, z int
		fmt.Sscan(lo, &a)
		fmt.Sscan(hi, &z)
		shown += z - a + 1
	}
	return fmt.Sprintf("%s,… (%d more)", strings.Join(runs[:max], ","), len(ns)-shown)
}

// ranges writes sorted numbers as runs: 0-3,7,9-10.
func ranges(ns []int) string {
	var parts []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(ns[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ns[i], ns[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
