package cluster

import (
	"context"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchNodesDown calls down with a node's name each time its key under
// /mayfly/nodes/ is deleted (its lease expired, or it left), until ctx
// ends. A broken watch is started again from the revision it reached, so
// no deletion is missed while etcd keeps its history. down runs on the
// watching goroutine: it must not block long.
func WatchNodesDown(ctx context.Context, cli *clientv3.Client, down func(name string)) {
	var rev int64
	for ctx.Err() == nil {
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithFilterPut()}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev+1))
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range cli.Watch(wctx, nodesPrefix, opts...) {
			if resp.CompactRevision > 0 {
				rev = 0 // history gone: watch from now on
				break
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					down(strings.TrimPrefix(string(ev.Kv.Key), nodesPrefix))
				}
			}
			if resp.Header.Revision > rev {
				rev = resp.Header.Revision
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // the watch broke: a moment before another
		}
	}
}
