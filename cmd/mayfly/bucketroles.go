package main

import (
	"context"
	"log/slog"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
)

// bucketRoles is the engine service that takes a deleted bucket's roles
// from its users (auth.Store.DropBucketRoles), on every node that deletes
// it: a user given data_reader[travel] reads nothing of a bucket created
// later under that name, as Couchbase's roles do not outlive their bucket.
type bucketRoles struct {
	users *auth.Store
	log   *slog.Logger
}

// AttachBucket implements engine.BucketService: nothing to start.
func (bucketRoles) AttachBucket(context.Context, *engine.Bucket) error { return nil }

// DetachBucket implements engine.BucketService: a deletion drops the
// bucket's roles.
func (r bucketRoles) DetachBucket(_ context.Context, b *engine.Bucket, deleted bool) error {
	if !deleted {
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
