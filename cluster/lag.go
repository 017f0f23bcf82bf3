package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// lagPrefix holds each node's report of the replicas that do not keep up
// with the partitions it leads: /mayfly/lag/NODE.
const lagPrefix = "/mayfly/lag/"

// Lagging is a follower that does not keep up with its leader in some of a
// bucket's partitions, as the leader sees it (see replica.Lag).
type Lagging struct {
	// Bucket is the bucket; Follower the node behind.
	Bucket   string `json:"bucket"`
	Follower string `json:"follower"`
	// Why is the reason the leader gives ("down", "snapshot", "probe",
	// "behind").
	Why string `json:"why"`
	// Partitions are the partitions, sorted; MaxBehind the most log
	// entries the follower is behind in one of them.
	Partitions []int  `json:"partitions"`
	MaxBehind  uint64 `json:"maxBehind"`
	// Leader is the node that reported it (set when read).
	Leader string `json:"leader,omitempty"`
}

// LagPublisher writes a node's lagging followers to the cluster's state
// when they change.
type LagPublisher struct {
	rep report
}

// NewLagPublisher returns the publisher of node's reports.
func NewLagPublisher(cli *clientv3.Client, node string) *LagPublisher {
	return &LagPublisher{rep: report{cli: cli, key: lagPrefix + node, what: node + "'s lagging replicas"}}
}

// Publish writes lags as the node's report, unless it is what the last
// successful call wrote. The report is not on the node's lease: a node
// that is down is not asked (ReadStatus reads only nodes that are up).
func (p *LagPublisher) Publish(ctx context.Context, lags []Lagging) error {
	for i := range lags {
		lags[i].Leader = ""
	}
	slices.SortFunc(lags, func(a, b Lagging) int {
		return strings.Compare(a.Bucket+"\x00"+a.Follower+"\x00"+a.Why, b.Bucket+"\x00"+b.Follower+"\x00"+b.Why)
	})
	return p.rep.publish(ctx, lags)
}

// readLag reads every node's report, by leader.
func readLag(ctx context.Context, cli *clientv3.Client) (map[string][]Lagging, error) {
	resp, err := cli.Get(ctx, lagPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("cluster: reading lagging replicas: %w", err)
	}
	out := map[string][]Lagging{}
	for _, kv := range resp.Kvs {
		node := strings.TrimPrefix(string(kv.Key), lagPrefix)
		var lags []Lagging
		if err := json.Unmarshal(kv.Value, &lags); err != nil {
			continue // a report this version cannot read: shown as none
		}
		for i := range lags {
			lags[i].Leader = node
		}
		out[node] = lags
	}
	return out, nil
}
