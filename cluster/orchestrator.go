package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Orchestrator is the handle of one term of orchestration: a node won the
// election and holds its leadership key. Every map write through it is
// fenced on that key, so a handle kept after its term ended writes nothing
// (ErrDeposed).
type Orchestrator struct {
	cli       *clientv3.Client
	node      string
	key       string // the leadership key
	rev       int64  // its create revision
	peers     []string
	failover  time.Duration
	logger    *slog.Logger
	started   time.Time            // when the term began
	settle    time.Duration        // Config.LeaderSettle
	downSince map[string]time.Time // first seen down in this term; the reconcile loop's only
	upSince   map[string]time.Time // first seen up in this term (since it was last down); the loop's only
	movedAt   map[string]time.Time // by bucket, when this term last failed over some of its partitions; the loop's only
}

// leaderStep bounds how many preferred leaderships of a bucket one
// reconcile moves to even them out (EvenLeaders): each is a Raft leadership
// transfer, so a node's return hands it its share over a few seconds
// rather than stalling a third of the writes at once.
const leaderStep = 64

// copyStep bounds how many partitions of a bucket one reconcile gives
// more copies (AddCopies) after its replicaNumber was raised, or takes
// copies from (RemoveCopies) after it was lowered: each copy added is a
// snapshot of the partition sent to its new node, each one taken away a
// conf change of its group.
const copyStep = 64

// wantsCopies reports whether AddCopies could change some partition of m:
// one with fewer voters than m.Copies and a settled node that holds none
// of its copies.
func wantsCopies(m *PartitionMap, settled []string) bool {
	for _, p := range m.Partitions {
		if len(p.Voters) < m.Copies {
			for _, s := range settled {
				if !slices.Contains(p.Voters, s) {
					return true
				}
			}
		}
	}
	return false
}

// wantsFewer reports whether some partition of m has more voters than
// m.Copies (RemoveCopies takes them away).
func wantsFewer(m *PartitionMap) bool {
	for _, p := range m.Partitions {
		if len(p.Voters) > m.Copies {
			return true
		}
	}
	return false
}

// Node is the name of the node the handle belongs to.
func (o *Orchestrator) Node() string { return o.node }

// PutMap writes a bucket's partition map, fenced: in one etcd transaction
// conditioned on the orchestrator's leadership key still existing with its
// create revision and on the map's mod revision still being readRev (0:
// the map must not exist). It returns the revision written at;
// ErrDeposed when the term is over, ErrMapChanged when the map moved on.
func (o *Orchestrator) PutMap(ctx context.Context, m *PartitionMap, readRev int64) (int64, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return 0, err
	}
	return o.fenced(ctx, mapsPrefix+m.Bucket, readRev, clientv3.OpPut(mapsPrefix+m.Bucket, string(data)), "the map of "+m.Bucket)
}

// deleteMap removes a bucket's map, fenced as PutMap writes one.
func (o *Orchestrator) deleteMap(ctx context.Context, bucket string, readRev int64) error {
	_, err := o.fenced(ctx, mapsPrefix+bucket, readRev, clientv3.OpDelete(mapsPrefix+bucket), "removal of the map of "+bucket)
	return err
}

// fenced runs op (and also) in one etcd transaction conditioned on the
// orchestrator's leadership key still existing with its create revision
// and on key's mod revision still being readRev (0: key must not exist),
// and returns the revision written at; ErrDeposed when the term is over,
// ErrMapChanged when key moved on. what names the write in errors.
func (o *Orchestrator) fenced(ctx context.Context, key string, readRev int64, op clientv3.Op, what string, also ...clientv3.Op) (int64, error) {
	resp, err := o.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(o.key), "=", o.rev),
		clientv3.Compare(clientv3.ModRevision(key), "=", readRev),
	).Then(append([]clientv3.Op{op}, also...)...).Else(clientv3.OpGet(o.key)).Commit()
	if err != nil {
		return 0, fmt.Errorf("cluster: writing %s: %w", what, err)
	}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 || kvs[0].CreateRevision != o.rev {
			return 0, fmt.Errorf("%w: %s's write of %s refused", ErrDeposed, o.node, what)
		}
		return 0, fmt.Errorf("%w: %s", ErrMapChanged, what)
	}
	return resp.Header.Revision, nil
}

// reconcile brings the maps in line with the cluster state once: it places
// the partitions of buckets without a map (once every listed peer is up,
// or the failover timeout after the term began), fails over nodes down
// longer than the failover timeout, takes out of the partitions' Shed
// lists the nodes their leaders report gone (ClearShed), brings each
// partition's copies to
// the bucket's replicaNumber + 1 (AddCopies, RemoveCopies: copyStep
// partitions a step, a step once the last one's settled), clears the
// degraded mark where every copy is back, and evens out the preferred leaders (EvenLeaders,
// leaderStep moves per bucket) of a bucket whose voters (of partitions not
// degraded) have all been up for LeaderSettle, and this term failed over
// nothing of for LeaderSettle, keeping where they are the leaderships of
// partitions in which a leader reports a follower lagging; and it keeps
// each bucket's views' coverage map (reconcileCoverage), and removes that
// of a bucket whose map is gone.
func (o *Orchestrator) reconcile(ctx context.Context) error {
	st, err := readState(ctx, o.cli)
	if err != nil {
		return err
	}
	now := time.Now() // wall clock: failover timeouts are real time between nodes
	var up []string
	known := slices.Clone(o.peers)
	for name := range st.nodes {
		if !slices.Contains(known, name) {
			known = append(known, name)
		}
	}
	for _, name := range known {
		if _, ok := st.nodes[name]; ok {
			up = append(up, name)
			delete(o.downSince, name)
			if _, seen := o.upSince[name]; !seen {
				o.upSince[name] = now
			}
		} else if _, seen := o.downSince[name]; !seen {
			o.downSince[name] = now
			delete(o.upSince, name)
			o.logger.Warn("cluster: node is down (its lease expired or it never registered)", "node", name)
		}
	}
	slices.Sort(up)
	var failed []string
	for name, since := range o.downSince {
		if now.Sub(since) >= o.failover {
			failed = append(failed, name)
		}
	}
	slices.Sort(failed)
	allUp := len(up) == len(known)
	// A node is settled once up for o.settle as this term saw it and
	// since it registered (a node restarted within its old lease's TTL is
	// never seen down; a registration time ahead of this clock is not
	// trusted).
	var settled []string
	for _, name := range up {
		since := o.upSince[name]
		if reg := st.nodes[name].Started; reg.After(since) && !reg.After(now) {
			since = reg
		}
		if now.Sub(since) >= o.settle {
			settled = append(settled, name)
		}
	}
	var lagging map[string]map[int]bool // by bucket, read when first needed
	var left map[shedLeftKey]bool       // the ShedLeft reports, read when first needed

	// A map whose bucket is no longer defined, or is defined again as
	// another incarnation, is removed (the deletion's transaction removes
	// the map with the definition; this covers a map placed from a read
	// made before it).
	for _, name := range slices.Sorted(maps.Keys(st.maps)) {
		def, ok := st.buckets[name]
		if ok && def.UUID == st.maps[name].UUID {
			continue
		}
		if err := o.deleteMap(ctx, name, st.mapRevs[name]); err != nil {
			return err
		}
		o.logger.Info("cluster: removed the map of a deleted bucket", "bucket", name, "uuid", st.maps[name].UUID)
		delete(st.maps, name)
		delete(st.mapRevs, name)
	}

	for _, name := range slices.Sorted(maps.Keys(st.buckets)) {
		def := st.buckets[name]
		m, rev := st.maps[name], st.mapRevs[name]
		if m == nil {
			if !allUp && now.Sub(o.started) < o.failover {
				continue // wait for the listed nodes before placing
			}
			if len(up) == 0 {
				continue
			}
			m = &PartitionMap{Bucket: name, UUID: def.UUID, Copies: def.Replicas() + 1, Partitions: Place(up, def.Partitions(), def.Replicas()+1)}
			if _, err := o.PutMap(ctx, m, 0); err != nil {
				return err
			}
			o.logger.Info("cluster: placed bucket's partitions", "bucket", name, "nodes", len(up), "copies", m.Copies)
			continue
		}
		changed := 0
		// Shed nodes a leader reports gone from its applied configuration
		// leave the Shed lists first, matched against the epochs as read.
		if hasShed(m.Partitions) {
			if left == nil {
				if left, err = readShedLeft(ctx, o.cli); err != nil {
					return err
				}
			}
			uuid := m.UUID
			if c := ClearShed(m.Partitions, func(p int, epoch uint64, node string) bool {
				return left[shedLeftKey{name, uuid, p, epoch, node}]
			}); len(c) > 0 {
				changed += len(c)
				o.logger.Info("cluster: shed copies left their groups: taken out of the partitions' shed lists", "bucket", name, "partitions", len(c))
			}
		}
		for _, down := range failed {
			if c := Failover(m.Partitions, down, up); len(c) > 0 {
				changed += len(c)
				o.movedAt[name] = now
				o.logger.Warn("cluster: failed over node's partitions", "bucket", name, "node", down, "partitions", len(c))
			}
		}
		if want := def.Replicas() + 1; want != m.Copies {
			how := "raised: its partitions get more copies"
			if want < m.Copies {
				how = "lowered: its partitions shed copies"
			}
			o.logger.Info("cluster: bucket's replicaNumber "+how, "bucket", name, "copies", want, "were", m.Copies)
			m.Copies = want
			changed++
		}
		// Copies added (AddCopies) or taken away (RemoveCopies) a step at
		// a time: each copy added is a snapshot sent to its node, each one
		// taken away a conf change, so the next step waits for the last
		// one's to be done (o.settle, and no partition whose leader
		// reports a follower lagging).
		if at, ok := o.movedAt[name]; (wantsCopies(m, settled) || wantsFewer(m)) && (!ok || now.Sub(at) >= o.settle) {
			if lagging == nil {
				if lagging, err = o.laggingPartitions(ctx, st); err != nil {
					return err
				}
			}
			held := lagging[name]
			skip := func(p int) bool { return held[p] }
			if c := AddCopies(m.Partitions, m.Copies, up, settled, skip, copyStep); len(c) > 0 {
				changed += len(c)
				o.movedAt[name] = now
				o.logger.Info("cluster: added partitions' copies towards the bucket's replicaNumber", "bucket", name, "copies", m.Copies, "partitions", len(c))
			}
			var leaders []string // the Raft leaders the nodes up report: the copies a lowering keeps first
			if wantsFewer(m) {
				isUp := func(n string) bool { _, ok := st.nodes[n]; return ok }
				if leaders, err = readRaftLeaders(ctx, o.cli, name, m.UUID, len(m.Partitions), isUp); err != nil {
					return err
				}
			}
			if c := RemoveCopies(m.Partitions, m.Copies, up, failed, skip, leaders, copyStep); len(c) > 0 {
				changed += len(c)
				o.movedAt[name] = now
				o.logger.Info("cluster: partitions shed copies towards the bucket's replicaNumber", "bucket", name, "copies", m.Copies, "partitions", len(c))
			}
		}
		if c := Recover(m.Partitions, m.Copies, up); len(c) > 0 {
			changed += len(c)
			o.logger.Info("cluster: partitions have every copy again", "bucket", name, "partitions", len(c))
		}
		// A copy moved by a failover may still be arriving before its
		// leader reports it lagging: its bucket's leaders wait.
		if at, ok := o.movedAt[name]; changed == 0 && len(settled) > 1 && (!ok || now.Sub(at) >= o.settle) {
			if lagging == nil {
				if lagging, err = o.laggingPartitions(ctx, st); err != nil {
					return err
				}
			}
			held := lagging[name]
			if c := EvenLeaders(m.Partitions, settled, func(p int) bool { return held[p] }, leaderStep); len(c) > 0 {
				changed += len(c)
				o.logger.Info("cluster: moved preferred leaderships to even them out", "bucket", name, "partitions", len(c))
			}
		}
		if changed > 0 {
			if _, err := o.PutMap(ctx, m, rev); err != nil {
				return err
			}
		}
		if err := o.reconcileCoverage(ctx, st, m, settled); err != nil {
			return err
		}
	}
	// A coverage map without its bucket's map (the bucket deleted) goes.
	for _, name := range slices.Sorted(maps.Keys(st.covs)) {
		if m := st.maps[name]; m == nil {
			if err := o.deleteCoverage(ctx, name, st.covRevs[name]); err != nil {
				return err
			}
		}
	}
	return nil
}

// reconcileCoverage brings bucket m's coverage map in line with m (as this
// reconcile leaves it) and the nodes: written first with each partition's
// preferred leader (again when it belongs to another incarnation of the
// bucket or does not decode), then moved as moveCoverage says.
func (o *Orchestrator) reconcileCoverage(ctx context.Context, st *state, m *PartitionMap, settled []string) error {
	c, rev := st.covs[m.Bucket], st.covRevs[m.Bucket]
	if c == nil || c.UUID != m.UUID || len(c.Partitions) != len(m.Partitions) {
		if _, err := o.PutCoverage(ctx, initialCoverage(m), rev); err != nil {
			return err
		}
		o.logger.Info("cluster: views' coverage set to the preferred leaders", "bucket", m.Bucket)
		return nil
	}
	up := func(n string) bool { _, ok := st.nodes[n]; return ok }
	isSettled := func(n string) bool { return slices.Contains(settled, n) }
	if n := moveCoverage(c, rev, m, up, isSettled, st.ready[m.Bucket]); n > 0 {
		if _, err := o.PutCoverage(ctx, c, rev); err != nil {
			return err
		}
		o.logger.Info("cluster: views' coverage moved", "bucket", m.Bucket, "partitions", n)
	}
	return nil
}

// laggingPartitions is, by bucket, the partitions in which a leader that
// is up reports a follower that does not keep up (a copy still arriving,
// or behind): their leaderships are not moved.
func (o *Orchestrator) laggingPartitions(ctx context.Context, st *state) (map[string]map[int]bool, error) {
	reports, err := readLag(ctx, o.cli)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int]bool{}
	for leader, lags := range reports {
		if _, up := st.nodes[leader]; !up {
			continue // the report of a node down: its groups elected others
		}
		for _, l := range lags {
			if out[l.Bucket] == nil {
				out[l.Bucket] = map[int]bool{}
			}
			for _, p := range l.Partitions {
				out[l.Bucket][p] = true
			}
		}
	}
	return out, nil
}
