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
			if r := watchedUpTo(resp); r > rev {
				rev = r
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // the watch broke: a moment before another
		}
	}
}

// watchedUpTo returns the revision up to which resp's watcher has seen
// every event: its last event's, or a progress notification's header
// (etcd sends one only to a watcher that has caught up); 0 when resp tells
// nothing of it. Not the header of a response with events: a watcher
// catching up on history gets its events in batches (etcd's 1,000
// revisions) each stamped with the store's current revision, so a watch
// that broke after one batch and went on from its header would skip the
// rest.
func watchedUpTo(resp clientv3.WatchResponse) int64 {
	if n := len(resp.Events); n > 0 {
		return resp.Events[n-1].Kv.ModRevision
	}
	if resp.IsProgressNotify() {
		return resp.Header.Revision
	}
	return 0
}
