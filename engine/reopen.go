package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// A change of a couchbase bucket's evictionPolicy restarts the bucket, as
// Couchbase does: the new definition is stored, every service detaches (view
// and search indexes keep their positions, as at a server's shutdown), the
// bucket closes cleanly (its acknowledged writes flushed, its store marked
// clean, so its history goes on), and a new Bucket of the same name opens
// from the same store with the new settings and warms up as after a restart;
// then every service attaches to it and goes on from its position. Lookups
// by name (Engine.Bucket) find the new bucket from then on; a caller holding
// the old one gets ErrClosed from it (a temporary failure on every front
// door, as during warm-up) and finds its replacement with Reopened.

// restartState is what a bucket keeps of its restart.
type restartState struct {
	next atomic.Pointer[Bucket] // the bucket that replaced this one
}

// Reopened returns the bucket that replaced b when b restarted (a change of
// its evictionPolicy), following every later restart, or nil if b has not
// been replaced. A front door that holds a *Bucket past one request (a
// memcached port, a selected bucket) looks here when b answers ErrClosed.
func (b *Bucket) Reopened() *Bucket {
	var last *Bucket
	for nb := b.restart.next.Load(); nb != nil; nb = nb.restart.next.Load() {
		last = nb
	}
	return last
}

// needsRestart reports whether a change of settings from old to s takes a
// restart of the bucket: a couchbase bucket's evictionPolicy.
func needsRestart(old, s BucketSettings) bool {
	return s.Type == Couchbase && s.EvictionPolicy != old.EvictionPolicy
}

// restartWith closes b and opens it again with settings s, which
// UpdateSettings has validated. Once begun it runs to its end whatever ctx
// does: a bucket left half restarted would serve nothing. If the bucket
// cannot open with s, it opens again with its old settings, restored in the
// catalog, and the error says why.
//
// REQUIRES: b.eng.life held; b.ddl not held.
func (b *Bucket) restartWith(ctx context.Context, s BucketSettings) (err error) {
	e := b.eng
	ctx = context.WithoutCancel(ctx)
	if derr := e.detach(ctx, b, e.services, false); derr != nil {
		e.log.Warn("detaching services from a restarting bucket", "bucket", b.name, "err", derr)
	}
	// The definition is read again under ddl, after the services let go
	// (a collection may have been created meanwhile), and stored with the
	// new settings; the bucket is marked closed before ddl is let go, so
	// no later change of the definition is lost.
	b.ddl.Lock()
	ce, err := b.catalogCopy()
	if err != nil {
		b.ddl.Unlock()
		return err
	}
	oldCE := ce
	ce.Settings = s
	if err := e.putCatalog(ce); err != nil {
		b.ddl.Unlock()
		e.reattach(ctx, b)
		return err
	}
	b.mu.Lock()
	b.mu.closed = true
	b.closedFlag.Store(true)
	b.mu.Unlock()
	cerr := b.shutdown()
	b.ddl.Unlock()
	if cerr != nil {
		e.log.Warn("closing a restarting bucket", "bucket", b.name, "err", cerr)
	}
	nb, err := e.openBucket(ce)
	if err != nil {
		err = fmt.Errorf("engine: restart bucket %s with evictionPolicy=%s: %w", b.name, s.EvictionPolicy, err)
		var rerr error
		if rerr = e.putCatalog(oldCE); rerr == nil {
			nb, rerr = e.openBucket(oldCE)
		}
		if rerr != nil {
			e.mu.Lock()
			if e.mu.buckets[b.name] == b {
				delete(e.mu.buckets, b.name)
			}
			e.mu.Unlock()
			return fmt.Errorf("%w; opening it again with its old settings failed too (it is offline until the server restarts): %w", err, rerr)
		}
	}
	// Published once every service is attached again, as a new bucket
	// is: a write taken before a cluster's replication attached would be
	// a local write, which a replicated bucket must never take.
	if aerr := e.reattach(ctx, nb); aerr != nil && err == nil {
		err = fmt.Errorf("engine: restart bucket %s: %w", b.name, aerr)
	}
	e.mu.Lock()
	e.mu.buckets[b.name] = nb
	e.mu.Unlock()
	b.restart.next.Store(nb)
	e.log.Info("bucket restarted", "bucket", b.name, "eviction_policy", nb.Settings().EvictionPolicy)
	return err
}

// reattach attaches every service to b, in order, after a restart: unlike
// attachAll, a service that fails is logged and skipped, not undone (undoing
// would detach the others as for a deleted bucket, removing their files).
// It returns the failures joined.
//
// REQUIRES: e.life held.
func (e *Engine) reattach(ctx context.Context, b *Bucket) error {
	var errs []error
	for _, svc := range e.services {
		if err := svc.AttachBucket(ctx, b); err != nil {
			e.log.Error("attaching a service to a restarted bucket", "bucket", b.name, "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
