package engine

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"
	"sync/atomic"
)

// collectionInfo describes one collection.
type collectionInfo struct {
	ID          CollectionID `json:"uid"`
	MaxTTL      int64        `json:"maxTTL"`
	DefaultTTL  int64        `json:"defaultTTL,omitempty"`
	IdleTTL     int64        `json:"idleTTL,omitempty"`
	MaxLifetime int64        `json:"maxLifetime,omitempty"`
	// TTLRev counts the collection's settings changes made through a
	// manifest (Manifest.UpdateCollection), so that a node applying one
	// re-evaluates the collection's documents even when the settings are
	// the ones it had (a re-run after a pass cut short).
	TTLRev uint64 `json:"ttlRev,omitempty"`
	// TTLAt is when (the bucket clock's Unix seconds) the node that made
	// the last such change made it; 0 in a manifest from before it was
	// kept. A catch-up of the re-evaluation counts a sliding rule from it
	// (replttl.go), the same time on every node.
	TTLAt int64 `json:"ttlAt,omitempty"`
}

// settings returns the collection's TTL settings.
func (ci collectionInfo) settings() CollectionSettings {
	return CollectionSettings{MaxTTL: ci.MaxTTL, DefaultTTL: ci.DefaultTTL, IdleTTL: ci.IdleTTL, MaxLifetime: ci.MaxLifetime}
}

// info returns the collection's description under name.
func (ci collectionInfo) info(name string) CollectionInfo {
	return CollectionInfo{Name: name, ID: ci.ID, MaxTTL: ci.MaxTTL, DefaultTTL: ci.DefaultTTL, IdleTTL: ci.IdleTTL, MaxLifetime: ci.MaxLifetime}
}

// ScopeInfo lists a scope and its collections, as GET .../scopes shows them.
type ScopeInfo struct {
	// Name is the scope name.
	Name string
	// Collections are the scope's collections, by name.
	Collections []CollectionInfo
}

// CollectionInfo describes a collection.
type CollectionInfo struct {
	// Name is the collection name.
	Name string
	// ID is the collection's ID inside its bucket.
	ID CollectionID
	// MaxTTL is the collection's maxTTL in seconds: 0 inherits the bucket's,
	// NeverExpire (-1) means never expire.
	MaxTTL int64
	// DefaultTTL, IdleTTL and MaxLifetime are the collection's TTL settings
	// (see CollectionSettings); 0 is off.
	DefaultTTL, IdleTTL, MaxLifetime int64
}

// Bucket is a named container of scopes, collections and documents. It is safe
// for concurrent use.
type Bucket struct {
	eng   *Engine
	name  string
	dir   string // data folder; "" for buckets that keep nothing on disk
	clock Clock
	parts []*partition
	exps  *expiryIndex
	store *store // takes mutations to the bucket's storage (bbolt or memory)

	ddl sync.Mutex // serializes changes of the bucket's definition (settings, scopes, collections)

	mu struct {
		sync.RWMutex
		settings BucketSettings
		scopes   map[string]map[string]collectionInfo
		byID     map[CollectionID]collectionInfo
		nextCID  CollectionID
		manifest uint64 // catalogEntry.Manifest
		sys      map[string][]byte
		closed   bool
	}

	cas atomic.Uint64
	// closedFlag is mu.closed, set with it, for Closed: a front door asks it
	// at every command, and the bucket's lock is every operation's.
	closedFlag atomic.Bool
	// repl is the bucket's replication wiring (replicated.go).
	repl replState
	// minDurability is the rank of the settings' DurabilityMinLevel, read by
	// every write without the bucket's lock.
	minDurability atomic.Int32
	currItems     atomic.Int64
	tombs         atomic.Int64
	live          sync.Map // CollectionID → *atomic.Int64: its live documents (Collection.Count)
	stats         counters
	mem           memOwner // accounts the bucket's memory, enforces its quota
	warmup        warmup   // loads the stored documents after the bucket opens
	bloom         bloomState
	// itemsOut says some item left memory whole since the bucket opened
	// (evict.go): memory no longer holds every key.
	itemsOut atomic.Bool
	// passes counts the passes over memory's keys under way (a drop,
	// Flush, a TTL re-evaluation: allKeysIn): no item leaves memory whole
	// while one runs.
	passes atomic.Int32

	feedMu sync.Mutex
	feedCh chan struct{} // closed and cleared on the next mutation

	watchers settingsWatchers // told of settings changes

	consumersMu      sync.Mutex
	consumers        map[string][]uint64 // change-feed consumer → sequence numbers consumed
	durableConsumers map[string]bool     // registered consumers (persisted)

	histMu  sync.Mutex
	history []FailoverEntry // newest first; never empty once open

	restart restartState // the bucket that replaced this one (reopen.go)
}

// counters are the bucket's cumulative statistics.
type counters struct {
	expiredAccess atomic.Int64
	expiredPager  atomic.Int64
	metaPurged    atomic.Int64
	pagerRuns     atomic.Int64
	// slidingExtends counts sliding-expiry extensions queued by reads.
	slidingExtends atomic.Int64
}

// Name returns the bucket's name.
func (b *Bucket) Name() string { return b.name }

// Dir returns the bucket's data folder, or "" for a bucket kept only in memory.
// Packages that keep files beside the bucket (view indexes) put them here.
func (b *Bucket) Dir() string { return b.dir }

// Clock returns the clock the bucket's expiry decisions read.
func (b *Bucket) Clock() Clock { return b.clock }

// NumPartitions returns the number of partitions (vBuckets).
func (b *Bucket) NumPartitions() int { return len(b.parts) }

// Settings returns a copy of the bucket's settings.
func (b *Bucket) Settings() BucketSettings {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.settings
}

// UpdateSettings applies fn to a copy of the settings, validates the result and
// persists it, then tells the settings' watchers (WatchSettings). Name and
// Type cannot change. It returns the settings before and after. Writes go on
// while the catalog is written; they see the new settings once it is. A
// change of a couchbase bucket's EvictionPolicy restarts the bucket, as
// Couchbase does (reopen.go): b is closed and replaced by a new Bucket of
// the same name (Engine.Bucket, b.Reopened), warming up with the new
// policy, before UpdateSettings returns.
func (b *Bucket) UpdateSettings(ctx context.Context, fn func(*BucketSettings) error) (old, updated BucketSettings, err error) {
	if err := ctx.Err(); err != nil {
		return old, old, err
	}
	// The engine's life lock first (a change of evictionPolicy restarts
	// the bucket: reopen.go), then the definition's, as DeleteBucket takes
	// them.
	b.eng.life.Lock()
	defer b.eng.life.Unlock()
	b.ddl.Lock()
	locked := true
	defer func() {
		if locked {
			b.ddl.Unlock()
		}
	}()
	ce, err := b.catalogCopy()
	if err != nil {
		return old, old, err
	}
	old = ce.Settings
	s := old
	if err := fn(&s); err != nil {
		return old, old, err
	}
	if s.NumVBuckets == 0 {
		s.NumVBuckets = old.NumVBuckets // unset: the bucket's
	}
	if _, ok := s.ReplicaNumber.Get(); !ok {
		s.ReplicaNumber = old.ReplicaNumber // likewise
	}
	if s.Name != old.Name || s.Type != old.Type || s.UUID != old.UUID || s.NumVBuckets != old.NumVBuckets {
		return old, old, fmt.Errorf("%w: name, bucketType, uuid and numVBuckets cannot change", ErrInvalidSetting)
	}
	if err := s.Validate(); err != nil {
		return old, old, err
	}
	if s != old {
		for _, svc := range b.eng.services {
			if g, ok := svc.(SettingsGate); ok {
				if err := g.PrepareSettings(ctx, b, old, s); err != nil {
					return old, old, fmt.Errorf("engine: bucket %s settings: %w", b.name, err)
				}
			}
		}
	}
	if needsRestart(old, s) {
		b.ddl.Unlock()
		locked = false
		if err := b.restartWith(ctx, s); err != nil {
			return old, old, err
		}
		return old, s, nil
	}
	ce.Settings = s
	if err := b.commitCatalog(ce); err != nil {
		return old, old, err
	}
	if b.mem.configure(s) {
		b.requeueAll()
	}
	b.settingsChanged(old, s)
	b.maybeEvict(ctx)
	return old, s, nil
}

// catalogCopy returns a deep copy of the bucket's definition, to change and
// pass to commitCatalog.
//
// REQUIRES: b.ddl held.
func (b *Bucket) catalogCopy() (catalogEntry, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.mu.closed {
		return catalogEntry{}, ErrClosed
	}
	ce := catalogEntry{Settings: b.mu.settings, NextCID: b.mu.nextCID, Manifest: b.mu.manifest, Parts: len(b.parts), Scopes: make(map[string]map[string]collectionInfo, len(b.mu.scopes))}
	for name, colls := range b.mu.scopes {
		ce.Scopes[name] = maps.Clone(colls)
	}
	return ce, nil
}

// commitCatalog persists ce as the bucket's definition, then makes it
// current. No lock that reads or writes wait on is held across the disk
// write.
//
// REQUIRES: b.ddl held.
func (b *Bucket) commitCatalog(ce catalogEntry) error {
	b.mu.RLock()
	if !maps.EqualFunc(b.mu.scopes, ce.Scopes, maps.Equal) {
		ce.Manifest = b.mu.manifest + 1
	}
	b.mu.RUnlock()
	return b.storeCatalog(ce)
}

// storeCatalog persists ce as the bucket's definition, its manifest UID as
// it is, then makes it current.
//
// REQUIRES: b.ddl held.
func (b *Bucket) storeCatalog(ce catalogEntry) error {
	if err := b.eng.putCatalog(ce); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.settings = ce.Settings
	b.minDurability.Store(int32(ce.Settings.DurabilityMinLevel.rank()))
	b.mu.scopes = ce.Scopes
	b.mu.nextCID = ce.NextCID
	b.mu.manifest = ce.Manifest
	b.mu.byID = make(map[CollectionID]collectionInfo)
	for _, colls := range ce.Scopes {
		for _, ci := range colls {
			b.mu.byID[ci.ID] = ci
		}
	}
	return nil
}

// CreateScope adds an empty scope; a memcached bucket has none
// (ErrInvalidSetting), as it has no collections.
func (b *Bucket) CreateScope(ctx context.Context, name string) error {
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
		return fmt.Errorf("%w: memcached buckets have no scopes or collections", ErrInvalidSetting)
	}
	m := Manifest{Scopes: ce.Scopes}
	if err := m.CreateScope(name); err != nil {
		return err
	}
	return b.commitCatalog(ce)
}

// CreateCollection adds a collection to a scope. maxTTL (seconds) is fixed for
// the collection's life: 0 inherits the bucket's, NeverExpire never expires.
func (b *Bucket) CreateCollection(ctx context.Context, scope, name string, maxTTL int64) (CollectionInfo, error) {
	return b.CreateCollectionWith(ctx, scope, name, CollectionSettings{MaxTTL: maxTTL})
}

// CreateCollectionWith adds a collection to a scope with the given settings.
// MaxTTL is fixed for the collection's life; the TTL settings can change
// later (UpdateCollection).
func (b *Bucket) CreateCollectionWith(ctx context.Context, scope, name string, cs CollectionSettings) (CollectionInfo, error) {
	if err := ctx.Err(); err != nil {
		return CollectionInfo{}, err
	}
	b.ddl.Lock()
	defer b.ddl.Unlock()
	ce, err := b.catalogCopy()
	if err != nil {
		return CollectionInfo{}, err
	}
	if ce.Settings.Type == Memcached {
		return CollectionInfo{}, fmt.Errorf("%w: memcached buckets have no scopes or collections", ErrInvalidSetting)
	}
	m := Manifest{NextCID: ce.NextCID, Scopes: ce.Scopes}
	ci, err := m.CreateCollection(scope, name, cs)
	if err != nil {
		return CollectionInfo{}, err
	}
	ce.NextCID = m.NextCID
	if err := b.commitCatalog(ce); err != nil {
		return CollectionInfo{}, err
	}
	return ci, nil
}

// Scopes lists the scopes and their collections, sorted by name.
func (b *Bucket) Scopes() []ScopeInfo {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]ScopeInfo, 0, len(b.mu.scopes))
	for sname, colls := range b.mu.scopes {
		si := ScopeInfo{Name: sname}
		for cname, ci := range colls {
			si.Collections = append(si.Collections, ci.info(cname))
		}
		sort.Slice(si.Collections, func(i, j int) bool { return si.Collections[i].Name < si.Collections[j].Name })
		out = append(out, si)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DefaultCollection returns _default._default.
func (b *Bucket) DefaultCollection() *Collection {
	return &Collection{b: b, id: DefaultCollectionID}
}

// Collection returns the named collection of the named scope.
func (b *Bucket) Collection(scope, name string) (*Collection, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	colls, ok := b.mu.scopes[scope]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrScopeNotFound, scope)
	}
	ci, ok := colls[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s.%s", ErrCollectionNotFound, scope, name)
	}
	return &Collection{b: b, id: ci.ID}, nil
}

// CollectionByID returns the collection with the given ID, and its scope
// and name; ErrCollectionNotFound if the bucket has none (a dropped one
// included: IDs are never reused).
func (b *Bucket) CollectionByID(id CollectionID) (*Collection, string, string, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for sname, colls := range b.mu.scopes {
		for cname, ci := range colls {
			if ci.ID == id {
				return &Collection{b: b, id: id}, sname, cname, nil
			}
		}
	}
	return nil, "", "", fmt.Errorf("%w: id %#x", ErrCollectionNotFound, uint32(id))
}

// ManifestUID counts the changes of the bucket's scopes and collections
// (creations, drops, TTL settings), as Couchbase's collections manifest
// UID: it only grows, across restarts too.
func (b *Bucket) ManifestUID() uint64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.manifest
}

// maxTTLFor returns the effective maxTTL for a collection's mutations.
func (b *Bucket) maxTTLFor(cid CollectionID) int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return EffectiveMaxTTL(b.mu.byID[cid].MaxTTL, b.mu.settings.MaxTTL)
}

// ttlFor returns a collection's TTL settings and the effective maxTTL. A
// mutation reads them under its partition's lock, so that a defaultTTL
// re-evaluation, which runs after the new settings are current, sees every
// version written under the old ones.
func (b *Bucket) ttlFor(cid CollectionID) (CollectionSettings, int64) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	ci := b.mu.byID[cid]
	return ci.settings(), EffectiveMaxTTL(ci.MaxTTL, b.mu.settings.MaxTTL)
}

// partitionFor returns the partition a key hashes to.
func (b *Bucket) partitionFor(key string) *partition {
	return b.parts[partitionOf(key, len(b.parts))]
}

// nextCAS returns a new CAS, greater than every earlier one and, as Couchbase's
// hybrid logical clock, never below the clock in nanoseconds.
func (b *Bucket) nextCAS(now int64) uint64 {
	floor := uint64(max(now, 0)) * 1_000_000_000
	for {
		last := b.cas.Load()
		next := max(last+1, floor)
		if b.cas.CompareAndSwap(last, next) {
			return next
		}
	}
}

// PutSystemDoc stores (or, with a nil value, removes) a system document: bucket
// metadata such as a design document, which is not an item, is not counted in
// CurrItems and never appears in the change feed. It is durable on return for
// a persistent bucket.
func (b *Bucket) PutSystemDoc(ctx context.Context, key string, value []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.ddl.Lock()
	defer b.ddl.Unlock()
	if b.isClosed() {
		return ErrClosed
	}
	if err := b.store.putSys(key, value); err != nil {
		return fmt.Errorf("engine: store system document %q: %w", key, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if value == nil {
		delete(b.mu.sys, key)
	} else {
		b.mu.sys[key] = append([]byte(nil), value...)
	}
	return nil
}

// SystemDoc returns a system document, or ErrNotFound.
func (b *Bucket) SystemDoc(key string) ([]byte, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	v, ok := b.mu.sys[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return append([]byte(nil), v...), nil
}

// SystemDocKeys lists the system documents whose keys start with prefix, sorted.
func (b *Bucket) SystemDocKeys(prefix string) []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var keys []string
	for k := range b.mu.sys {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// close flushes and closes the bucket's file.
func (b *Bucket) close() error {
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		return nil
	}
	b.mu.closed = true
	b.closedFlag.Store(true)
	b.mu.Unlock()
	b.ddl.Lock() // wait out a definition or system document being written
	defer b.ddl.Unlock()
	return b.shutdown()
}

// shutdown stops a bucket marked closed: its feed waiters wake and see the
// close, its warm-up stops, and its store flushes what was acknowledged
// and closes cleanly, with the highest CAS handed out (a lock's too: the
// bucket opens above it, as Couchbase keeps a vBucket's max_cas).
func (b *Bucket) shutdown() error {
	// Expirations that reads proposed (replexpiry.go) are cancelled, and
	// so are the re-evaluations applied manifests started (replttl.go).
	b.repl.access.close()
	b.repl.ttl.close()
	b.repl.flush.close()
	b.changed() // wake feed waiters so they see the close
	b.stopWarmup()
	return b.store.closeClean(b.cas.Load())
}

// writable reports why a collection cannot take writes: the bucket is closed,
// or the collection was dropped.
func (b *Bucket) writable(cid CollectionID) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.mu.closed {
		return ErrClosed
	}
	if _, ok := b.mu.byID[cid]; !ok {
		return fmt.Errorf("%w: collection %d was dropped", ErrCollectionNotFound, cid)
	}
	return nil
}

// collectionDropped reports whether cid names a collection the bucket had
// and dropped: an ID below the next one its manifest gives that the
// manifest no longer holds (collection IDs are never reused). An ID at or
// above the next one is a collection created after the manifest this
// bucket has: not dropped.
func (b *Bucket) collectionDropped(cid CollectionID) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, ok := b.mu.byID[cid]
	return !ok && cid < b.mu.nextCID
}

// Closed reports whether b is closed: deleted, restarted (Reopened then
// returns its replacement) or closed with its engine. A closed bucket
// answers its calls with ErrClosed; a bucket created again under its name
// is another Bucket, which Engine.Bucket returns.
func (b *Bucket) Closed() bool { return b.closedFlag.Load() }

func (b *Bucket) isClosed() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.closed
}

// PartitionOf returns the partition (vBucket) that key hashes to in b, as
// Couchbase's clients compute it: a cluster node tells its share of a view
// by the partitions of the rows' document ids.
func (b *Bucket) PartitionOf(key string) int { return int(partitionOf(key, len(b.parts))) }
