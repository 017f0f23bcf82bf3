package cluster

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// layoutPrefix holds, per bucket, a key every node rewrites when the
// leadership of the partitions it holds changed: its mod revision is the
// bucket's layout revision, one number every node reads alike
// (TopologyMirror.LayoutRevision: the later of this key's and the map's
// revisions).
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
