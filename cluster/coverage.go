package cluster

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// MapRevision returns the revision a bucket's partition map was last
// written at (as ReadMap's), 0 when it has none, without reading the map
// itself: a caller that holds the map of that revision need not read it
// again.
func MapRevision(ctx context.Context, cli *clientv3.Client, bucket string) (int64, error) {
	resp, err := cli.Get(ctx, mapsPrefix+bucket, clientv3.WithKeysOnly())
	if err != nil {
		return 0, fmt.Errorf("cluster: reading the revision of the map of %q: %w", bucket, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return resp.Kvs[0].ModRevision, nil
}
