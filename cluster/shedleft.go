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
// changed.
type report struct {
	cli  *clientv3.Client
	key  string
	what string // for errors
	last []byte
}

// publish writes v as JSON, unless it is what the last successful call
// wrote.
func (r *report) publish(ctx context.Context, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if r.last != nil && string(data) == string(r.last) {
		return nil
	}
	if _, err := r.cli.Put(ctx, r.key, string(data)); err != nil {
		return fmt.Errorf("cluster: publishing %s: %w", r.what, err)
	}
	r.last = data
	return nil
}
