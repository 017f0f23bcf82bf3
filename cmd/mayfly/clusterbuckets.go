package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
)

// firstStartUUID is the UUID of the bucket each node of a cluster creates
// on its first start (--default-bucket): derived from its name, so that
// the nodes starting together create the same incarnation, whichever
// defines it first. Deleted, it leaves a tombstone under that UUID, so a
// node starting afresh later drops its own; created again over HTTP, it
// gets a random one.
func firstStartUUID(name string) string {
	sum := sha256.Sum256([]byte("mayfly first-start bucket\x00" + name))
	return hex.EncodeToString(sum[:16])
}

// clusterBuckets keeps a cluster node's engine buckets and the cluster's
// bucket definitions (/mayfly/buckets/NAME, each with its bucket's UUID)
// in line, both ways:
//
//   - as an engine BucketService (attached before replication), it
//     defines each bucket the engine attaches that the cluster does not
//     define yet (those open at start and those created over HTTP), and
//     refuses one whose name the cluster defines as another bucket (another
//     UUID: Couchbase's "already exists"); as an engine.SettingsGate, a
//     settings change on this node (UpdateSettings) is written to the
//     definition before it is made here (refused if the cluster did not
//     take it); and, as an
//     engine.DeleteGate, a deletion on this node removes the definition,
//     its map and leaves a tombstone first (a deletion the cluster did not
//     take deletes nothing);
//   - following the definitions (cluster.WatchBuckets), it creates the
//     buckets other nodes defined, applies their settings changes, and
//     deletes the buckets the cluster deleted (their Raft groups with them:
//     replication.DetachBucket).
//
// A bucket's incarnation is its UUID: a local bucket whose UUID is not the
// definition's (the bucket was deleted and created again while this node
// was down) is dropped with its groups and created again from the
// definition.
type clusterBuckets struct {
	n      *cluster.Node
	eng    *engine.Engine
	repl   *replication
	logger *slog.Logger

	// starting is set while the buckets open at start are attached.
	starting atomic.Bool

	mu       sync.Mutex
	applying map[string]engine.BucketSettings // settings being applied from a bucket's definition
	creating map[string]string                // buckets being created from their definitions: name -> UUID
}

// newClusterBuckets returns the node's clusterBuckets.
func newClusterBuckets(n *cluster.Node, eng *engine.Engine, repl *replication, logger *slog.Logger) *clusterBuckets {
	return &clusterBuckets{n: n, eng: eng, repl: repl, logger: logger,
		applying: map[string]engine.BucketSettings{}, creating: map[string]string{}}
}

var (
	_ engine.DeleteGate   = (*clusterBuckets)(nil)
	_ engine.SettingsGate = (*clusterBuckets)(nil)
)

// dropDeleted runs at start, before the node's buckets are attached: it
// drops each local bucket the cluster deleted while this node was down
// (a tombstone names its UUID, or the cluster defines another bucket of
// its name) with its Raft groups, and gives the others the settings of
// their definitions. A local bucket the cluster neither defines nor
// deleted (one created while the node was a single node) is left to
// AttachBucket to define.
func (c *clusterBuckets) dropDeleted(ctx context.Context) error {
	// A cluster just formed may still change its etcd leader: a read
	// that fails is tried again for a while.
	var bs *cluster.Buckets
	for deadline := time.Now().Add(time.Minute); ; { // wall clock: etcd's real time
		rctx, cancel := context.WithTimeout(ctx, cluster.WriteTimeout)
		var err error
		bs, err = cluster.ReadBuckets(rctx, c.n.Client())
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) { // wall clock: as above
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	for _, b := range c.eng.Buckets() {
		s := b.Settings()
		def, defined := bs.Defs[s.Name]
		switch {
		case defined && def.UUID == s.UUID:
			c.apply(ctx, b, def)
		case bs.IsDeleted(s.Name, s.UUID) || defined && c.replaceable(b, def):
			if err := c.drop(ctx, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// replaceable reports whether local bucket b may be dropped for the
// cluster's definition def of another bucket of its name, b's incarnation
// not being known deleted: when b was never written (as the bucket each
// node creates on its first start: the first node to define it wins). A
// bucket holding documents the cluster never had is kept, and logged: it
// takes no replicated write (its map never comes), and an operator decides
// (delete it, or rename the cluster's).
func (c *clusterBuckets) replaceable(b *engine.Bucket, def cluster.BucketDef) bool {
	for _, seq := range b.HighSeqnos() {
		if seq != 0 {
			c.logger.Error("cluster: this node's bucket holds documents and the cluster defines another bucket of its name: it is kept, and takes no write",
				"bucket", b.Name(), "uuid", b.Settings().UUID, "cluster_uuid", def.UUID)
			return false
		}
	}
	return true
}

// localNames lists the node's buckets, for WatchBuckets: a bucket the
// cluster deleted between the start's read and the watch's is deleted
// here too.
func (c *clusterBuckets) localNames() []string {
	var names []string
	for _, b := range c.eng.Buckets() {
		names = append(names, b.Name())
	}
	return names
}

// follow makes the node's bucket of ev's name follow its definition (see
// clusterBuckets). It runs on the watching goroutine. A failure to create,
// delete, or read a tombstone is logged and returned: the watch gives every
// definition again a moment later (cluster.WatchBuckets), so a bucket the
// node could not create or delete is not left so until its next start.
func (c *clusterBuckets) follow(ev cluster.BucketEvent) error {
	ctx := c.repl.ctx
	b, err := c.eng.Bucket(ev.Name)
	if err != nil && !errors.Is(err, engine.ErrBucketNotFound) {
		return nil // the engine is closing
	}
	switch {
	case ev.Def == nil && b != nil:
		// Deleted: on this node too, if this incarnation's tombstone
		// says so (a bucket not defined yet, being created here, has
		// none).
		rctx, cancel := context.WithTimeout(ctx, cluster.WriteTimeout)
		deleted, err := cluster.IsDeleted(rctx, c.n.Client(), ev.Name, b.Settings().UUID)
		cancel()
		if err != nil {
			c.logger.Warn("cluster: reading a bucket's tombstone; trying again", "bucket", ev.Name, "err", err)
			return err
		}
		if deleted {
			if err := c.drop(ctx, b); err != nil {
				c.logger.Error("cluster: deleting a bucket the cluster deleted; trying again", "bucket", ev.Name, "err", err)
				return err
			}
		}
	case ev.Def == nil:
	case b != nil && b.Settings().UUID == ev.Def.UUID:
		c.apply(ctx, b, *ev.Def)
	default:
		if b != nil {
			// Another incarnation: this one was deleted (or never
			// written: replaceable).
			rctx, cancel := context.WithTimeout(ctx, cluster.WriteTimeout)
			deleted, err := cluster.IsDeleted(rctx, c.n.Client(), ev.Name, b.Settings().UUID)
			cancel()
			if err != nil {
				c.logger.Warn("cluster: reading a bucket's tombstone; trying again", "bucket", ev.Name, "err", err)
				return err
			}
			if !deleted && !c.replaceable(b, *ev.Def) {
				return nil
			}
			if err := c.drop(ctx, b); err != nil {
				c.logger.Error("cluster: deleting a bucket the cluster deleted; trying again", "bucket", ev.Name, "err", err)
				return err
			}
		}
		c.mu.Lock()
		c.creating[ev.Name] = ev.Def.UUID
		c.mu.Unlock()
		_, err := c.eng.CreateBucket(ctx, ev.Def.BucketSettings)
		c.mu.Lock()
		delete(c.creating, ev.Name)
		c.mu.Unlock()
		if err != nil {
			if errors.Is(err, cluster.ErrBucketDeleted) {
				// A definition read late: the cluster deleted that
				// incarnation since (and it stays deleted).
				c.logger.Info("cluster: not creating a bucket the cluster deleted since", "bucket", ev.Name, "uuid", ev.Def.UUID)
				return nil
			}
			if !errors.Is(err, engine.ErrBucketExists) && ctx.Err() == nil {
				c.logger.Error("cluster: creating a bucket the cluster defines; trying again", "bucket", ev.Name, "err", err)
				return err
			}
			return nil
		}
		c.logger.Info("cluster: created a bucket the cluster defines", "bucket", ev.Name, "uuid", ev.Def.UUID)
	}
	return nil
}

// drop deletes local bucket b's incarnation and removes its Raft groups
// (DetachBucket removes them when replication is attached; at start it is
// not yet, and a group removed twice is removed once).
func (c *clusterBuckets) drop(ctx context.Context, b *engine.Bucket) error {
	s := b.Settings()
	if err := c.eng.DeleteBucketUUID(ctx, s.Name, s.UUID); err != nil && !errors.Is(err, engine.ErrBucketNotFound) {
		return err
	}
	c.logger.Warn("cluster: deleted a bucket the cluster deleted", "bucket", s.Name, "uuid", s.UUID)
	return c.repl.removeGroups(ctx, s.Name, s.UUID, b.NumPartitions())
}

// apply gives local bucket b its definition's settings (not written back
// to the definition: the settings watch skips them).
func (c *clusterBuckets) apply(ctx context.Context, b *engine.Bucket, def cluster.BucketDef) {
	def.NumVBuckets = def.Partitions() // a definition written before buckets said
	if b.Settings() == def.BucketSettings {
		return
	}
	name := b.Name()
	_, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error {
		if s.UUID != def.UUID {
			return fmt.Errorf("%w: bucket %q is another incarnation", engine.ErrBucketNotFound, name)
		}
		*s = def.BucketSettings
		// Under the bucket's lock: PrepareSettings, called before the
		// change is made, knows these settings for the definition's.
		c.mu.Lock()
		c.applying[name] = def.BucketSettings
		c.mu.Unlock()
		return nil
	})
	c.mu.Lock()
	delete(c.applying, name)
	c.mu.Unlock()
	if err != nil {
		c.logger.Error("cluster: applying a bucket's settings from its definition", "bucket", name, "err", err)
		return
	}
	c.logger.Info("cluster: applied a bucket's settings from its definition", "bucket", name)
}

// AttachBucket defines b in the cluster if it is not defined yet, and
// refuses it when the cluster defines its name as another bucket. A bucket
// attached again after a restart with settings its definition does not
// have writes them (a change of evictionPolicy was written by
// PrepareSettings before the restart already). Without an etcd quorum it
// fails within cluster.WriteTimeout with cluster.ErrUnavailable (a 503),
// and the engine drops the bucket it was creating.
func (c *clusterBuckets) AttachBucket(ctx context.Context, b *engine.Bucket) error {
	wctx, cancel := context.WithTimeout(ctx, cluster.WriteTimeout)
	defer cancel()
	return cluster.Unavailable(ctx, c.attach(wctx, b))
}

// attach is AttachBucket, unbounded.
func (c *clusterBuckets) attach(ctx context.Context, b *engine.Bucket) error {
	s := b.Settings()
	// The bucket's replicaNumber is its settings' (the request's, or the
	// engine's default, serve's cluster.DefaultReplicaNumber on a cluster).
	err := cluster.DefineBucket(ctx, c.n.Client(), cluster.BucketDef{BucketSettings: s})
	if errors.Is(err, cluster.ErrBucketDeleted) && c.starting.Load() {
		// Deleted since the start's read (dropDeleted): the watch's
		// first read finds it not defined and drops it.
		c.logger.Info("cluster: the cluster deleted this bucket", "bucket", s.Name, "uuid", s.UUID)
		err = nil
	}
	if errors.Is(err, cluster.ErrBucketExists) {
		def, _, rerr := cluster.ReadBucket(ctx, c.n.Client(), s.Name)
		switch {
		case rerr != nil:
			return rerr
		case def.UUID != s.UUID && c.starting.Load():
			// Defined meanwhile by another node starting (the bucket of
			// each node's first start): the watch replaces it, or keeps
			// it (replaceable).
			c.logger.Info("cluster: the cluster defines another bucket of this name", "bucket", s.Name, "uuid", s.UUID, "cluster_uuid", def.UUID)
			err = nil
		case def.UUID != s.UUID:
			return fmt.Errorf("%w: the cluster defines bucket %q (uuid %s)", engine.ErrBucketExists, s.Name, def.UUID)
		case def.BucketSettings != s && c.fromDefinition(s):
			// Created here from a definition the cluster has changed
			// since (settings changed on another node at once after the
			// creation): the newer definition stays, and the watch,
			// which delivers it next, gives it to this bucket. Writing
			// this node's older settings back lost that change on
			// every node.
			err = nil
		case def.BucketSettings != s:
			// The definition's replicaNumber stays (fixed when the cluster
			// defined the bucket); the watch gives it to this node.
			s.ReplicaNumber = engine.ReplicaCount{}
			err = cluster.UpdateBucket(ctx, c.n.Client(), cluster.BucketDef{BucketSettings: s})
		default:
			err = nil
		}
	}
	if err != nil {
		return err
	}
	return nil
}

// fromDefinition reports whether the bucket of settings s is being
// created here from its cluster definition (follow), rather than opened
// at start or created over HTTP on this node.
func (c *clusterBuckets) fromDefinition(s engine.BucketSettings) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	uuid, ok := c.creating[s.Name]
	return ok && uuid == s.UUID
}

// PrepareSettings implements engine.SettingsGate: a bucket's settings
// changed on this node are written to its definition before the change is
// made here (every node then applies them); a change the cluster did not
// take (no quorum, the bucket deleted meanwhile) is refused and changes
// nothing. Another replicaNumber is written so too, and the orchestrator
// adds the partitions' copies (cluster.AddCopies) or takes the surplus
// away (cluster.RemoveCopies). A change applied from the definition is not
// written back.
func (c *clusterBuckets) PrepareSettings(ctx context.Context, b *engine.Bucket, old, updated engine.BucketSettings) error {
	c.mu.Lock()
	a, applying := c.applying[updated.Name]
	c.mu.Unlock()
	if applying && a == updated {
		return nil
	}
	err := cluster.UpdateBucket(ctx, c.n.Client(), cluster.BucketDef{BucketSettings: updated})
	if errors.Is(err, cluster.ErrBucketNotDefined) {
		return fmt.Errorf("%w: %w", engine.ErrBucketNotFound, err)
	}
	return err // cluster.ErrUnavailable without a quorum
}

// DetachBucket does nothing: clusterBuckets keeps nothing per bucket.
func (c *clusterBuckets) DetachBucket(context.Context, *engine.Bucket, bool) error { return nil }

// PrepareDelete implements engine.DeleteGate: the bucket's incarnation is
// deleted in the cluster (its definition and map removed, a tombstone
// left) before anything of it here; every node then deletes its copy.
// An incarnation the cluster no longer defines (the deletion came from
// it) goes ahead. Without an etcd quorum it fails within
// cluster.WriteTimeout with cluster.ErrUnavailable (a 503), nothing
// deleted here.
func (c *clusterBuckets) PrepareDelete(ctx context.Context, b *engine.Bucket) error {
	_, err := cluster.DeleteBucket(ctx, c.n.Client(), b.Name(), b.Settings().UUID)
	return err
}
