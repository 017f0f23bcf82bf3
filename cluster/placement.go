package cluster

import (
	"maps"
	"math"
	"slices"
)

// NumPartitions is the number of partitions of a bucket whose definition
// does not say (BucketDef.Partitions), as Couchbase's vBuckets on Linux.
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
	// Shed are the nodes a lowering of the bucket's replicaNumber took
	// out of Voters (RemoveCopies): unlike a failed-over node, each stays
	// a member of the partition's Raft group, keeping its copy, until the
	// conf change removing it applies there (then it leaves the group and
	// drops the copy). A node leaves the list once the partition's leader
	// applied that conf change (ClearShed: a node that never receives it,
	// cut off from the leader, then drops its copy as a failed-over node
	// does), when it is made a voter again (AddCopies), or when it is
	// failed over (Failover).
	Shed []string `json:"shed,omitempty"`
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
	// Partitions has an entry per partition of the bucket
	// (BucketDef.Partitions), by partition number.
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

// loads counts, per node, the copies it holds and the partitions it is
// the preferred leader of.
func loads(parts []Partition) (copies, leads map[string]int) {
	copies, leads = map[string]int{}, map[string]int{}
	for _, p := range parts {
		for _, v := range p.Voters {
			copies[v]++
		}
		leads[p.Leader]++
	}
	return copies, leads
}

// leastLoaded is the node of spares (sorted) that is up and not one of
// voters holding the fewest copies, then leading the fewest, then the
// first by name; "" when there is none.
func leastLoaded(spares []string, isUp map[string]bool, voters []string, copies, leads map[string]int) string {
	spare := ""
	for _, s := range spares {
		if !isUp[s] || slices.Contains(voters, s) {
			continue
		}
		if spare == "" || copies[s] < copies[spare] || copies[s] == copies[spare] && leads[s] < leads[spare] {
			spare = s
		}
	}
	return spare
}

// Failover takes node down out of the partitions it holds, in place: in
// each, a spare node from up (one not yet a voter, holding the fewest
// copies, then leading the fewest, then by name) takes its place; where
// there is no spare the node stays a voter (it may come back; step 2's Raft
// group still has a majority) and the partition is marked degraded. So it
// does, and its partition is degraded, where the partition's other voters
// that are up are not a majority of its voters: its Raft group could not
// commit the change (a majority of the voters it has must), and the node
// down may hold acknowledged writes the others lack, which a copy taken
// out of the map drops when its node returns. A
// preferred leadership it held moves to the voter on an up node leading
// the fewest. Partitions without down are left alone. Each changed entry's
// epoch is incremented; Failover returns the changed partition numbers
// (none when called again with the same arguments).
func Failover(parts []Partition, down string, up []string) []int {
	isUp := map[string]bool{}
	for _, n := range up {
		isUp[n] = n != down
	}
	copies, leads := loads(parts)
	spares := slices.Sorted(slices.Values(up))
	var changed []int
	for i := range parts {
		p := &parts[i]
		old := *p
		// A shed node down this long is out of the list once the
		// partition's other members up (its voters and the rest of its
		// shed nodes: at most the group's configuration) are a majority
		// of them: the conf change removing it needs no vote of its, and
		// when it comes back, not shed, it leaves the group as a
		// failed-over node does. Else it stays shed: were it to drop its
		// copy on its return, the group might never commit that change.
		unshed := false
		if slices.Contains(p.Shed, down) {
			if countUp(p.Voters, isUp)+countUp(p.Shed, isUp) > (len(p.Voters)+len(p.Shed))/2 {
				unshed = dropShed(p, down)
			}
		}
		at := slices.Index(p.Voters, down)
		if at < 0 {
			if unshed {
				p.Epoch++
				changed = append(changed, i)
			}
			continue
		}
		spare := ""
		if countUp(p.Voters, isUp) > len(p.Voters)/2 { // else no majority up without it: it stays
			spare = leastLoaded(spares, isUp, p.Voters, copies, leads)
		}
		if spare != "" {
			p.Voters = slices.Clone(p.Voters)
			p.Voters[at] = spare
			dropShed(p, spare)
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
		if p.Leader != old.Leader || p.Degraded != old.Degraded || !slices.Equal(p.Voters, old.Voters) || !slices.Equal(p.Shed, old.Shed) {
			p.Epoch++
			changed = append(changed, i)
		}
	}
	return changed
}

// countUp counts the nodes of nodes that isUp holds up.
func countUp(nodes []string, isUp map[string]bool) int {
	n := 0
	for _, v := range nodes {
		if isUp[v] {
			n++
		}
	}
	return n
}

// dropShed takes node out of p's shed nodes (a copy of the list, so that
// an entry shared with an older map is not changed), and reports whether
// it was one.
func dropShed(p *Partition, node string) bool {
	if !slices.Contains(p.Shed, node) {
		return false
	}
	p.Shed = slices.DeleteFunc(slices.Clone(p.Shed), func(n string) bool { return n == node })
	if len(p.Shed) == 0 {
		p.Shed = nil
	}
	return true
}

// Recover clears the degraded mark of partitions that have all the copies
// wanted again, each voter on an up node (a failed-over node that came
// back), incrementing their epochs; it returns the changed partition
// numbers. It moves nothing back: EvenLeaders hands a returned node its
// share of the leaderships; moving copies back is rebalancing, not done.
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

// AddCopies gives partitions short of copies voters more, in place: after
// a bucket's replicaNumber was raised, or where it was placed on fewer
// nodes than it wants copies. A partition gains voters on nodes of settled
// (those of up only) that hold none of its copies, the one holding the
// fewest copies first (then leading the fewest, then by name); one still
// short for want of such nodes is marked degraded. Partitions skip holds
// back (nil: none) are left alone, and at most limit partitions change
// (limit <= 0: no bound). Each changed entry's epoch is incremented;
// AddCopies returns the changed partition numbers, sorted (none once every
// partition has its copies or can have no more).
//
// The Raft groups follow the map: a group's leader adds the new voter by a
// conf change, and the new node joins empty and is sent a snapshot
// (replica.Host.SetTarget). A node the partition shed (RemoveCopies) may
// be chosen, and is then no longer shed. Copies are never taken away
// here: RemoveCopies does that.
func AddCopies(parts []Partition, copies int, up, settled []string, skip func(p int) bool, limit int) []int {
	isUp := map[string]bool{}
	for _, n := range up {
		isUp[n] = true
	}
	held, leads := loads(parts)
	spares := slices.Sorted(slices.Values(settled))
	var changed []int
	for i := range parts {
		if limit > 0 && len(changed) >= limit {
			break
		}
		p := &parts[i]
		if len(p.Voters) >= copies || skip != nil && skip(i) {
			continue
		}
		old := *p
		voters := slices.Clone(p.Voters)
		for len(voters) < copies {
			spare := leastLoaded(spares, isUp, voters, held, leads)
			if spare == "" {
				break
			}
			voters = append(voters, spare)
			dropShed(p, spare)
			held[spare]++
		}
		p.Voters = voters
		if len(voters) < copies {
			p.Degraded = true
		}
		if p.Degraded != old.Degraded || !slices.Equal(p.Voters, old.Voters) || !slices.Equal(p.Shed, old.Shed) {
			p.Epoch++
			changed = append(changed, i)
		}
	}
	return changed
}

// RemoveCopies takes surplus voters out of partitions that have more than
// copies (at least one), in place: after a bucket's replicaNumber was
// lowered. When more than one copy stays, the copy kept first is that of
// the node whose Raft group leads the partition (leaders[p], from the
// nodes' LeadRecords; "" or beyond the slice's end: not known) when that
// node is up and a voter, and it becomes the preferred leader; else, and
// when one copy stays, the preferred leader's. The group's leader reaches
// every copy that does not lag (a partition with one lagging is held back,
// skip), but two followers need not reach each other: a preferred leader
// cut off from another copy (which may be why the group elected another
// leader) kept beside it would leave two voters that cannot elect a
// leader. A single copy kept has no such pair, so the preferred leader's
// stays and the copies stay spread as the map placed them (keeping the
// Raft leader's there would leave a node that was restarting during the
// lowering, whose leaderships the others had taken meanwhile, with a
// share of the partitions that nothing moves back at one copy). A voter on a node of failed
// (down longer than the failover timeout) goes first, as Failover would
// take it: it drops its copy when it returns. Of the others, the one on
// the node holding the most copies goes first (then the first by name), so
// that the copies stay balanced over the nodes as they were; each is added
// to the entry's Shed: its node stays a member of the partition's Raft
// group, keeping its copy, until the conf change removing it (proposed by
// the group's leader, replica.Host.SetTarget) applies there. A partition
// is left alone while a voter is on a node neither up nor failed (it
// would rejoin as a member the group may no longer have: failover or its
// return comes first), the copy it would keep first is not up, or its
// voters up are no majority of its voters (its group could not commit the
// change), and so are those skip holds back (nil: none; a partition with a
// follower lagging: the voters left must be able to commit without the
// ones going); at most limit partitions change (limit <= 0: no bound).
// Each changed entry's epoch is incremented; RemoveCopies returns the
// changed partition numbers, sorted (none once no partition it may
// change has more than copies).
func RemoveCopies(parts []Partition, copies int, up, failed []string, skip func(p int) bool, leaders []string, limit int) []int {
	copies = max(copies, 1)
	isUp, isFailed := map[string]bool{}, map[string]bool{}
	for _, n := range up {
		isUp[n] = true
	}
	for _, n := range failed {
		isFailed[n] = !isUp[n]
	}
	held, _ := loads(parts)
	var changed []int
	for i := range parts {
		if limit > 0 && len(changed) >= limit {
			break
		}
		p := &parts[i]
		keep := p.Leader
		if copies > 1 && i < len(leaders) && leaders[i] != "" && slices.Contains(p.Voters, leaders[i]) && isUp[leaders[i]] {
			keep = leaders[i]
		}
		if len(p.Voters) <= copies || skip != nil && skip(i) || !slices.Contains(p.Voters, keep) || !isUp[keep] {
			continue
		}
		if countUp(p.Voters, isUp) <= len(p.Voters)/2 || slices.ContainsFunc(p.Voters, func(v string) bool { return !isUp[v] && !isFailed[v] }) {
			continue
		}
		voters := slices.Clone(p.Voters)
		shed := slices.Clone(p.Shed)
		for len(voters) > copies {
			out := -1
			for j, v := range voters {
				switch {
				case v == keep:
				case out < 0, isFailed[v] && !isFailed[voters[out]]:
					out = j
				case isFailed[v] != isFailed[voters[out]]:
				case held[v] > held[voters[out]] || held[v] == held[voters[out]] && v < voters[out]:
					out = j
				}
			}
			v := voters[out]
			held[v]--
			if !isFailed[v] {
				shed = append(shed, v)
			}
			voters = slices.Delete(voters, out, out+1)
		}
		p.Voters, p.Shed, p.Leader = voters, shed, keep
		p.Epoch++
		changed = append(changed, i)
	}
	return changed
}

// ClearShed takes out of partitions' Shed lists, in place, the nodes left
// reports gone from the entry as it is: left(p, epoch, node) says that the
// leader of partition p applied a configuration without node while p's
// entry had that epoch (ShedLeft), so the conf change removing it
// committed. Such a node is no longer needed for its group's majority,
// and once no entry lists it, as a voter or shed, it drops its copy
// whether or not the change ever reached it. A report of an older epoch
// counts for nothing: the node may have been made a voter and shed again
// since. Each changed entry's epoch is incremented; ClearShed returns the
// changed partition numbers, sorted (none when called again with the
// same left, the epochs having moved on).
func ClearShed(parts []Partition, left func(p int, epoch uint64, node string) bool) []int {
	var changed []int
	for i := range parts {
		p := &parts[i]
		cleared := false
		for _, n := range slices.Clone(p.Shed) {
			if left(i, p.Epoch, n) && dropShed(p, n) {
				cleared = true
			}
		}
		if cleared {
			p.Epoch++
			changed = append(changed, i)
		}
	}
	return changed
}

// hasShed reports whether some partition of parts sheds a node.
func hasShed(parts []Partition) bool {
	return slices.ContainsFunc(parts, func(p Partition) bool { return len(p.Shed) > 0 })
}

// EvenLeaders evens out preferred leaderships, in place, over the
// partitions that are not degraded: each node ends within one of its fair
// share of them, the sum, over those it is a voter of, of one over their
// number of voters. It moves nothing while a voter of one of them is not
// settled (settled: up long enough to be given a leadership), so that a
// node down for less than the failover timeout costs no moves, there and
// back. A partition skip holds back (nil: none) keeps its leader but
// counts. A leadership moves within a partition's voters only, from a node
// over its share towards one under it, along the shortest chain of such
// moves when no single one does (a chain of k moves hands one leadership
// from its first node to its last, the nodes between keeping their
// counts); with no partition held back the shares are always reached. It
// makes at most limit moves (the last chain may take it a few over; limit
// <= 0: no bound), so that a returning node takes its leaderships back
// over a few calls rather than all at once. Each partition whose leader
// changed has its epoch incremented once; the changed partition numbers
// are returned, sorted (none once even, or when nothing can be moved).
func EvenLeaders(parts []Partition, settled []string, skip func(p int) bool, limit int) []int {
	isSettled := map[string]bool{}
	for _, n := range settled {
		isSettled[n] = true
	}
	// Shares are counted in units of 1/lcm(voter counts), exactly, over
	// the partitions counted; in are those whose leadership may move.
	var counted, in []int
	unit := 1
	for i, p := range parts {
		if p.Degraded || len(p.Voters) == 0 || !slices.Contains(p.Voters, p.Leader) {
			continue
		}
		for _, v := range p.Voters {
			if !isSettled[v] {
				return nil
			}
		}
		unit = lcm(unit, len(p.Voters))
		counted = append(counted, i)
		if skip == nil || !skip(i) {
			in = append(in, i)
		}
	}
	dev := map[string]int{} // a node's leaderships minus its fair share, times unit
	for _, i := range counted {
		p := parts[i]
		for _, v := range p.Voters {
			dev[v] -= unit / len(p.Voters)
		}
		dev[p.Leader] += unit
	}
	nodes := slices.Sorted(maps.Keys(dev))
	old := map[int]string{}
	moves := 0
	// move hands one leadership along the chain from a to the first node
	// the shortest chain reaches for which ok holds; false when none.
	move := func(a string, ok func(string) bool) bool {
		type step struct {
			from string
			part int
		}
		via := map[string]step{a: {}}
		queue := []string{a}
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			for _, i := range in {
				if parts[i].Leader != u {
					continue
				}
				for _, v := range parts[i].Voters {
					if _, seen := via[v]; seen {
						continue
					}
					via[v] = step{u, i}
					if !ok(v) {
						queue = append(queue, v)
						continue
					}
					dev[a] -= unit
					dev[v] += unit
					for n := v; n != a; n = via[n].from {
						s := via[n]
						if _, ok := old[s.part]; !ok {
							old[s.part] = parts[s.part].Leader
						}
						parts[s.part].Leader = n
						moves++
					}
					return true
				}
			}
		}
		return false
	}
	// First the nodes over their share by more than one hand leaderships
	// to nodes at or under it (which end at most one over), most over
	// first; then the nodes under by more than one take them from nodes at
	// or over it (which end at most one under). Neither step undoes the
	// other's work, and when neither finds a chain every node is within
	// one of its share.
	if limit <= 0 {
		limit = math.MaxInt
	}
	stuck := map[string]bool{}
	for moves < limit {
		a := ""
		for _, n := range nodes {
			if dev[n] > unit && !stuck[n] && (a == "" || dev[n] > dev[a]) {
				a = n
			}
		}
		if a == "" {
			break
		}
		if !move(a, func(v string) bool { return dev[v] <= 0 }) {
			stuck[a] = true
		}
	}
	clear(stuck)
	for moves < limit {
		b := ""
		for _, n := range nodes {
			if dev[n] < -unit && !stuck[n] && (b == "" || dev[n] < dev[b]) {
				b = n
			}
		}
		if b == "" {
			break
		}
		// A chain to b from any node at or over its share: searched
		// from each such node, most over first.
		found := false
		for _, a := range slices.SortedStableFunc(slices.Values(nodes), func(x, y string) int { return dev[y] - dev[x] }) {
			if dev[a] >= 0 && move(a, func(v string) bool { return v == b }) {
				found = true
				break
			}
		}
		if !found {
			stuck[b] = true
		}
	}
	var changed []int
	for i, was := range old {
		if parts[i].Leader != was {
			parts[i].Epoch++
			changed = append(changed, i)
		}
	}
	slices.Sort(changed)
	return changed
}

// lcm is the least common multiple of two positive numbers.
func lcm(a, b int) int {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}
