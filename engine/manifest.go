package engine

import (
	"context"
	"fmt"
	"maps"
)

// Manifest is a bucket's scopes and collections as one value, with their
// collection IDs, the next ID to give and the manifest UID (Couchbase's
// collections manifest): what a cluster keeps in its state and every node
// applies (ApplyManifest), so that collection IDs, which the KV protocol
// carries, agree across nodes. Its edits check what the bucket's own
// methods (CreateScope, CreateCollectionWith, DropScope, DropCollection)
// check; each successful edit counts one more UID.
type Manifest struct {
	// UID counts the changes of the scopes and collections.
	UID uint64 `json:"uid"`
	// NextCID is the ID the next collection created gets.
	NextCID CollectionID `json:"nextCollectionID"`
	// Scopes holds each scope's collections by name.
	Scopes map[string]map[string]collectionInfo `json:"scopes"`
}

// Manifest returns the bucket's scopes and collections.
func (b *Bucket) Manifest() Manifest {
	b.mu.RLock()
	defer b.mu.RUnlock()
	m := Manifest{UID: b.mu.manifest, NextCID: b.mu.nextCID, Scopes: make(map[string]map[string]collectionInfo, len(b.mu.scopes))}
	for name, colls := range b.mu.scopes {
		m.Scopes[name] = maps.Clone(colls)
	}
	return m
}

// clone returns a deep copy of m.
func (m Manifest) clone() Manifest {
	c := m
	c.Scopes = make(map[string]map[string]collectionInfo, len(m.Scopes))
	for name, colls := range m.Scopes {
		c.Scopes[name] = maps.Clone(colls)
	}
	return c
}

// Collection returns collection name of scope.
func (m Manifest) Collection(scope, name string) (CollectionInfo, bool) {
	ci, ok := m.Scopes[scope][name]
	return ci.info(name), ok
}

// CreateScope adds an empty scope (ErrScopeExists if it is there).
func (m *Manifest) CreateScope(name string) error {
	if err := validateScopeName("scope", name); err != nil {
		return err
	}
	if _, ok := m.Scopes[name]; ok {
		return fmt.Errorf("%w: %s", ErrScopeExists, name)
	}
	if m.Scopes == nil {
		m.Scopes = map[string]map[string]collectionInfo{}
	}
	m.Scopes[name] = map[string]collectionInfo{}
	m.UID++
	return nil
}

// CreateCollection adds a collection to a scope with the next ID.
func (m *Manifest) CreateCollection(scope, name string, cs CollectionSettings) (CollectionInfo, error) {
	if err := validateScopeName("collection", name); err != nil {
		return CollectionInfo{}, err
	}
	if err := cs.Validate(); err != nil {
		return CollectionInfo{}, err
	}
	colls, ok := m.Scopes[scope]
	if !ok {
		return CollectionInfo{}, fmt.Errorf("%w: %s", ErrScopeNotFound, scope)
	}
	if _, ok := colls[name]; ok {
		return CollectionInfo{}, fmt.Errorf("%w: %s.%s", ErrCollectionExists, scope, name)
	}
	ci := collectionInfo{ID: m.NextCID, MaxTTL: cs.MaxTTL, DefaultTTL: cs.DefaultTTL, IdleTTL: cs.IdleTTL, MaxLifetime: cs.MaxLifetime}
	colls[name] = ci
	m.NextCID++
	m.UID++
	return ci.info(name), nil
}

// DropScope removes a scope and its collections (not _default) and
// returns their IDs.
func (m *Manifest) DropScope(name string) ([]CollectionID, error) {
	if name == "_default" {
		return nil, fmt.Errorf("%w: the _default scope cannot be dropped", ErrInvalidSetting)
	}
	colls, ok := m.Scopes[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrScopeNotFound, name)
	}
	var ids []CollectionID
	for _, ci := range colls {
		ids = append(ids, ci.ID)
	}
	delete(m.Scopes, name)
	m.UID++
	return ids, nil
}

// DropCollection removes a collection (not _default._default) and returns
// its ID.
func (m *Manifest) DropCollection(scope, name string) (CollectionID, error) {
	if scope == "_default" && name == "_default" {
		return 0, fmt.Errorf("%w: the _default collection cannot be dropped", ErrInvalidSetting)
	}
	colls, ok := m.Scopes[scope]
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrScopeNotFound, scope)
	}
	ci, ok := colls[name]
	if !ok {
		return 0, fmt.Errorf("%w: %s.%s", ErrCollectionNotFound, scope, name)
	}
	delete(colls, name)
	m.UID++
	return ci.ID, nil
}

// ApplyManifest makes the bucket's scopes and collections m's, with m's
// IDs and UID, and removes the documents of the collections m no longer
// has (as DropCollection does), those of the collections created after
// the bucket's manifest and dropped before m included (their replicated
// writes may have been applied here first). The manifest the bucket has
// already changes nothing. The caller orders the manifests (a cluster node
// applies the one its cluster's state holds): an older one applied after a
// newer one takes the bucket back to it. A memcached bucket has no collections
// (ErrInvalidSetting). A collection whose TTL settings m changes (or whose
// TTLRev it counts on: Manifest.UpdateCollection) has its documents
// re-evaluated in the background, as UpdateCollection does, each partition
// by its leader on a replicated bucket (replttl.go; WaitReevaluation
// waits for it).
func (b *Bucket) ApplyManifest(ctx context.Context, m Manifest) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.ddl.Lock()
	defer b.ddl.Unlock()
	ce, err := b.catalogCopy()
	if err != nil {
		return err
	}
	if ce.Settings.Type == Memcached {
		return fmt.Errorf("%w: memcached buckets have no collections", ErrInvalidSetting)
	}
	if m.UID == ce.Manifest && m.NextCID == ce.NextCID && maps.EqualFunc(ce.Scopes, m.Scopes, maps.Equal) {
		return nil
	}
	m = m.clone()
	if _, ok := m.Scopes["_default"]["_default"]; !ok {
		return fmt.Errorf("%w: a manifest without _default._default", ErrInvalidSetting)
	}
	gone := map[CollectionID]bool{}
	for _, colls := range ce.Scopes {
		for _, ci := range colls {
			gone[ci.ID] = true
		}
	}
	// A collection created and dropped since the manifest the bucket has
	// (an ID from its next one up to m's) may hold documents all the
	// same: replicated writes to a collection the bucket does not know
	// yet are kept (ApplyReplicated), and it is gone too.
	for cid := ce.NextCID; cid < m.NextCID; cid++ {
		gone[cid] = true
	}
	for _, colls := range m.Scopes {
		for _, ci := range colls {
			delete(gone, ci.ID)
		}
	}
	changed := ttlChanged(ce.Scopes, m.Scopes)
	ce.Scopes, ce.NextCID, ce.Manifest = m.Scopes, m.NextCID, m.UID
	if err := b.storeCatalog(ce); err != nil {
		return err
	}
	for _, ci := range changed {
		b.repl.ttl.start(b, ci.ID, m.UID, ci.TTLAt)
	}
	for cid := range gone {
		b.repl.ttl.forget(cid)
	}
	if len(gone) == 0 {
		return nil
	}
	return b.dropDocuments(ctx, gone)
}
