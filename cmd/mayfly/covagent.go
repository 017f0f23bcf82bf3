package main

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/views"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// coverAgent keeps a cluster node's view indexes to the partitions the
// views' coverage maps (cluster.CoverageMap, in its topology mirror) give
// it: for each bucket it holds, the partitions it covers or is next
// coverer of (views.Service.Cover: the others' rows leave its indexes,
// those gained are read from their start); and for those it is next
// coverer of, once its indexes caught up with them (made current, then
// indexed: views.Service.CatchUpPartitions) it reports so
// (cluster.PublishCoverageReady) for the orchestrator to switch their
// coverage to it. A bucket without a coverage map yet is left as it is
// (every partition the node holds is indexed).
type coverAgent struct {
	self   string
	mirror *cluster.TopologyMirror
	cli    *clientv3.Client
	eng    *engine.Engine
	views  *views.Service
	logger *slog.Logger

	applied  map[string]*cluster.CoverageMap // by bucket: the coverage map last applied
	reported map[string]coverReport          // by bucket: the last report made

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// coverReport is a report a coverAgent made.
type coverReport struct {
	rev   int64
	parts []int
}

// coverRetry is how often the agent looks at its buckets again when the
// mirror did not change: to retry what failed (a catch-up, a report).
const coverRetry = 2 * time.Second

// startCoverAgent starts node self's agent; Close stops it.
func startCoverAgent(self string, mirror *cluster.TopologyMirror, cli *clientv3.Client, eng *engine.Engine, vsvc *views.Service, logger *slog.Logger) *coverAgent {
	ctx, cancel := context.WithCancel(context.Background())
	a := &coverAgent{self: self, mirror: mirror, cli: cli, eng: eng, views: vsvc, logger: logger,
		applied: map[string]*cluster.CoverageMap{}, reported: map[string]coverReport{}, cancel: cancel}
	a.wg.Go(func() { a.run(ctx) })
	return a
}

// Close stops the agent and waits for it.
func (a *coverAgent) Close() {
	a.cancel()
	a.wg.Wait()
}

// run applies the coverage maps as the mirror changes, until ctx ends.
func (a *coverAgent) run(ctx context.Context) {
	retry := time.NewTicker(coverRetry)
	defer retry.Stop()
	for {
		changed := a.mirror.Changed()
		for _, b := range a.eng.Buckets() {
			if ctx.Err() != nil {
				return
			}
			a.apply(ctx, b)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-retry.C:
		}
	}
}

// apply applies b's coverage map, if the mirror holds one of b's
// incarnation, and reports the partitions this node is next coverer of
// once its indexes caught up with them.
func (a *coverAgent) apply(ctx context.Context, b *engine.Bucket) {
	name := b.Name()
	c, rev, _, err := a.mirror.Coverage(name)
	if err != nil || c == nil || c.UUID != b.Settings().UUID || len(c.Partitions) != b.NumPartitions() {
		return
	}
	if a.applied[name] != c {
		if err := a.views.Cover(ctx, name, c.Covers(a.self)); err != nil && !errors.Is(err, views.ErrNoViews) {
			if ctx.Err() == nil {
				a.logger.Warn("views: setting the partitions this node's indexes hold", "bucket", name, "err", err)
			}
			return
		}
		a.applied[name] = c
	}
	next := c.NextOf(a.self)
	if len(next) == 0 {
		return
	}
	if r, ok := a.reported[name]; ok && r.rev == rev && slices.Equal(r.parts, next) {
		return
	}
	if err := a.views.CatchUpPartitions(ctx, name, next); err != nil && !errors.Is(err, views.ErrNoViews) {
		if ctx.Err() == nil {
			a.logger.Info("views: catching up with partitions to cover (retried)", "bucket", name, "partitions", len(next), "err", err)
		}
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = cluster.PublishCoverageReady(pctx, a.cli, name, a.self, cluster.CoverageReady{Rev: rev, Partitions: next})
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			a.logger.Warn("views: reporting partitions caught up (retried)", "bucket", name, "err", err)
		}
		return
	}
	a.reported[name] = coverReport{rev: rev, parts: next}
	a.logger.Info("views: caught up with partitions to cover", "bucket", name, "partitions", len(next), "coverage_rev", rev)
}
