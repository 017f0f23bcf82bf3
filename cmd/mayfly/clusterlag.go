package main

import (
	"context"
	"slices"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/replica"
)

// lagEvery is how often a node looks for the replicas that do not keep up
// with the partitions it leads, and publishes them when they changed.
const lagEvery = 2 * time.Second

// lagPublishTimeout bounds one publication of the lagging replicas.
const lagPublishTimeout = 5 * time.Second

// publishLag reports, every lagEvery until ctx ends, the followers of the
// groups this node leads that do not keep up (replica.Host.Lagging), per
// bucket, so that `mayfly cluster status` can show lagging replicas. A
// group is matched to its bucket by the bucket's groups (name and UUID of
// each bucket following a map); a group of no bucket attached (removed
// meanwhile) is left out. It reports too the shed nodes those groups'
// applied configurations no longer hold (shedLeft), for the orchestrator
// to take out of the map's Shed lists.
func (r *replication) publishLag(ctx context.Context) {
	pub := cluster.NewLagPublisher(r.n.Client(), r.n.Name())
	left := cluster.NewShedLeftPublisher(r.n.Client(), r.n.Name())
	t := time.NewTicker(lagEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lags := r.h.Lagging()
		// A put that hangs (this node's etcd member without a leader, a
		// connection gone silent) must not stop the reports: the next
		// tick tries again with what is lagging then. Without the bound
		// a report from a partition's last moments stayed in etcd after
		// the heal (the chaos isolate4 case: a healed node "leading" a
		// partition it had left, its followers "down").
		pctx, cancel := context.WithTimeout(ctx, lagPublishTimeout)
		err := pub.Publish(pctx, r.lagByBucket(lags))
		if err != nil && ctx.Err() == nil {
			r.logger.Debug("replication: lagging replicas not published", "err", err)
		}
		err = left.Publish(pctx, r.shedLeft())
		cancel()
		if err != nil && ctx.Err() == nil {
			r.logger.Debug("replication: shed nodes gone not published", "err", err)
		}
	}
}

// shedLeft lists, for each partition of an attached bucket whose map
// entry (as the mirror holds it) sheds nodes and whose group this node
// leads, the shed nodes the group's applied configuration here no longer
// holds: the conf change removing them committed, whether or not it
// reached them. A group whose configuration does not hold this node (one
// joined empty, before its snapshot) says nothing.
func (r *replication) shedLeft() []cluster.ShedLeft {
	r.mu.Lock()
	buckets := make([]*engine.Bucket, 0, len(r.following))
	for b := range r.following {
		buckets = append(buckets, b)
	}
	r.mu.Unlock()
	self := r.h.Node()
	var out []cluster.ShedLeft
	for _, b := range buckets {
		uuid := b.Settings().UUID
		m, _, _, err := r.mirror.Map(b.Name())
		if err != nil || m == nil || m.UUID != uuid || len(m.Partitions) != b.NumPartitions() {
			continue
		}
		for p, part := range m.Partitions {
			if len(part.Shed) == 0 {
				continue
			}
			id := replica.BucketGroup(b.Name(), uuid, p)
			if l, ok := r.h.Leader(id); !ok || l != self {
				continue
			}
			if in, err := r.h.HasVoter(id, self); err != nil || !in {
				continue
			}
			var gone []string
			for _, s := range part.Shed {
				if in, err := r.h.HasVoter(id, s); err == nil && !in {
					gone = append(gone, s)
				}
			}
			if len(gone) > 0 {
				out = append(out, cluster.ShedLeft{Bucket: b.Name(), UUID: uuid, Partition: p, Epoch: part.Epoch, Nodes: gone})
			}
		}
	}
	return out
}

// lagByBucket sums lags up per bucket, follower and reason.
func (r *replication) lagByBucket(lags []replica.Lag) []cluster.Lagging {
	if len(lags) == 0 {
		return nil
	}
	type owner struct {
		bucket string
		part   int
	}
	groups := map[replica.GroupID]owner{}
	r.mu.Lock()
	for b := range r.following {
		name, uuid := b.Name(), b.Settings().UUID
		for p, g := range replica.BucketGroups(name, uuid, b.NumPartitions()) {
			groups[g] = owner{name, p}
		}
	}
	r.mu.Unlock()
	type sumKey struct{ bucket, follower, why string }
	sums := map[sumKey]*cluster.Lagging{}
	var out []cluster.Lagging
	var order []sumKey
	for _, l := range lags {
		o, ok := groups[l.Group]
		if !ok {
			continue
		}
		k := sumKey{o.bucket, l.Follower, l.Why}
		s := sums[k]
		if s == nil {
			s = &cluster.Lagging{Bucket: o.bucket, Follower: l.Follower, Why: l.Why}
			sums[k] = s
			order = append(order, k)
		}
		s.Partitions = append(s.Partitions, o.part)
		s.MaxBehind = max(s.MaxBehind, l.Behind)
	}
	for _, k := range order {
		s := sums[k]
		slices.Sort(s.Partitions)
		out = append(out, *s)
	}
	return out
}
