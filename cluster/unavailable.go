package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/status"
)

// WriteTimeout bounds a change of the cluster's state that a client waits
// for (a user, a design document, a search definition, a bucket's
// collections, a bucket's definition): without a quorum etcd's client
// tries again for minutes, and the client's request would wait as long
// as it stayed connected.
const WriteTimeout = 15 * time.Second

// ApplyWait bounds how long the node that wrote such a change waits to
// have applied it itself (its mirror of etcd's keys seeing the write),
// before it answers.
const ApplyWait = 30 * time.Second

// ErrUnavailable is in the error of a change of the cluster's state that
// etcd did not take (or answer) within WriteTimeout, most often for want
// of a quorum, or that this node did not apply within ApplyWait. Such an
// error also wraps engine.ErrTempFail: a 503 the client may retry.
var ErrUnavailable = errors.New("cluster: the cluster's state did not answer in time (etcd without a quorum?); try again")

// Unavailable maps err, the failure of a change of the cluster's state
// made under ctx (a write bounded by WriteTimeout, a wait bounded by
// ApplyWait), to ErrUnavailable and engine.ErrTempFail when etcd or the
// bound caused it. Any other error (the change refused: ErrDefNotFound,
// ErrBucketExists, auth's and engine's errors) and the end of ctx itself
// (the client left) are returned as they are.
func Unavailable(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || !etcdFailure(err) || errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w: %w", engine.ErrTempFail, ErrUnavailable, err)
}

// etcdFailure reports whether err came from etcd's client or from a
// context ending (the bound): an etcd server's error, a gRPC status, a
// deadline.
func etcdFailure(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	if errors.As(err, new(rpctypes.EtcdError)) {
		return true
	}
	_, ok := status.FromError(err)
	return ok
}

// bounded runs fn, a change of the cluster's state, under ctx bounded by
// WriteTimeout, and maps its failure (Unavailable).
func bounded(ctx context.Context, fn func(ctx context.Context) error) error {
	wctx, cancel := context.WithTimeout(ctx, WriteTimeout)
	defer cancel()
	return Unavailable(ctx, fn(wctx))
}

// WaitApplied runs wait, a wait for this node to apply a change it wrote
// (a mirror's WaitRevision, UserSync.WaitVersion), bounded by ApplyWait,
// and maps its failure (Unavailable). The change is in etcd already:
// every node applies it, this one later.
func WaitApplied(ctx context.Context, wait func(ctx context.Context) error) error {
	wctx, cancel := context.WithTimeout(ctx, ApplyWait)
	defer cancel()
	err := wait(wctx)
	if err == nil || ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("%w: %w: written, not applied on this node yet: %w", engine.ErrTempFail, ErrUnavailable, err)
}
