package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// layoutPrefix holds, per bucket, a key every node rewrites when the
// leadership of the partitions it holds changed: its mod revision is the
// bucket's layout revision, one number every node reads alike
// (TopologyMirror.LayoutRevision: the later of this key's and the map's
// revisions). Beside it, layoutPrefix+BUCKET+"/"+NODE is the node's
// LeadRecord: the partitions it led when it last wrote it (PublishLeads).
const layoutPrefix = "/mayfly/layout/"

// BumpLayout records that the leadership of some of bucket's partitions
// changed as node sees it (the key's value names the node; only its
// revision matters), and returns the new layout revision.
func BumpLayout(ctx context.Context, cli *clientv3.Client, bucket, node string) (int64, error) {
	resp, err := cli.Put(ctx, layoutPrefix+bucket, node)
	if err != nil {
		return 0, fmt.Errorf("cluster: recording a layout change of %q: %w", bucket, err)
	}
	return resp.Header.Revision, nil
}

// LeadRecord is what a node published of the partitions of a bucket's
// incarnation whose Raft groups it led (PublishLeads).
type LeadRecord struct {
	// UUID is the bucket's incarnation.
	UUID string `json:"uuid"`
	// Led has bit p%8 of byte p/8 set for each partition p the node led.
	Led []byte `json:"led"`
}

// PublishLeads records, with BumpLayout's change of bucket's layout
// revision in the same transaction, that node leads the partitions led of
// the bucket's incarnation uuid (and no other), and returns the new
// layout revision. A node that holds no copy of a partition reads these
// records (TopologyMirror.ClaimedLeaders) to name its leader in the KV
// configuration: every node then serves the same layout under the same
// revision, whichever copies it holds.
func PublishLeads(ctx context.Context, cli *clientv3.Client, bucket, uuid, node string, led []int) (int64, error) {
	rec := LeadRecord{UUID: uuid}
	for _, p := range led {
		if p < 0 {
			continue
		}
		for len(rec.Led) <= p/8 {
			rec.Led = append(rec.Led, 0)
		}
		rec.Led[p/8] |= 1 << (p % 8)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpPut(layoutPrefix+bucket, node),
		clientv3.OpPut(layoutPrefix+bucket+"/"+node, string(data)),
	).Commit()
	if err != nil {
		return 0, fmt.Errorf("cluster: recording the partitions of %q that %s leads: %w", bucket, node, err)
	}
	return resp.Header.Revision, nil
}

// leads reports whether r names partition p.
func (r *LeadRecord) leads(p int) bool {
	return p >= 0 && p/8 < len(r.Led) && r.Led[p/8]&(1<<(p%8)) != 0
}

// mirroredLeads is a node's LeadRecord as a TopologyMirror holds it, with
// the revision it was written at.
type mirroredLeads struct {
	rec LeadRecord
	rev int64
}

// applyLayoutKVLocked takes one key under the layout prefix (its name
// without the prefix, and its key-value; nil kv: deleted) into t: a
// bucket's layout key, or a node's LeadRecord of it (one that does not
// decode counts as none).
//
// REQUIRES: t.mu held.
func (t *TopologyMirror) applyLayoutKVLocked(name string, kv *mvccpb.KeyValue) {
	bucket, node, isLeads := strings.Cut(name, "/") // bucket names have no slash
	if !isLeads {
		if kv == nil {
			delete(t.layouts, name)
		} else {
			t.layouts[name] = kv.ModRevision
		}
		return
	}
	var rec LeadRecord
	if kv == nil || json.Unmarshal(kv.Value, &rec) != nil {
		delete(t.leads[bucket], node)
		return
	}
	if t.leads[bucket] == nil {
		t.leads[bucket] = map[string]mirroredLeads{}
	}
	t.leads[bucket][node] = mirroredLeads{rec: rec, rev: kv.ModRevision}
}

// ClaimedLeaders returns, for each of bucket's n partitions, the node
// whose LeadRecord of the incarnation uuid names it, the latest written
// when several do (a leader publishes its record after it became leader:
// the later record is the newer leadership); "" where none does. Nodes
// down are not left out: a record changes only with a revision of the
// layout, so that every node serving a configuration under one layout
// revision names the same leaders.
func (t *TopologyMirror) ClaimedLeaders(bucket, uuid string, n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return latestClaims(t.leads[bucket], uuid, n)
}

// ClaimedLeader is ClaimedLeaders' entry for partition part alone (a
// request's route reads one partition): the node whose LeadRecord of the
// incarnation uuid names it, the latest written when several do; "" when
// none does.
func (t *TopologyMirror) ClaimedLeader(bucket, uuid string, part int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	node, rev := "", int64(0)
	for n, l := range t.leads[bucket] {
		if l.rec.UUID == uuid && l.rec.leads(part) && (node == "" || l.rev > rev || l.rev == rev && n < node) {
			node, rev = n, l.rev
		}
	}
	return node
}

// latestClaims returns, for each of n partitions, the node whose record of
// incarnation uuid names it, the latest written when several do; "" where
// none does.
func latestClaims(recs map[string]mirroredLeads, uuid string, n int) []string {
	out := make([]string, n)
	revs := make([]int64, n)
	for node, l := range recs {
		if l.rec.UUID != uuid {
			continue
		}
		for p := range n {
			if l.rec.leads(p) && (out[p] == "" || l.rev > revs[p] || l.rev == revs[p] && node < out[p]) {
				out[p], revs[p] = node, l.rev
			}
		}
	}
	return out
}

// readRaftLeaders reads bucket's LeadRecords and returns, for each of its
// n partitions, the node up whose record of incarnation uuid names it, the
// latest written when several do (ClaimedLeaders, without the nodes down:
// their groups elected others); "" where none does.
func readRaftLeaders(ctx context.Context, cli *clientv3.Client, bucket, uuid string, n int, up func(node string) bool) ([]string, error) {
	resp, err := cli.Get(ctx, layoutPrefix+bucket+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("cluster: reading the partitions of %q that each node leads: %w", bucket, err)
	}
	recs := map[string]mirroredLeads{}
	for _, kv := range resp.Kvs {
		node := strings.TrimPrefix(string(kv.Key), layoutPrefix+bucket+"/")
		var rec LeadRecord
		if !up(node) || json.Unmarshal(kv.Value, &rec) != nil {
			continue
		}
		recs[node] = mirroredLeads{rec: rec, rev: kv.ModRevision}
	}
	return latestClaims(recs, uuid, n), nil
}
