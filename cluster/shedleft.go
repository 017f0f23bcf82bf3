package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// shedLeftPrefix holds each node's report of the shed nodes that the
// groups it leads no longer hold: /mayfly/shedleft/NODE.
const shedLeftPrefix = "/mayfly/shedleft/"

// ShedLeft says that a partition's group, as the node leading it applied
// its configuration, no longer holds some of the nodes its map entry
// sheds (Partition.Shed): the conf change removing them committed. A
// configuration applied is committed, and stays so, so the fact holds
// whoever reports it and whenever it is read; Epoch ties it to the map
// entry it answers (a node shed again after a raise is shed by a newer
// entry), UUID to the bucket's incarnation.
type ShedLeft struct {
	// Bucket and UUID are the bucket and its incarnation.
	Bucket string `json:"bucket"`
	UUID   string `json:"uuid,omitempty"`
	// Partition is the partition; Epoch the epoch of its map entry that
	// shed Nodes when the leader looked.
	Partition int    `json:"partition"`
	Epoch     uint64 `json:"epoch"`
	// Nodes are the shed nodes the leader's applied configuration does
	// not hold, sorted.
	Nodes []string `json:"nodes"`
}

// ShedLeftPublisher writes a node's ShedLeft reports to the cluster's
// state when they change.
type ShedLeftPublisher struct {
	rep report
}

// NewShedLeftPublisher returns the publisher of node's reports.
func NewShedLeftPublisher(cli *clientv3.Client, node string) *ShedLeftPublisher {
	return &ShedLeftPublisher{rep: report{cli: cli, key: shedLeftPrefix + node, what: node + "'s shed nodes gone"}}
}

// Publish writes left as the node's report, unless it is what the last
// successful call wrote. The orchestrator takes each node it names out of
// its partition's Shed list while the entry is still the one it answers
// (ClearShed).
func (p *ShedLeftPublisher) Publish(ctx context.Context, left []ShedLeft) error {
	for i := range left {
		slices.Sort(left[i].Nodes)
	}
	slices.SortFunc(left, func(a, b ShedLeft) int {
		return cmp.Or(strings.Compare(a.Bucket, b.Bucket), strings.Compare(a.UUID, b.UUID), cmp.Compare(a.Partition, b.Partition))
	})
	return p.rep.publish(ctx, left)
}

// shedLeftKey is one node a report says left one entry of a bucket's map.
type shedLeftKey struct {
	bucket, uuid string
	partition    int
	epoch        uint64
	node         string
}

// readShedLeft reads every node's ShedLeft reports, as a set of the nodes
// they say left which entry. A report this version cannot read counts as
// none.
func readShedLeft(ctx context.Context, cli *clientv3.Client) (map[shedLeftKey]bool, error) {
	resp, err := cli.Get(ctx, shedLeftPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("cluster: reading the shed nodes gone: %w", err)
	}
	out := map[shedLeftKey]bool{}
	for _, kv := range resp.Kvs {
		var left []ShedLeft
		if err := json.Unmarshal(kv.Value, &left); err != nil {
			continue
		}
		for _, l := range left {
			for _, n := range l.Nodes {
				out[shedLeftKey{l.Bucket, l.UUID, l.Partition, l.Epoch, n}] = true
			}
		}
	}
	return out, nil
}

// report is one node's report under a key of its own, written when it
// changed. Each write is a transaction on the key's modification revision
// as the report last wrote or read it: a write whose answer never came (a
// deadline while etcd had no leader) may still be applied later, after
// newer ones (likely a member forwarded it to the leader it knew, cut off
// from it, and it went through once the cut healed, tens of seconds on),
// and a plain put would then replace the newer report for good, the node
// writing again only when its report changes (the chaos isolate4 case: a
// follower reported lagging for minutes that was not). Such a late write
// compares against a revision the newer writes passed, and changes
// nothing.
type report struct {
	cli  *clientv3.Client
	key  string
	what string // for errors
	last []byte // what the last write wrote; nil after a write of unknown outcome
	rev  int64  // the key's modification revision as last written or read (0: no key)
}

// publish writes v as JSON, unless it is what the last successful call
// wrote. A write that finds the key written since (a late write of its
// own, a report of the node's previous run) reads its revision and writes
// again.
func (r *report) publish(ctx context.Context, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if r.last != nil && string(data) == string(r.last) {
		return nil
	}
	r.last = nil // a write that fails may be applied, or not
	for range 2 {
		resp, err := r.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(r.key), "=", r.rev)).
			Then(clientv3.OpPut(r.key, string(data))).
			Else(clientv3.OpGet(r.key)).Commit()
		if err != nil {
			return fmt.Errorf("cluster: publishing %s: %w", r.what, err)
		}
		if resp.Succeeded {
			r.last, r.rev = data, resp.Header.Revision
			return nil
		}
		r.rev = 0
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			r.rev = kvs[0].ModRevision
		}
	}
	return fmt.Errorf("cluster: publishing %s: the key changed at every try", r.what)
}
