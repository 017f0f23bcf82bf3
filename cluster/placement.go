package cluster

import (
	"slices"
)

// NumPartitions is the number of partitions of every bucket, as
// Couchbase's vBuckets on Linux.
const NumPartitions = 1024

// Partition is one partition's entry in a bucket's map.
type Partition struct {
	// Voters are the nodes holding the partition's copies (its Raft voters
	// from step 2 on), distinct, the preferred leader among them.
	Voters []string `json:"voters"`
	// Leader is the preferred leader, one of Voters.
	Leader string `json:"leader"`
	// Epoch starts at 1 and is incremented on every change of the entry.
	Epoch uint64 `json:"epoch"`
	// Degraded says the partition has fewer copies on live nodes than the
	// bucket wants: too few nodes when it was placed, or a voter failed
	// over with no spare node to take its place.
	Degraded bool `json:"degraded,omitempty"`
}

// PartitionMap is a bucket's partition map, as stored under
// /mayfly/maps/NAME.
type PartitionMap struct {
	// Bucket is the bucket's name.
	Bucket string `json:"bucket"`
	// UUID is the UUID of the bucket's definition the map was placed
	// for: a map of a deleted incarnation is never one of the bucket
	// created again under its name (empty for a bucket without one).
	UUID string `json:"uuid,omitempty"`
	// Copies is how many voters each partition wants: the bucket's
	// replicaNumber + 1.
	Copies int `json:"copies"`
	// Partitions has NumPartitions entries, by partition number.
	Partitions []Partition `json:"partitions"`
}

// Place lays out n partitions with copies voters each over nodes: as many
// voters as wanted, or as there are nodes when fewer (those partitions are
// degraded). The result depends only on the node set (nodes are sorted
// first) and is balanced: each node holds within one of the same number of
// copies, and leads within one of the same number of partitions.
func Place(nodes []string, n, copies int) []Partition {
	nodes = slices.Sorted(slices.Values(nodes))
	nodes = slices.Compact(nodes)
	c := min(copies, len(nodes))
	parts := make([]Partition, n)
	if c <= 0 {
		for p := range parts {
			parts[p] = Partition{Epoch: 1, Degraded: true}
		}
		return parts
	}
	// Copies are dealt round the sorted nodes as one long sequence, c at a
	// time: each node gets within one of n*c/N, and a partition's c
	// consecutive slots are distinct nodes since c <= N.
	leads := map[string]int{}
	for p := range parts {
		voters := make([]string, c)
		for j := range voters {
			voters[j] = nodes[(p*c+j)%len(nodes)]
		}
		parts[p] = Partition{Voters: voters, Leader: leastLeading(voters, leads, nil), Epoch: 1, Degraded: c < copies}
		leads[parts[p].Leader]++
	}
	balanceLeaders(parts, nodes, leads)
	return parts
}

// leastLeading is the voter (not in skip) that leads the fewest
// partitions, the first in voter order on a tie; "" when every voter is
// skipped.
func leastLeading(voters []string, leads map[string]int, skip func(string) bool) string {
	best := ""
	for _, v := range voters {
		if skip != nil && skip(v) {
			continue
		}
		if best == "" || leads[v] < leads[best] {
			best = v
		}
	}
	return best
}

// balanceLeaders moves preferred leaderships, each within a partition's
// voters, from the node leading the most to the node leading the fewest
// until they are within one, or no such move is left.
func balanceLeaders(parts []Partition, nodes []string, leads map[string]int) {
	for range len(parts) {
		hi, lo := nodes[0], nodes[0]
		for _, n := range nodes {
			if leads[n] > leads[hi] {
				hi = n
			}
			if leads[n] < leads[lo] {
				lo = n
			}
		}
		if leads[hi]-leads[lo] <= 1 {
			return
		}
		moved := false
		for p := range parts {
			if parts[p].Leader == hi && slices.Contains(parts[p].Voters, lo) {
				parts[p].Leader = lo
				leads[hi]--
				leads[lo]++
				moved = true
				break
			}
		}
		if !moved {
			return
		}
	}
}

// Failover takes node down out of the partitions it holds, in place: in
// each, a spare node from up (one not yet a voter, holding the fewest
// copies, then leading the fewest, then by name) takes its place; where
// there is no spare the node stays a voter (it may come back; step 2's Raft
// group still has a majority) and the partition is marked degraded. A
// preferred leadership it held moves to the voter on an up node leading
// the fewest. Partitions without down are left alone. Each changed entry's
// epoch is incremented; Failover returns the changed partition numbers
// (none when called again with the same arguments).
func Failover(parts []Partition, down string, up []string) []int {
	isUp := map[string]bool{}
	for _, n := range up {
		isUp[n] = n != down
	}
	copies, leads := map[string]int{}, map[string]int{}
	for _, p := range parts {
		for _, v := range p.Voters {
			copies[v]++
		}
		leads[p.Leader]++
	}
	spares := slices.Sorted(slices.Values(up))
	var changed []int
	for i := range parts {
		p := &parts[i]
		at := slices.Index(p.Voters, down)
		if at < 0 {
			continue
		}
		old := *p
		spare := ""
		for _, s := range spares {
			if !isUp[s] || slices.Contains(p.Voters, s) {
				continue
			}
			if spare == "" || copies[s] < copies[spare] || copies[s] == copies[spare] && leads[s] < leads[spare] {
				spare = s
			}
		}
		if spare != "" {
			p.Voters = slices.Clone(p.Voters)
			p.Voters[at] = spare
			copies[down]--
			copies[spare]++
		} else {
			p.Degraded = true
		}
		if p.Leader == down {
			if l := leastLeading(p.Voters, leads, func(v string) bool { return !isUp[v] || v == spare }); l != "" {
				p.Leader = l
				leads[down]--
				leads[l]++
			}
		}
		if p.Leader != old.Leader || p.Degraded != old.Degraded || !slices.Equal(p.Voters, old.Voters) {
			p.Epoch++
			changed = append(changed, i)
		}
	}
	return changed
}

// Recover clears the degraded mark of partitions that have all the copies
// wanted again, each voter on an up node (a failed-over node that came
// back), incrementing their epochs; it returns the changed partition
// numbers. It moves nothing back: returning leaderships and copies to a
// node is rebalancing, which comes with replication (issue 22, step 2).
func Recover(parts []Partition, copies int, up []string) []int {
	var changed []int
	for i := range parts {
		p := &parts[i]
		if !p.Degraded || len(p.Voters) < copies {
			continue
		}
		all := true
		for _, v := range p.Voters {
			if !slices.Contains(up, v) {
				all = false
				break
			}
		}
		if all {
			p.Degraded = false
			p.Epoch++
			changed = append(changed, i)
		}
	}
	return changed
}
