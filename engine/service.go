package engine

import (
	"context"
	"errors"
	"fmt"
)

// BucketService is a part that keeps state for each bucket beside its
// documents: the view indexes, the expiry pager, later the search indexes.
// The Engine owns every bucket's life and tells each attached service when a
// bucket opens and closes, in one place and in order: services attach to a
// bucket in the order they were attached to the engine, and detach in the
// reverse order, before the bucket's files close (and, for a deleted bucket,
// before they are removed).
type BucketService interface {
	// AttachBucket starts the service's work on b: at Engine.Attach for every
	// open bucket, and after CreateBucket for a new one. An error fails
	// Attach or CreateBucket; a service reports and skips what it can live
	// without (one bad design document must not stop a bucket).
	AttachBucket(ctx context.Context, b *Bucket) error
	// DetachBucket stops the service's work on b and releases everything it
	// holds for it (files, goroutines, memory). deleted says that b is being
	// deleted: the service removes what it keeps of b too. It is called
	// once per attach, at DeleteBucket or Engine.Close.
	DetachBucket(ctx context.Context, b *Bucket, deleted bool) error
}

// DeleteGate is a BucketService that takes part in a bucket's deletion
// before anything of the bucket is touched: DeleteBucket calls its
// PrepareDelete first (before any DetachBucket), and an error fails the
// deletion, leaving the bucket as it was. A cluster node removes the
// bucket's definition from the cluster there, so that a deletion the
// cluster did not take deletes nothing.
type DeleteGate interface {
	BucketService
	// PrepareDelete is called with the engine's bucket lifecycle lock
	// held: it must not create or delete buckets.
	PrepareDelete(ctx context.Context, b *Bucket) error
}

// SettingsGate is a BucketService that takes part in a change of a
// bucket's settings before it is made: UpdateSettings calls its
// PrepareSettings with the settings before and after, once they are
// validated and before anything is persisted, and an error fails the
// change, leaving the settings as they were. A cluster node writes the
// change to the bucket's definition in the cluster there, so that a change
// the cluster did not take is not made on one node alone.
type SettingsGate interface {
	BucketService
	// PrepareSettings is called with the engine's bucket lifecycle lock
	// and b's definition lock held: it must not create, delete or change
	// buckets.
	PrepareSettings(ctx context.Context, b *Bucket, old, updated BucketSettings) error
}

// Attach adds svc to the services the engine tells about bucket lives, and
// attaches it to every bucket open now. If one fails, svc is detached from
// those it attached to and not added.
func (e *Engine) Attach(ctx context.Context, svc BucketService) error {
	e.life.Lock()
	defer e.life.Unlock()
	if e.isClosed() {
		return ErrClosed
	}
	var done []*Bucket
	for _, b := range e.Buckets() {
		if err := svc.AttachBucket(ctx, b); err != nil {
			for _, d := range done {
				if derr := svc.DetachBucket(ctx, d, false); derr != nil {
					e.log.Warn("detaching a service after a failed attach", "bucket", d.name, "err", derr)
				}
			}
			return fmt.Errorf("engine: attach to bucket %s: %w", b.name, err)
		}
		done = append(done, b)
	}
	e.services = append(e.services, svc)
	return nil
}

// attachAll attaches every service to b, in order, detaching those that
// attached if one fails.
//
// REQUIRES: e.life held.
func (e *Engine) attachAll(ctx context.Context, b *Bucket) error {
	for i, svc := range e.services {
		if err := svc.AttachBucket(ctx, b); err != nil {
			e.detach(ctx, b, e.services[:i], true)
			return err
		}
	}
	return nil
}

// detach detaches services from b in reverse order and returns their errors
// joined.
//
// REQUIRES: e.life held.
func (e *Engine) detach(ctx context.Context, b *Bucket, services []BucketService, deleted bool) error {
	var errs []error
	for i := len(services) - 1; i >= 0; i-- {
		if err := services[i].DetachBucket(ctx, b, deleted); err != nil {
			errs = append(errs, fmt.Errorf("engine: detach from bucket %s: %w", b.name, err))
		}
	}
	return errors.Join(errs...)
}
