package cluster

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// layoutPrefix holds, per bucket, a key every node rewrites when the
// leadership of the partitions it holds changed: its mod revision is the
// bucket's layout revision, one number every node reads alike.
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

// LayoutRevision returns bucket's layout revision: the etcd revision of
// the last BumpLayout, or of the bucket's partition map if that is later
// (a new map is a new layout too), 0 when there is neither. It only
// grows while the bucket lives, and every node reads the same number.
func LayoutRevision(ctx context.Context, cli *clientv3.Client, bucket string) (int64, error) {
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(layoutPrefix+bucket, clientv3.WithKeysOnly()),
		clientv3.OpGet(mapsPrefix+bucket, clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return 0, fmt.Errorf("cluster: reading the layout revision of %q: %w", bucket, err)
	}
	var rev int64
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			rev = max(rev, kv.ModRevision)
		}
	}
	return rev, nil
}
