package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/search"
	"github.com/mayflydb/mayfly/views"
)

// defsRetry is how often a cluster node looks again at the buckets whose
// definitions it could not apply yet (a bucket not open here yet, a
// failed apply).
const defsRetry = 2 * time.Second

// clusterDefs keeps a cluster node's design documents and full-text index
// definitions in etcd (issue 22): a PUT or DELETE on any node is checked
// by the node's own service, written to etcd, and applied by every node to
// its own views and search services from its mirror of etcd's keys
// (cluster.DefMirror). What a node applies is what etcd holds: a later
// write wins on every node, a node that was down applies at start what
// changed meanwhile, and removes what etcd no longer holds.
//
// It is the front door's side of the seam: views and search know nothing
// of the cluster, they store what they are given (PutDesignDocVersion,
// PutIndexDef: every node stores the same version, the same uuid). A
// single node does not make one: its HTTP API calls the services
// directly.
type clusterDefs struct {
	cli    *clientv3.Client
	eng    *engine.Engine
	views  *views.Service
	search *search.Service
	logger *slog.Logger
	ddocs  *cluster.DefMirror
	sdefs  *cluster.DefMirror
	mans   *cluster.DefMirror // collections manifests
	flush  *cluster.DefMirror // buckets' flushes (clusterflush.go)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // a bucket was marked dirty

	dirtyMu sync.Mutex
	dirty   map[string]bool // buckets to apply again ("" : all)
	// flushDirty are the buckets whose flush alone to take up again (""
	// : all): their flush record changed, nothing else.
	flushDirty map[string]bool

	// mu serializes the applies (the reconciling goroutine and a request
	// applying its own write).
	mu sync.Mutex
	// done is, by bucket, the engine bucket last applied completely: a
	// bucket opened again (created again, restarted) is applied again.
	done map[string]*engine.Bucket
	// warned is the failure last logged of each definition ("bucket/what"),
	// so one that keeps failing is logged once, not at every retry.
	warned map[string]string

	// flushMu guards flushCh, closed (and replaced) at every change of
	// the flush mirror (a doFlush waiting for its flush to finish wakes),
	// and flushWait.
	flushMu sync.Mutex
	flushCh chan struct{}
	// flushWait bounds a flush's wait for every partition to finish
	// (flushWait, the constant; a test shortens it).
	flushWait time.Duration
}

// startClusterDefs starts mirroring the definitions in etcd and applying
// them to vsvc and ssvc.
func startClusterDefs(cli *clientv3.Client, eng *engine.Engine, vsvc *views.Service, ssvc *search.Service, logger *slog.Logger) *clusterDefs {
	ctx, cancel := context.WithCancel(context.Background())
	c := &clusterDefs{cli: cli, eng: eng, views: vsvc, search: ssvc, logger: logger,
		ddocs: cluster.NewDefMirror(cli, cluster.DesignDocs), sdefs: cluster.NewDefMirror(cli, cluster.SearchDefs),
		mans: cluster.NewDefMirror(cli, cluster.Manifests), flush: cluster.NewDefMirror(cli, cluster.Flushes),
		ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1), dirty: map[string]bool{}, flushDirty: map[string]bool{}, done: map[string]*engine.Bucket{},
		warned: map[string]string{}, flushCh: make(chan struct{}), flushWait: flushWait}
	c.wg.Go(func() { c.ddocs.Run(ctx, c.markDirty) })
	c.wg.Go(func() { c.sdefs.Run(ctx, c.markDirty) })
	c.wg.Go(func() { c.mans.Run(ctx, c.markDirty) })
	c.wg.Go(func() { c.flush.Run(ctx, c.flushChanged) })
	c.wg.Go(c.reconcileLoop)
	return c
}

// Close stops mirroring and applying.
func (c *clusterDefs) Close() {
	c.cancel()
	c.wg.Wait()
}

// markDirty asks for bucket's definitions ("": every bucket's) to be
// applied again.
func (c *clusterDefs) markDirty(bucket string) { c.mark(bucket, false) }

// markFlushDirty asks for bucket's flush ("": every bucket's) to be taken
// up again, and nothing else of its definitions.
func (c *clusterDefs) markFlushDirty(bucket string) { c.mark(bucket, true) }

// mark records bucket in c.dirty, or c.flushDirty for its flush alone, and
// wakes the reconciling goroutine. The set is picked under dirtyMu: the
// goroutine swaps both for empty ones under it.
func (c *clusterDefs) mark(bucket string, flushOnly bool) {
	c.dirtyMu.Lock()
	if flushOnly {
		c.flushDirty[bucket] = true
	} else {
		c.dirty[bucket] = true
	}
	c.dirtyMu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// reconcileLoop applies the buckets marked dirty, takes up the flush of
// those whose flush alone changed, and every defsRetry applies the
// buckets not applied completely.
func (c *clusterDefs) reconcileLoop() {
	t := time.NewTicker(defsRetry)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.kick:
		case <-t.C:
		}
		if !c.ddocs.Loaded() || !c.sdefs.Loaded() || !c.mans.Loaded() || !c.flush.Loaded() {
			continue // nothing is removed before etcd's state is known
		}
		c.dirtyMu.Lock()
		dirty, flushDirty := c.dirty, c.flushDirty
		c.dirty, c.flushDirty = map[string]bool{}, map[string]bool{}
		c.dirtyMu.Unlock()
		for _, b := range c.eng.Buckets() {
			c.mu.Lock()
			switch {
			case dirty[""] || dirty[b.Name()] || c.done[b.Name()] != b:
				c.applyLocked(c.ctx, b) // the flush too
			case flushDirty[""] || flushDirty[b.Name()]:
				// A flush record changes at every partition a pass
				// finishes, on every node: the design documents, search
				// definitions and manifest have not.
				c.applyFlushLocked(b)
			}
			c.mu.Unlock()
		}
	}
}

// applyLocked makes b's collections, design documents and search
// definitions those of the mirrors, takes up its latest flush, and returns
// why each one that failed did: by "_design/NAME", "index/NAME",
// cluster.ManifestName and cluster.FlushName. b is recorded done when
// nothing failed. A memcached bucket has only its flush.
//
// REQUIRES: c.mu held.
func (c *clusterDefs) applyLocked(ctx context.Context, b *engine.Bucket) map[string]error {
	failed := map[string]error{}
	c.applyFlush(b, failed)
	complete := true
	if b.Settings().Type != engine.Memcached {
		// Collections first: a search definition may name one.
		c.applyManifest(ctx, b, failed)
		complete = c.applyDesignDocs(ctx, b.Name(), failed)
		complete = c.applySearchDefs(ctx, b.Name(), failed) && complete
	}
	c.warnFailedLocked(b, failed)
	if complete && len(failed) == 0 {
		c.done[b.Name()] = b
	} else {
		delete(c.done, b.Name())
	}
	return failed
}

// warnFailedLocked logs each of b's definitions that failed to apply,
// once for as long as it fails the same way.
//
// REQUIRES: c.mu held.
func (c *clusterDefs) warnFailedLocked(b *engine.Bucket, failed map[string]error) {
	for what, err := range failed {
		if key := b.Name() + "/" + what; c.ctx.Err() == nil && c.warned[key] != err.Error() {
			c.warned[key] = err.Error()
			c.logger.Warn("cluster: applying a definition from the cluster's state; trying again", "bucket", b.Name(), "definition", what, "err", err)
		}
	}
}

// applyManifest gives b the scopes and collections of the manifest the
// cluster's state holds for it, if it holds one (until a first change,
// every node's bucket has the scopes it was made with).
func (c *clusterDefs) applyManifest(ctx context.Context, b *engine.Bucket, failed map[string]error) {
	for _, d := range c.mans.Bucket(b.Name()) {
		if d.Name != cluster.ManifestName {
			continue
		}
		m, err := cluster.ParseManifest(d.Value)
		if err == nil {
			err = b.ApplyManifest(ctx, m)
		}
		if err != nil {
			failed[cluster.ManifestName] = err
		}
	}
}

// applyDesignDocs stores bucket's design documents at the mirror's versions
// and deletes those the mirror does not hold live; false when the bucket's
// stored ones are not all loaded yet (some may be left to delete).
func (c *clusterDefs) applyDesignDocs(ctx context.Context, bucket string, failed map[string]error) bool {
	if c.views == nil {
		return true
	}
	live := map[string]bool{}
	for _, d := range c.ddocs.Bucket(bucket) {
		def, err := cluster.ParseDesignDocDef(d.Value)
		if err != nil {
			failed[views.DesignDocPrefix+d.Name] = err
			live[d.Name] = true // kept as it is here
			continue
		}
		if def.Deleted {
			continue
		}
		live[d.Name] = true
		if cur, err := c.views.DesignDoc(ctx, bucket, d.Name); err == nil && cur.Version() == def.Version && bytes.Equal(cur.Body, def.Body) {
			continue
		}
		if _, err := c.views.PutDesignDocVersion(ctx, bucket, d.Name, def.Body, def.Version); err != nil {
			failed[views.DesignDocPrefix+d.Name] = err
		}
	}
	loaded := c.views.Loaded(bucket)
	local, err := c.views.DesignDocs(ctx, bucket)
	if err != nil {
		return false
	}
	var ids []string
	for _, d := range local {
		ids = append(ids, d.ID)
	}
	broken, _ := c.views.LoadErrors(ctx, bucket)
	for id := range broken {
		ids = append(ids, id)
	}
	for _, id := range ids {
		name := id[len(views.DesignDocPrefix):]
		if live[name] {
			continue
		}
		if err := c.views.DeleteDesignDoc(ctx, bucket, name); err != nil && !errors.Is(err, views.ErrNotFound) {
			failed[id] = err
		}
	}
	return loaded
}

// applySearchDefs stores bucket's search definitions as the mirror holds
// them (indexes before aliases, which need their targets) and deletes
// those it does not hold; false when the bucket's definitions cannot be
// listed yet.
func (c *clusterDefs) applySearchDefs(ctx context.Context, bucket string, failed map[string]error) bool {
	if c.search == nil {
		return true
	}
	local, err := c.search.ListIndexes(ctx, bucket)
	if err != nil {
		return false
	}
	want := map[string]cluster.Def{}
	var indexes, aliases []cluster.Def
	for _, d := range c.sdefs.Bucket(bucket) {
		want[d.Name] = d
		var t struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(d.Value, &t) == nil && t.Type == search.AliasType {
			aliases = append(aliases, d)
		} else {
			indexes = append(indexes, d)
		}
	}
	// Deletes first: a name may move from one bucket to another.
	names := map[string]bool{}
	for _, d := range local {
		names[d.Name] = true
	}
	broken, _ := c.search.LoadErrors(ctx, bucket)
	for name := range broken {
		names[name] = true
	}
	for name := range names {
		if _, ok := want[name]; ok {
			continue
		}
		if err := c.search.DeleteIndex(ctx, bucket, name); err != nil && !errors.Is(err, search.ErrNotFound) {
			failed[indexKey(name)] = err
		}
	}
	for _, d := range append(indexes, aliases...) {
		if _, err := c.search.PutIndexDef(ctx, bucket, d.Name, d.Value); err != nil {
			failed[indexKey(d.Name)] = err
		}
	}
	return true
}

// indexKey names search index name among a bucket's failed definitions.
func indexKey(name string) string { return "index/" + name }

// applyWrite waits until mirror m holds etcd's state at rev (this node's
// write to m's keys: the other mirror sees no event at rev; at most
// cluster.ApplyWait, cluster.ErrUnavailable after that), applies bucket's
// definitions, and returns the error of the one called name, if it
// failed.
func (c *clusterDefs) applyWrite(ctx context.Context, m *cluster.DefMirror, bucket, name string, rev int64) error {
	if err := cluster.WaitApplied(ctx, func(ctx context.Context) error { return m.WaitRevision(ctx, rev) }); err != nil {
		return err
	}
	b, err := c.eng.Bucket(bucket)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applyLocked(ctx, b)[name]
}

// PutDesignDoc checks a design document on this node, writes it to etcd as
// the design document's next version, and answers once this node applied
// it (every node applies it from etcd). Without an etcd quorum it fails
// within cluster.WriteTimeout with cluster.ErrUnavailable (a 503), as
// every write of clusterDefs does.
func (c *clusterDefs) PutDesignDoc(ctx context.Context, bucket, name string, body []byte) (*views.DesignDoc, error) {
	if err := c.views.CheckDesignDoc(ctx, bucket, name, body); err != nil {
		return nil, err
	}
	_, rev, err := cluster.PutDesignDoc(ctx, c.cli, bucket, name, body)
	if err != nil {
		return nil, err
	}
	if err := c.applyWrite(ctx, c.ddocs, bucket, views.DesignDocPrefix+name, rev); err != nil {
		return nil, err
	}
	return c.views.DesignDoc(ctx, bucket, name)
}

// DeleteDesignDoc deletes a design document from etcd and answers once
// this node removed it (every node removes it).
func (c *clusterDefs) DeleteDesignDoc(ctx context.Context, bucket, name string) error {
	rev, err := cluster.DeleteDesignDoc(ctx, c.cli, bucket, name)
	if errors.Is(err, cluster.ErrDefNotFound) {
		return fmt.Errorf("%w: design document `%s%s` not found", views.ErrNotFound, views.DesignDocPrefix, name)
	}
	if err != nil {
		return err
	}
	return c.applyWrite(ctx, c.ddocs, bucket, views.DesignDocPrefix+name, rev)
}

// clusterSearch is the search service of a cluster node's HTTP API: its
// definitions are written to etcd (clusterDefs), everything else is the
// node's own service.
type clusterSearch struct {
	*search.Service
	defs *clusterDefs
}

// PutIndex checks a definition on this node (giving it a uuid), writes it
// to etcd, and answers once this node applied it (every node applies the
// same definition, uuid included).
func (s clusterSearch) PutIndex(ctx context.Context, bucket, name string, body []byte) (*search.IndexDef, error) {
	d, err := s.Service.CheckIndex(ctx, bucket, name, body)
	if err != nil {
		return nil, err
	}
	rev, err := cluster.PutSearchDef(ctx, s.defs.cli, bucket, name, d.Body)
	if err != nil {
		return nil, err
	}
	if err := s.defs.applyWrite(ctx, s.defs.sdefs, bucket, indexKey(name), rev); err != nil {
		return nil, err
	}
	return s.Service.GetIndex(ctx, bucket, name)
}

// DeleteIndex deletes a definition from etcd and answers once this node
// removed its index (every node removes it).
func (s clusterSearch) DeleteIndex(ctx context.Context, bucket, name string) error {
	rev, err := cluster.DeleteSearchDef(ctx, s.defs.cli, bucket, name)
	if errors.Is(err, cluster.ErrDefNotFound) {
		return fmt.Errorf("%w: index %s not found in bucket %s", search.ErrNotFound, name, bucket)
	}
	if err != nil {
		return err
	}
	return s.defs.applyWrite(ctx, s.defs.sdefs, bucket, indexKey(name), rev)
}

// CreateScope adds a scope to b's manifest in the cluster's state and
// answers once this node applied it (every node applies it).
func (c *clusterDefs) CreateScope(ctx context.Context, b *engine.Bucket, name string) error {
	return c.updateManifest(ctx, b, func(m *engine.Manifest) error { return m.CreateScope(name) })
}

// CreateCollection adds a collection to b's manifest in the cluster's
// state, with the ID that manifest gives it, and answers once this node
// applied it (every node applies it: the ID is the same everywhere).
func (c *clusterDefs) CreateCollection(ctx context.Context, b *engine.Bucket, scope, name string, cs engine.CollectionSettings) (engine.CollectionInfo, error) {
	var ci engine.CollectionInfo
	err := c.updateManifest(ctx, b, func(m *engine.Manifest) error {
		var err error
		ci, err = m.CreateCollection(scope, name, cs)
		return err
	})
	return ci, err
}

// DropScope removes a scope from b's manifest in the cluster's state; every
// node drops it and its documents.
func (c *clusterDefs) DropScope(ctx context.Context, b *engine.Bucket, name string) error {
	return c.updateManifest(ctx, b, func(m *engine.Manifest) error {
		_, err := m.DropScope(name)
		return err
	})
}

// DropCollection removes a collection from b's manifest in the cluster's
// state; every node drops it and its documents.
func (c *clusterDefs) DropCollection(ctx context.Context, b *engine.Bucket, scope, name string) error {
	return c.updateManifest(ctx, b, func(m *engine.Manifest) error {
		_, err := m.DropCollection(scope, name)
		return err
	})
}

// updateManifest edits b's manifest in etcd (the bucket's own when etcd
// holds none yet) and applies it here. A memcached bucket has no
// collections.
func (c *clusterDefs) updateManifest(ctx context.Context, b *engine.Bucket, edit func(*engine.Manifest) error) error {
	_, err := c.updateManifestUID(ctx, b, edit)
	return err
}

// updateManifestUID is updateManifest, returning the UID of the manifest
// written.
func (c *clusterDefs) updateManifestUID(ctx context.Context, b *engine.Bucket, edit func(*engine.Manifest) error) (uint64, error) {
	if b.Settings().Type == engine.Memcached {
		return 0, fmt.Errorf("%w: memcached buckets have no scopes or collections", engine.ErrInvalidSetting)
	}
	var editErr error
	m, rev, err := cluster.UpdateManifest(ctx, c.cli, b.Name(), b.Manifest, func(m *engine.Manifest) error {
		editErr = edit(m)
		return editErr
	})
	if editErr != nil {
		return 0, editErr // refused: nothing written
	}
	if err != nil {
		return 0, err
	}
	return m.UID, c.applyWrite(ctx, c.mans, b.Name(), cluster.ManifestName, rev)
}

// UpdateCollection changes a collection's TTL settings in b's manifest in
// the cluster's state (checked as one node checks them; a new TTLRev even
// when they stay), so that every node has them: each node applying the
// manifest re-evaluates the collection's documents in the partitions it
// leads, as replicated writes (engine/replttl.go). It answers once this
// node applied the settings and finished its own pass, with how many
// documents this node re-wrote. A temporary failure in that pass (a
// group without a leader for a moment) is no failure of the change: the
// settings are the cluster's, and the partitions the pass could not
// finish are caught up in the background by whichever node leads them
// next; the count is then what the pass re-wrote before it stopped.
func (c *clusterDefs) UpdateCollection(ctx context.Context, b *engine.Bucket, scope, name string, fn func(*engine.CollectionSettings) error) (engine.CollectionInfo, int, error) {
	var ci engine.CollectionInfo
	uid, err := c.updateManifestUID(ctx, b, func(m *engine.Manifest) error {
		var err error
		ci, err = m.UpdateCollection(scope, name, b.Clock().Now(), fn)
		return err
	})
	if err != nil {
		return engine.CollectionInfo{}, 0, err
	}
	n, err := b.WaitReevaluation(ctx, ci.ID, uid)
	if errors.Is(err, engine.ErrTempFail) {
		err = nil
	}
	return ci, n, err
}
