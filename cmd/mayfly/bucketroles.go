package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
)

// bucketRoles is the engine service that takes a deleted bucket's roles
// from its users, as Couchbase's roles do not outlive their bucket: a user
// given data_reader[travel] reads nothing of a bucket created later under
// that name. A single node takes them from its own users
// (auth.Store.DropBucketRoles). On a cluster the users are the cluster's:
// the deletion took the roles from them in etcd, in the transaction that
// deleted the bucket (cluster.DeleteBucket), once; each node deleting its
// copy only waits, briefly, to have applied that (users), so that the
// node a client asked answers with the roles gone.
type bucketRoles struct {
	users     *auth.Store
	log       *slog.Logger
	clustered bool
	// sync is the cluster's users, once the cluster node is up (nil
	// before: the buckets it deletes at start wait for nothing).
	sync atomic.Pointer[cluster.UserSync]
}

// bucketRolesSync bounds a cluster node's wait for the users without a
// deleted bucket's roles.
const bucketRolesSync = 10 * time.Second

// AttachBucket implements engine.BucketService: nothing to start.
func (*bucketRoles) AttachBucket(context.Context, *engine.Bucket) error { return nil }

// DetachBucket implements engine.BucketService: a deletion drops the
// bucket's roles.
func (r *bucketRoles) DetachBucket(ctx context.Context, b *engine.Bucket, deleted bool) error {
	if !deleted {
		return nil
	}
	if r.clustered {
		if us := r.sync.Load(); us != nil {
			sctx, cancel := context.WithTimeout(ctx, bucketRolesSync)
			defer cancel()
			if err := us.Sync(sctx); err != nil {
				r.log.Warn("the deleted bucket's roles left the cluster's users; this node has not applied that yet", "bucket", b.Name(), "err", err)
			}
		}
		return nil
	}
	n, err := r.users.DropBucketRoles(b.Name())
	if err != nil {
		return err
	}
	if n > 0 {
		r.log.Info("the deleted bucket's roles left its users", "bucket", b.Name(), "users", n)
	}
	return nil
}
