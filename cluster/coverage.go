package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Key prefixes of the views' coverage.
const (
	// coveragePrefix holds each bucket's coverage map:
	// /mayfly/coverage/BUCKET.
	coveragePrefix = "/mayfly/coverage/"
	// readyPrefix holds each node's report of the partitions it was named
	// next coverer of and has caught up: /mayfly/coverready/BUCKET/NODE.
	readyPrefix = "/mayfly/coverready/"
)

// CoverageMap says, per partition of a bucket, which node's view indexes
// answer for the partition's rows (its coverer), and while a move is under
// way which node is to take over (the next coverer). It is stored under
// /mayfly/coverage/BUCKET and written only by the orchestrator, fenced as
// the partition maps are; a node indexes the partitions it covers or is
// next coverer of. The orchestrator names a next coverer when a
// partition's coverer is down or no longer holds a copy (or when the
// partition's preferred leader, settled, does not cover it), and makes it
// the coverer, in one fenced write, only once the next coverer reported
// that its indexes caught up with the partition (CoverageReady).
type CoverageMap struct {
	// Bucket is the bucket's name; UUID its definition's, as the
	// partition map's.
	Bucket string `json:"bucket"`
	UUID   string `json:"uuid,omitempty"`
	// Partitions has an entry per partition of the bucket, by partition
	// number.
	Partitions []Coverage `json:"partitions"`
}

// Coverage is one partition's entry in a CoverageMap.
type Coverage struct {
	// Coverer is the node that answers for the partition's rows; "" when
	// the partition has no copy anywhere.
	Coverer string `json:"coverer,omitempty"`
	// Next is the node taking over, indexing the partition until it
	// reports it caught up; "" when no move is under way.
	Next string `json:"next,omitempty"`
	// NextAfter is the coverage map's mod revision the write that named
	// Next was conditioned on: a CoverageReady of Next counts for the
	// partition only at a later revision (one that named Next already).
	NextAfter int64 `json:"nextAfter,omitempty"`
}

// CoverageReady is a node's report that, at coverage revision Rev (the
// coverage map's mod revision it read), it was next coverer of Partitions
// and its view indexes have since reached each partition's position at
// some instant after it started indexing them: the orchestrator may then
// make it their coverer.
type CoverageReady struct {
	Rev        int64 `json:"rev"`
	Partitions []int `json:"partitions"`
}

// Covers returns, by partition, whether node covers the partition or is
// its next coverer: the partitions its view indexes hold.
func (c *CoverageMap) Covers(node string) []bool {
	out := make([]bool, len(c.Partitions))
	for p, e := range c.Partitions {
		out[p] = e.Coverer == node || e.Next == node
	}
	return out
}

// NextOf returns the partitions node is next coverer of, sorted.
func (c *CoverageMap) NextOf(node string) []int {
	var out []int
	for p, e := range c.Partitions {
		if e.Next == node {
			out = append(out, p)
		}
	}
	return out
}

// ReadCoverage reads a bucket's coverage map and its mod revision; nil and
// 0 when it has none.
func ReadCoverage(ctx context.Context, cli *clientv3.Client, bucket string) (*CoverageMap, int64, error) {
	resp, err := cli.Get(ctx, coveragePrefix+bucket)
	if err != nil {
		return nil, 0, fmt.Errorf("cluster: reading the coverage of %q: %w", bucket, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	var c CoverageMap
	if err := json.Unmarshal(resp.Kvs[0].Value, &c); err != nil {
		return nil, 0, fmt.Errorf("cluster: the coverage of %q: %w", bucket, err)
	}
	return &c, resp.Kvs[0].ModRevision, nil
}

// PublishCoverageReady writes node's CoverageReady for bucket.
func PublishCoverageReady(ctx context.Context, cli *clientv3.Client, bucket, node string, r CoverageReady) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := cli.Put(ctx, readyPrefix+bucket+"/"+node, string(data)); err != nil {
		return fmt.Errorf("cluster: publishing %s's caught-up coverage of %q: %w", node, bucket, err)
	}
	return nil
}

// decodeReady decodes the reports read under readyPrefix, by bucket and
// node; a report that does not decode counts as none.
func decodeReady(kvs []*mvccpb.KeyValue) map[string]map[string]CoverageReady {
	out := map[string]map[string]CoverageReady{}
	for _, kv := range kvs {
		bucket, node, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), readyPrefix), "/")
		var r CoverageReady
		if !ok || json.Unmarshal(kv.Value, &r) != nil {
			continue
		}
		if out[bucket] == nil {
			out[bucket] = map[string]CoverageReady{}
		}
		out[bucket][node] = r
	}
	return out
}

// initialCoverage is the coverage of a bucket whose coverage map is
// written first: each partition covered by its preferred leader. (Until
// then every node indexes every partition it holds a copy of, so the
// leader has the partition's rows as far as its copy has them.)
func initialCoverage(m *PartitionMap) *CoverageMap {
	c := &CoverageMap{Bucket: m.Bucket, UUID: m.UUID, Partitions: make([]Coverage, len(m.Partitions))}
	for p, e := range m.Partitions {
		c.Partitions[p].Coverer = e.Leader
	}
	return c
}

// moveCoverage brings a bucket's coverage map (read at mod revision rev)
// in line with its partition map m, the nodes up and those settled, and
// the next coverers' reports: it names a next coverer for each partition
// whose coverer is down or holds no copy any more (its preferred leader
// when that is up, else the up voter covering the fewest partitions), or
// whose preferred leader is settled and not its coverer (coverage follows
// the preferred leaders back once the cluster is whole); it cancels a move
// no longer wanted; and it makes a next coverer the coverer once its
// report at a revision after the one it was named at lists the partition.
// It returns the number of entries changed.
func moveCoverage(c *CoverageMap, rev int64, m *PartitionMap, up, settled func(string) bool, ready map[string]CoverageReady) int {
	load := map[string]int{}
	for _, e := range c.Partitions {
		if e.Coverer != "" {
			load[e.Coverer]++
		}
		if e.Next != "" {
			load[e.Next]++
		}
	}
	changed := 0
	for p := range c.Partitions {
		if p >= len(m.Partitions) {
			break
		}
		e, cur := m.Partitions[p], c.Partitions[p]
		was := cur
		voter := func(n string) bool { return n != "" && up(n) && slices.Contains(e.Voters, n) }
		switch {
		case e.Leader == "":
			// No copy anywhere: nothing to index; its share (if a coverer
			// is still named) fails as the node's.
			cur.Next, cur.NextAfter = "", 0
		default:
			// (A partition that had no copy and has one again, Coverer
			// "", gets a next coverer as a partition whose coverer is
			// down does: it builds the partition before it answers.)
			want := cur.Coverer
			if !voter(cur.Coverer) || voter(e.Leader) && settled(e.Leader) && e.Leader != cur.Coverer {
				want = ""
				switch {
				case voter(e.Leader):
					want = e.Leader
				default:
					for _, v := range e.Voters {
						if voter(v) && (want == "" || load[v] < load[want]) {
							want = v
						}
					}
				}
			}
			switch {
			case want == "" && !voter(cur.Next):
				cur.Next, cur.NextAfter = "", 0 // no up voter: wait for one
			case want == "":
			case want == cur.Coverer:
				cur.Next, cur.NextAfter = "", 0
			case voter(cur.Next):
				// A move under way to a node still fit for it goes on.
			default:
				cur.Next, cur.NextAfter = want, rev
			}
		}
		if cur.Next != "" && cur.Next == was.Next {
			if r, ok := ready[cur.Next]; ok && r.Rev > cur.NextAfter && slices.Contains(r.Partitions, p) {
				cur.Coverer, cur.Next, cur.NextAfter = cur.Next, "", 0
			}
		}
		if cur != was {
			if was.Next != "" {
				load[was.Next]--
			}
			if cur.Next != "" {
				load[cur.Next]++
			}
			if was.Coverer != "" {
				load[was.Coverer]--
			}
			if cur.Coverer != "" {
				load[cur.Coverer]++
			}
			c.Partitions[p] = cur
			changed++
		}
	}
	return changed
}

// PutCoverage writes a bucket's coverage map, fenced as PutMap writes a
// partition map (readRev: the coverage map's mod revision read, 0 when it
// must not exist). It returns the revision written at.
func (o *Orchestrator) PutCoverage(ctx context.Context, c *CoverageMap, readRev int64) (int64, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return 0, err
	}
	return o.fenced(ctx, coveragePrefix+c.Bucket, readRev, clientv3.OpPut(coveragePrefix+c.Bucket, string(data)), "the coverage of "+c.Bucket)
}

// deleteCoverage removes a bucket's coverage map and its nodes' reports,
// fenced on the coverage map's mod revision readRev.
func (o *Orchestrator) deleteCoverage(ctx context.Context, bucket string, readRev int64) error {
	_, err := o.fenced(ctx, coveragePrefix+bucket, readRev, clientv3.OpDelete(coveragePrefix+bucket), "removal of the coverage of "+bucket,
		clientv3.OpDelete(readyPrefix+bucket+"/", clientv3.WithPrefix()))
	return err
}
