package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/replica"
)

// replication runs a cluster node's Raft groups (issue 22 step 2b): a
// replica.Host on the node's cluster port, and for each bucket, once the
// orchestrator has placed it, the groups of the partitions this node is a
// voter of, each with the engine's partition as its state machine. It is
// an engine.BucketService: a bucket attached writes through its
// partitions' groups from then on (until its map is there, a write
// answers that its partition has no leader). Its mirror is the node's one
// copy of the cluster's topology (the maps, the nodes up, the layout
// revisions), which the router and the views' coverage read too.
type replication struct {
	n      *cluster.Node
	h      *replica.Host
	mirror *cluster.TopologyMirror
	retry  time.Duration // mapRetry (tests: longer)
	logger *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	deleted   map[string]bool               // incarnations deleted (incarnation): their groups' entries fail at once
	following map[*engine.Bucket]*following // buckets attached: their follow goroutines
	// listed is, per group this node runs, the epoch of the newest map
	// entry that listed this node among the partition's voters (applyMap).
	listed map[replica.GroupID]uint64
}

// following is a bucket's follow goroutine: cancel stops it, done is
// closed when it returned.
type following struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// incarnation names one bucket's incarnation: its name and UUID.
func incarnation(b *engine.Bucket) string { return b.Name() + "/" + b.Settings().UUID }

// startReplication opens the node's replica.Host: listening on its
// cluster port, its store under <data>/cluster/raft, peers resolved
// through etcd, every node of --peers known by name from the start (a
// group restarted from the store reaches the voters of its stored
// configuration that the map no longer names).
func startReplication(cfg *serveConfig, n *cluster.Node, logger *slog.Logger) (*replication, error) {
	cc, err := cfg.cl.config()
	if err != nil {
		return nil, err
	}
	listen := ""
	names := make([]string, 0, len(cc.Peers))
	for _, p := range cc.Peers {
		if p.Name == cc.Node {
			listen = p.Addr()
		}
		names = append(names, p.Name)
	}
	h, err := replica.Open(replica.Options{
		Dir: filepath.Join(cfg.data, "cluster", "raft"), Node: cc.Node, Listen: listen,
		AllowRemote: cfg.cl.remote, TLS: raftTLS(cc.TLS), Resolver: replica.ClusterResolver(n.Client()), Peers: names, Logger: logger,
		TickInterval: cfg.cl.raftTick, FaultCut: cfg.faults.cut(),
	})
	if err != nil {
		return nil, fmt.Errorf("starting replication on %s: %w", listen, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replication{n: n, h: h, mirror: cluster.NewTopologyMirror(n.Client()), retry: mapRetry, logger: logger, ctx: ctx, cancel: cancel,
		deleted: map[string]bool{}, following: map[*engine.Bucket]*following{}, listed: map[replica.GroupID]uint64{}}
	r.wg.Go(func() { r.mirror.Run(ctx) })
	// A node whose lease expired may have died without closing its
	// connections: its quiet groups wake, to elect other leaders.
	r.wg.Go(func() { cluster.WatchNodesDown(ctx, n.Client(), h.NodeDown) })
	r.wg.Go(func() { r.publishLag(ctx) })
	return r, nil
}

// Close stops following maps and closes the Host (its groups stop; a
// write waiting for one fails).
func (r *replication) Close() error {
	r.cancel()
	r.wg.Wait()
	return r.h.Close()
}

// AttachBucket makes b's writes go through its partitions' groups and
// starts them once b's map exists. A bucket attached again after a
// restart (a new evictionPolicy) keeps its running groups: their state
// machines follow it (replica.BucketMachine).
func (r *replication) AttachBucket(_ context.Context, b *engine.Bucket) error {
	b.SetReplicator(&replica.BucketReplicator{Host: r.h, Bucket: b.Name(), UUID: b.Settings().UUID, Describe: r.describe})
	ctx, cancel := context.WithCancel(r.ctx)
	f := &following{cancel: cancel, done: make(chan struct{})}
	r.mu.Lock()
	r.following[b] = f
	r.mu.Unlock()
	r.wg.Go(func() {
		defer close(f.done)
		r.follow(ctx, b)
	})
	return nil
}

// DetachBucket stops following b. A deleted bucket's incarnation is
// marked gone (its groups fail its entries at once) and its groups are
// removed: stopped, and their state deleted from the raft store, so that
// nothing of them is replayed after a restart (a bucket created again
// under its name has other groups anyway: replica.BucketGroup). A bucket
// detached for a restart (a new evictionPolicy) keeps its running groups.
func (r *replication) DetachBucket(ctx context.Context, b *engine.Bucket, deleted bool) error {
	r.mu.Lock()
	f := r.following[b]
	delete(r.following, b)
	if deleted {
		r.deleted[incarnation(b)] = true
	}
	r.mu.Unlock()
	if f != nil {
		f.cancel()
		<-f.done
	}
	if !deleted {
		return nil
	}
	return r.removeGroups(ctx, b.Name(), b.Settings().UUID, b.NumPartitions())
}

// removeGroups removes every group of a bucket's incarnation from the
// Host, running or only stored, and forgets what applyMap listed of them.
func (r *replication) removeGroups(ctx context.Context, name, uuid string, parts int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ids := replica.BucketGroups(name, uuid, parts)
	if err := r.h.RemoveGroups(ctx, ids); err != nil {
		return fmt.Errorf("removing the Raft groups of bucket %q: %w", name, err)
	}
	r.unlist(ids)
	r.logger.Info("replication: removed the bucket's groups", "bucket", name, "uuid", uuid)
	return nil
}

// gone reports whether a bucket incarnation's entries can no longer be
// applied: it was deleted, or the node is shutting down.
func (r *replication) gone(inc string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deleted[inc] || r.ctx.Err() != nil
}

// follow waits for the partition map of b's incarnation, then runs b's
// groups of this node as the map says, until ctx ends: it applies the map
// again (applyMap) as soon as the mirror holds a new one, and every
// mapRetry all the same, to retry what failed and to finish what waited
// for a conf change to apply here.
func (r *replication) follow(ctx context.Context, b *engine.Bucket) {
	uuid := b.Settings().UUID
	// current returns the map of b's incarnation the mirror holds (nil
	// while it has none, or another incarnation's: a deleted bucket's),
	// with its revision.
	current := func() (*cluster.PartitionMap, int64) {
		m, rev, _, err := r.mirror.Map(b.Name())
		if err != nil {
			r.logger.Warn("replication: reading a bucket's partition map", "bucket", b.Name(), "err", err)
		}
		if m == nil || m.UUID != uuid {
			return nil, 0
		}
		return m, rev
	}
	var m *cluster.PartitionMap
	var rev int64
	for {
		changed := r.mirror.Changed()
		if m, rev = current(); m != nil {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
	if len(m.Partitions) != b.NumPartitions() {
		r.logger.Error("replication: the bucket's partitions are not the map's; its writes will fail",
			"bucket", b.Name(), "partitions", b.NumPartitions(), "map", len(m.Partitions))
		return
	}
	// The partitions' durable positions are known once warm.
	if err := b.WaitWarm(ctx); err != nil {
		return
	}
	if !r.applyMap(ctx, b, m, true) {
		return
	}
	r.logger.Info("replication: running the bucket's groups", "bucket", b.Name(), "groups", len(replica.MapGroups(m, r.h.Node())))
	retry := time.NewTicker(r.retry)
	defer retry.Stop()
	for {
		changed := r.mirror.Changed()
		newer := false
		if got, now := current(); got != nil && now != rev && len(got.Partitions) == b.NumPartitions() {
			m, rev, newer = got, now, true
		}
		if !newer {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				continue // something else changed, or this map: looked at again
			case <-retry.C:
			}
		}
		// Applied again at every retry, changed or not: a copy this node
		// no longer holds is dropped once its conf change applied here.
		if !r.applyMap(ctx, b, m, newer) {
			return
		}
	}
}

// mapRetry is how often a node applies a bucket's map again when the map
// did not change: a safety net for a step that failed (a group that did
// not start, documents not dropped) and for a group to leave once its conf
// change applied here. A new map is applied as soon as the mirror holds
// it.
const mapRetry = 5 * time.Second

// applyMap makes this node's groups of bucket b what map m says (each
// partition's entry, whatever its epoch): a partition of which it is a
// voter and runs no group gets one, started from the common initial state
// while the entry is the placement's first (epoch 1: every voter starts
// it so) and joined empty otherwise (a copy moved here: the group's
// leader sends it a snapshot once its conf change added it); every group
// it runs is told the map's voters and preferred leader
// (replica.Host.SetTarget: its leader proposes the conf change and hands
// over its leadership); a group of a partition it is no longer a voter of
// is removed once its applied configuration no longer has this node (the
// Host drops a group whose conf change removing this node it applied by
// itself) or once the map's entry is newer than the last one that listed
// this node (movedAway: a node cut off when it was failed over never
// receives that conf change), except where the entry sheds this node (a
// lowered replicaNumber, cluster.RemoveCopies: it stays a member until the
// conf change removing it applies here, which the remaining voters may
// need to commit it; a shed copy whose group this process never ran, one
// started since, runs it again from the store; once the partition's
// leader applied that change the orchestrator takes the node out of the
// entry's shed list, cluster.ClearShed, and the newer entry, which
// neither lists nor sheds it, moves the copy away, so that a node cut off
// from the leader, which never receives the change, leaves too), and the
// documents of a partition it is no voter of and runs no group of are
// dropped (engine.Bucket.DropPartition: a copy moved away or shed, whose
// group it left). It reports false when the bucket cannot be replicated or ctx
// ended. The targets are set only for groups just started, or when
// changed says the map is new.
func (r *replication) applyMap(ctx context.Context, b *engine.Bucket, m *cluster.PartitionMap, changed bool) bool {
	uuid, self, inc := b.Settings().UUID, r.h.Node(), incarnation(b)
	var gone []replica.GroupID
	var moved []int // partitions of which this node holds data and no group
	for p, part := range m.Partitions {
		if ctx.Err() != nil {
			return false // detached: a deleted bucket's groups are removed next
		}
		id := replica.BucketGroup(b.Name(), uuid, p)
		voter, shed := slices.Contains(part.Voters, self), slices.Contains(part.Shed, self)
		holds := r.h.Holds(id)
		steer := changed
		stored := false
		if shed && !holds && !r.wasListed(id) {
			var err error
			if stored, err = r.h.Stored(id); err != nil {
				if ctx.Err() != nil {
					return false
				}
				r.logger.Error("replication: reading whether the Raft store holds a shed copy's group (tried again at the next look at the map)", "bucket", b.Name(), "partition", p, "err", err)
				continue
			}
		}
		if stored {
			// A copy shed by a lowering whose group this process never
			// ran (it started since) and the store holds (it has not
			// left): the group runs again from that state, documents or
			// none (a partition never written to is a member too), so
			// that this member's vote and log still count until the conf
			// change removing it applies here. One whose stored
			// configuration no longer has this node goes, and its
			// documents with it; so do the documents of one the store
			// no longer holds (it left before the restart), below.
			sm := replica.NewBucketMachine(b, p, func() bool { return r.gone(inc) })
			err := r.h.JoinGroup(id, append(slices.Clone(part.Voters), self), sm)
			if err != nil && !errors.Is(err, replica.ErrGroupExists) {
				if ctx.Err() != nil {
					return false
				}
				r.logger.Error("replication: restarting the group of a copy being shed (tried again at the next look at the map)", "bucket", b.Name(), "partition", p, "err", err)
				continue
			}
			if vs, err := r.h.Voters(id); err != nil || !slices.Contains(vs, self) {
				moved = append(moved, p)
				continue
			}
			r.list(id, part.Epoch)
			holds, steer = true, true
		}
		if voter && !holds {
			sm := replica.NewBucketMachine(b, p, func() bool { return r.gone(inc) })
			var err error
			if part.Epoch <= 1 {
				err = r.h.AddGroup(id, part.Voters, sm)
			} else {
				err = r.h.JoinGroup(id, part.Voters, sm)
			}
			if errors.Is(err, replica.ErrMachineAhead) {
				// Documents written on this node alone, before it joined:
				// their sequence numbers are not log indexes, and the other
				// copies never had them. Its writes are refused.
				r.logger.Error("replication: the bucket holds documents written before this node joined the cluster; it is not replicated and refuses writes (moving a single node's data into a cluster is to come)",
					"bucket", b.Name(), "partition", p)
				b.SetReplicator(refusing{fmt.Errorf("%w: bucket %q holds documents written before this node joined the cluster: it is not replicated, and takes no write", engine.ErrInvalidOp, b.Name())})
				return false
			}
			if err != nil && !errors.Is(err, replica.ErrGroupExists) {
				if ctx.Err() != nil {
					return false
				}
				r.logger.Error("replication: starting a partition's group (tried again at the next look at the map)", "bucket", b.Name(), "partition", p, "err", err)
				continue
			}
			holds, steer = true, true
		}
		if !holds {
			if !voter && b.ReplicatedDurable(p) > 0 {
				moved = append(moved, p)
			}
			continue
		}
		if steer {
			if err := r.h.SetTarget(id, part.Voters, part.Leader); err != nil && !errors.Is(err, replica.ErrNoGroup) {
				r.logger.Warn("replication: steering a partition's group", "bucket", b.Name(), "partition", p, "err", err)
			}
		}
		if voter {
			r.list(id, part.Epoch)
		} else if !shed && r.movedAway(id, part.Epoch) {
			gone = append(gone, id)
		} else if vs, err := r.h.Voters(id); err == nil && !slices.Contains(vs, self) {
			gone = append(gone, id)
		}
	}
	if len(gone) > 0 {
		if err := r.h.RemoveGroups(ctx, gone); err != nil {
			if ctx.Err() == nil {
				r.logger.Warn("replication: removing the groups of copies moved away", "bucket", b.Name(), "err", err)
			}
		} else {
			r.unlist(gone)
			r.logger.Info("replication: removed the groups of copies moved away", "bucket", b.Name(), "groups", len(gone))
		}
	}
	// A copy moved away, whose group this node left (a poll before, or
	// while it was down): its documents go, and so does what the Raft
	// store still holds of its group (a group left while the node was
	// down is still on its disk; were the copy moved back, a stale group
	// would restart from it rather than join empty). Only once every
	// group of the map started (a bucket holding documents written before
	// the node joined returned above).
	ids := make([]replica.GroupID, len(moved))
	for i, p := range moved {
		ids[i] = replica.BucketGroup(b.Name(), uuid, p)
	}
	if len(moved) > 0 {
		if err := r.h.RemoveGroups(ctx, ids); err != nil {
			if ctx.Err() == nil {
				r.logger.Warn("replication: removing the stored groups of copies moved away (tried again at the next look at the map)", "bucket", b.Name(), "err", err)
			}
			return ctx.Err() == nil
		}
	}
	if len(moved) > 0 {
		// One call: the copies begin one new history, so that a running
		// index rewinds those partitions only (engine.DropPartitions).
		if err := b.DropPartitions(ctx, moved); err != nil {
			if ctx.Err() == nil {
				r.logger.Warn("replication: dropping the documents of copies moved away (tried again at the next look at the map)", "bucket", b.Name(), "partitions", len(moved), "err", err)
			}
			return ctx.Err() == nil
		}
		r.unlist(ids)
		r.logger.Info("replication: dropped the documents of copies moved away", "bucket", b.Name(), "partitions", len(moved))
	}
	return true
}

// wasListed reports whether this process ran group id as a voter (or as a
// shed member) and has not removed it since.
func (r *replication) wasListed(id replica.GroupID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.listed[id]
	return ok
}

// list records that the map entry of epoch listed this node a voter of
// group id, which it runs.
func (r *replication) list(id replica.GroupID, epoch uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listed == nil {
		r.listed = map[replica.GroupID]uint64{}
	}
	if epoch > r.listed[id] {
		r.listed[id] = epoch
	}
}

// movedAway reports whether a map entry of epoch that does not list this
// node moved group id's copy away: it is newer than the newest entry that
// listed it while the group ran here. The map is then authoritative even
// though the group's own configuration may still name this node: a node
// failed over while alive but cut off never receives the conf change
// removing it (its group would keep campaigning, its copy never dropped,
// until a restart). Failover takes a voter out of an entry after the node
// was down for the failover timeout: the majority committed without it all
// that time, so leaving drops nothing only this copy held. (A lowering
// takes voters out too, but marks them shed, and applyMap does not ask
// movedAway about an entry that sheds this node; one that no longer does,
// the node failed over since or its removal applied by the partition's
// leader, cluster.ClearShed, is authoritative again: the change
// committed without this copy.)
func (r *replication) movedAway(id replica.GroupID, epoch uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.listed[id]
	return ok && epoch > at
}

// unlist forgets the groups removed from this node.
func (r *replication) unlist(ids []replica.GroupID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		delete(r.listed, id)
	}
}

// describe is a node's HTTP address as it publishes it, for the error of
// a write sent to a node that does not lead its partition.
func (r *replication) describe(_ context.Context, node string) string {
	info, err := r.mirror.Node(node)
	if err != nil || info.HTTP == "" {
		return ""
	}
	return "http://" + info.HTTP
}

// refusing is the Replicator of a bucket that cannot be replicated: every
// write is refused with its error.
type refusing struct{ err error }

func (r refusing) Writable(context.Context, int) error { return r.err }

func (r refusing) Replicate(context.Context, int, []byte) (engine.ReplicatedResult, error) {
	return engine.ReplicatedResult{}, r.err
}
