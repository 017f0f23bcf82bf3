package cluster

import (
	"context"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
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

// followPrefix keeps a caller's copy of the keys under prefix current until
// ctx ends: loaded gets the whole prefix as etcd held it at revision rev
// (at start, and again whenever the watch's history was compacted away),
// then events gets each watch response's events in etcd's order with the
// revision up to which the copy is now current (0 when the response does
// not move it: see watchedUpTo). A broken watch starts again after the
// revision reached, so nothing is missed while etcd keeps its history.
// Both run on followPrefix's goroutine: they must not block long.
func followPrefix(ctx context.Context, cli *clientv3.Client, prefix string,
	loaded func(kvs []*mvccpb.KeyValue, rev int64), events func(evs []*clientv3.Event, upTo int64)) {
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := cli.Get(rctx, prefix, clientv3.WithPrefix())
		cancel()
		if err != nil {
			sleepCtx(ctx, 250*time.Millisecond)
			continue
		}
		rev := resp.Header.Revision
		loaded(resp.Kvs, rev)
		watchPrefixFrom(ctx, cli, prefix, rev, events)
	}
}

// watchPrefixFrom watches prefix after revision rev, passing each
// response's events on, until ctx ends or the history after the revision
// reached is compacted.
func watchPrefixFrom(ctx context.Context, cli *clientv3.Client, prefix string, rev int64,
	events func(evs []*clientv3.Event, upTo int64)) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify()) {
			if resp.CompactRevision > 0 {
				cancel()
				return // read the whole prefix again
			}
			upTo := watchedUpTo(resp)
			if upTo > rev {
				rev = upTo
			}
			if len(resp.Events) > 0 || upTo > 0 {
				events(resp.Events, upTo)
			}
		}
		cancel()
		sleepCtx(ctx, 100*time.Millisecond) // the watch broke: a moment before another
	}
}
