package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// catalogEntry is how a bucket's definition is stored.
type catalogEntry struct {
	Settings BucketSettings                       `json:"settings"`
	Scopes   map[string]map[string]collectionInfo `json:"scopes"`
	NextCID  CollectionID                         `json:"nextCollectionID"`
	Parts    int                                  `json:"numPartitions"`
	// Manifest counts the changes of the scopes and collections (Couchbase's
	// collections manifest UID); 0 for a bucket never changed.
	Manifest uint64 `json:"manifestUID,omitempty"`
}

// Engine owns the buckets of one data directory. It is safe for concurrent use.
type Engine struct {
	dir     string
	opts    Options
	log     *slog.Logger
	catalog catalog

	// life serializes what changes the set of buckets or services (create,
	// delete, attach, close), so that the slow parts (files, services) run
	// without mu, and lookups never wait on them.
	life     sync.Mutex
	services []BucketService // guarded by life

	mu struct {
		sync.RWMutex
		buckets map[string]*Bucket
		closed  bool
	}
}

// Open opens (creating if needed) the data directory dir and every bucket
// defined in it. A nil opts means DefaultOptions().
func Open(dir string, opts *Options) (*Engine, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "buckets"), 0o755); err != nil {
		return nil, fmt.Errorf("engine: create data directory: %w", err)
	}
	cat, err := openBoltCatalog(filepath.Join(dir, catalogFile))
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("engine: open catalog (is another server using %s?): %w", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: open catalog: %w", err)
	}
	e := &Engine{dir: dir, opts: o, log: o.Logger, catalog: cat}
	e.mu.buckets = make(map[string]*Bucket)
	entries, err := cat.entries()
	if err != nil {
		cat.close()
		return nil, err
	}
	for _, ce := range entries {
		// A persistent bucket's folder is made before the catalog lists
		// it and removed after the catalog no longer does: one listed
		// without its folder lost its documents, or sits on a volume not
		// mounted. Opening it would start it empty without a word (and
		// write the new store where the volume mounts).
		if err := e.checkBucketDir(ce.Settings); err != nil {
			e.Close()
			return nil, err
		}
		b, err := e.openBucket(ce)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.mu.buckets[ce.Settings.Name] = b
	}
	return e, nil
}

// IsDataDir reports whether dir holds an engine's data (Open has been called
// on it before). To tell a first start, use FirstStart: a directory whose
// first start failed half-way is a data directory still in its first start.
func IsDataDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, catalogFile))
	return err == nil
}

// FirstStart reports whether the data directory is in its first start: Open
// created it, or an earlier Open did and EndFirstStart was not called since
// (that start failed or was killed before it had created what a first
// start creates, such as a default bucket).
func (e *Engine) FirstStart() bool {
	e.life.Lock()
	defer e.life.Unlock()
	return e.catalog.firstStart()
}

// EndFirstStart durably records that the data directory's first start is
// over: the next Open's FirstStart is false.
func (e *Engine) EndFirstStart() error {
	e.life.Lock()
	defer e.life.Unlock()
	if e.isClosed() {
		return ErrClosed
	}
	if err := e.catalog.endFirstStart(); err != nil {
		return fmt.Errorf("engine: save catalog: %w", err)
	}
	return nil
}

// catalogFile is the file, in the data directory, that lists the buckets.
const catalogFile = "catalog.db"

// Clock returns the engine's clock.
func (e *Engine) Clock() Clock { return e.opts.Clock }

// Dir returns the data directory.
func (e *Engine) Dir() string { return e.dir }

func (e *Engine) bucketDir(name string) string { return filepath.Join(e.dir, "buckets", name) }

// checkBucketDir returns ErrBucketFilesMissing for a persistent bucket
// of the catalog whose folder is missing, naming it and what to do.
func (e *Engine) checkBucketDir(s BucketSettings) error {
	if s.Type != Couchbase {
		return nil // nothing on disk
	}
	dir := e.bucketDir(s.Name)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("%w: bucket %s: its folder %s is missing (deleted, or on a volume not mounted); restore it, or create it empty (mkdir %s) to start the bucket with no documents",
		ErrBucketFilesMissing, s.Name, dir, dir)
}

// openBucket builds a bucket from its catalog entry, loading its documents.
func (e *Engine) openBucket(ce catalogEntry) (*Bucket, error) {
	s := ce.Settings
	b := &Bucket{eng: e, name: s.Name, clock: e.opts.Clock, exps: newExpiryIndex()}
	if s.EvictionPolicy == "" {
		s.EvictionPolicy = defaultEvictionPolicy(s.Type) // a bucket created before the setting
	}
	if s.DurabilityMinLevel == "" {
		s.DurabilityMinLevel = defaultDurability(s.Type) // likewise
	}
	s.NumVBuckets = ce.Parts // likewise: the catalog always had the count
	if s.RAMQuotaMB > MaxRAMQuotaMB {
		s.RAMQuotaMB = MaxRAMQuotaMB // stored before the cap: its bytes overflowed
	}
	if _, ok := s.ReplicaNumber.Get(); !ok {
		s.ReplicaNumber = e.opts.ReplicaNumber // a bucket created before the setting
	}
	b.minDurability.Store(int32(s.DurabilityMinLevel.rank()))
	b.mu.settings = s
	b.mem.configure(s)
	b.mu.scopes = ce.Scopes
	b.mu.nextCID = ce.NextCID
	b.mu.manifest = ce.Manifest
	b.mu.byID = make(map[CollectionID]collectionInfo)
	b.mu.sys = make(map[string][]byte)
	b.consumers = make(map[string][]uint64)
	b.durableConsumers = make(map[string]bool)
	for _, colls := range ce.Scopes {
		for _, ci := range colls {
			b.mu.byID[ci.ID] = ci
		}
	}
	b.parts = make([]*partition, ce.Parts)
	b.mem.slotBits = 32 - bits.Len(uint(max(ce.Parts, 1)-1))
	for i := range b.parts {
		b.parts[i] = newPartition(uint16(i))
	}
	b.warmup.state.Store(WarmupInitialize)
	b.warmup.estimated.Store(-1)
	b.warmup.done = make(chan struct{})
	b.warmup.start = stopwatch()
	st, err := e.openStorage(b, s)
	if err != nil {
		return nil, err
	}
	if e.opts.wrapStorage != nil && s.Type == Couchbase {
		st = e.opts.wrapStorage(st)
	}
	if err := b.open(st); err != nil {
		st.close(false)
		return nil, fmt.Errorf("engine: bucket %s: %w", s.Name, err)
	}
	if keepsBloom(s, st) {
		b.installBloom()
	}
	b.store = newStore(st, &e.opts, b.applyCommitted, b.dropPending)
	if hook := e.opts.CommitHook; hook != nil {
		b.store.beforeCommit = func() { hook(b.name) }
	}
	b.startWarmup(st, e.opts.BackgroundWarmup)
	if err, _ := b.warmup.failed.Load().(error); err != nil && !e.opts.BackgroundWarmup {
		b.store.close()
		return nil, err
	}
	return b, nil
}

// openStorage opens the storage of a bucket: for a couchbase bucket, the
// store in the bucket's folder (storageIn), memory for the others (each open
// is a new, empty history).
func (e *Engine) openStorage(b *Bucket, s BucketSettings) (storage, error) {
	if s.Type != Couchbase {
		return newMemStorage(len(b.parts)), nil
	}
	b.dir = e.bucketDir(s.Name)
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return nil, fmt.Errorf("engine: bucket %s: %w", s.Name, err)
	}
	kind, err := storageIn(b.dir, e.opts.Storage)
	if err != nil {
		return nil, fmt.Errorf("engine: bucket %s: %w", s.Name, err)
	}
	if kind != e.opts.Storage {
		e.log.Info("bucket keeps the store it was created with", "bucket", s.Name, "storage", kind, "configured", e.opts.Storage)
	}
	if kind == StorageBolt {
		return openBoltStorage(filepath.Join(b.dir, boltFile), &e.opts)
	}
	return openPebbleStorageFor(filepath.Join(b.dir, pebbleDir), &e.opts, s.RAMQuotaMB<<20)
}

// open takes what the bucket needs before it serves from st's metadata
// (system documents, CAS, sequence numbers, consumers) and begins the
// bucket's history; its documents load afterwards (startWarmup).
func (b *Bucket) open(st storage) error {
	m, err := st.meta()
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	b.mu.sys = m.sys
	b.cas.Store(m.cas)
	seqs, err := st.seqnos()
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	for _, p := range b.parts {
		p.setSeqLocked(max(p.mu.seq, seqs[p.id]))
		p.mu.durable = p.mu.seq
	}
	for _, name := range m.consumers {
		b.durableConsumers[name] = true
		b.consumers[name] = make([]uint64, len(b.parts)) // nothing acknowledged yet
	}
	// A history goes on only after a clean shutdown; otherwise writes some
	// consumer may have seen can be lost, and their sequence numbers reused.
	b.history = m.history
	if len(b.history) == 0 || !m.clean {
		// m.cas is what the store committed: a change with a larger CAS
		// may be lost.
		b.history = beginHistory(b.history, b.HighSeqnos(), m.cas)
	}
	if err := st.begin(b.history); err != nil {
		return fmt.Errorf("start history: %w", err)
	}
	return nil
}

// CreateBucket creates a bucket with the given settings (unset fields take
// their defaults) and the _default scope and collection, and attaches every
// service (view indexes, pager) to it.
func (e *Engine) CreateBucket(ctx context.Context, s BucketSettings) (*Bucket, error) {
	s = s.withDefaults()
	if s.EvictionPolicy == "" {
		// Here rather than in withDefaults, so that DefaultBucketSettings
		// with another Type set afterwards stays valid.
		s.EvictionPolicy = defaultEvictionPolicy(s.Type)
	}
	if s.DurabilityMinLevel == "" {
		s.DurabilityMinLevel = defaultDurability(s.Type)
	}
	if s.UUID == "" {
		s.UUID = NewBucketUUID()
	}
	if s.NumVBuckets == 0 {
		s.NumVBuckets = e.opts.NumPartitions
	}
	if _, ok := s.ReplicaNumber.Get(); !ok {
		s.ReplicaNumber = e.opts.ReplicaNumber
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	e.life.Lock()
	defer e.life.Unlock()
	if e.isClosed() {
		return nil, ErrClosed
	}
	if _, err := e.Bucket(s.Name); err == nil {
		return nil, fmt.Errorf("%w: %s", ErrBucketExists, s.Name)
	}
	ce := catalogEntry{
		Settings: s,
		Scopes:   map[string]map[string]collectionInfo{"_default": {"_default": {ID: DefaultCollectionID}}},
		NextCID:  8, // Couchbase starts user collection IDs at 8
		Parts:    s.NumVBuckets,
	}
	if s.Type == Couchbase {
		// A leftover folder from a bucket deleted while the server was down
		// must not resurrect its documents.
		if err := os.RemoveAll(e.bucketDir(s.Name)); err != nil {
			return nil, fmt.Errorf("engine: bucket %s: %w", s.Name, err)
		}
	}
	b, err := e.openBucket(ce)
	if err != nil {
		return nil, err
	}
	if err := e.putCatalog(ce); err != nil {
		b.close()
		return nil, err
	}
	// Published once every service is attached: a write taken before a
	// cluster's replication attached would bypass it (and a bucket whose
	// services fail is never seen).
	if err := e.attachAll(ctx, b); err != nil {
		if derr := e.dropBucket(b); derr != nil {
			e.log.Warn("removing a bucket whose services failed", "bucket", s.Name, "err", derr)
		}
		return nil, fmt.Errorf("engine: create bucket %s: %w", s.Name, err)
	}
	e.mu.Lock()
	e.mu.buckets[s.Name] = b
	e.mu.Unlock()
	e.log.Info("bucket created", "bucket", s.Name, "type", s.Type, "max_ttl", s.MaxTTL)
	return b, nil
}

// Bucket returns the named bucket, or ErrBucketNotFound.
func (e *Engine) Bucket(name string) (*Bucket, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.mu.closed {
		return nil, ErrClosed
	}
	b, ok := e.mu.buckets[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrBucketNotFound, name)
	}
	return b, nil
}

// Buckets returns every bucket, sorted by name.
func (e *Engine) Buckets() []*Bucket {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]*Bucket, 0, len(e.mu.buckets))
	for _, b := range e.mu.buckets {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// DeleteBucket detaches every service from a bucket (closing its view
// indexes and pager), closes it and removes it with all its files. Lookups of
// other buckets never wait on it.
func (e *Engine) DeleteBucket(ctx context.Context, name string) error {
	return e.deleteBucket(ctx, name, nil)
}

// DeleteBucketUUID deletes bucket name as DeleteBucket does, but only the
// incarnation whose settings' UUID is uuid: another one (the bucket
// deleted and created again meanwhile) is left alone with
// ErrBucketNotFound.
func (e *Engine) DeleteBucketUUID(ctx context.Context, name, uuid string) error {
	return e.deleteBucket(ctx, name, &uuid)
}

// deleteBucket is DeleteBucket, of the incarnation uuid names when it is
// not nil. Services that are DeleteGates are asked first, in the order
// they were attached; one's refusal deletes nothing.
func (e *Engine) deleteBucket(ctx context.Context, name string, uuid *string) error {
	e.life.Lock()
	defer e.life.Unlock()
	b, err := e.Bucket(name)
	if err != nil {
		return err
	}
	if uuid != nil && b.Settings().UUID != *uuid {
		return fmt.Errorf("%w: %s with UUID %s (it has %s)", ErrBucketNotFound, name, *uuid, b.Settings().UUID)
	}
	for _, svc := range e.services {
		if g, ok := svc.(DeleteGate); ok {
			if err := g.PrepareDelete(ctx, b); err != nil {
				return fmt.Errorf("engine: delete bucket %s: %w", name, err)
			}
		}
	}
	e.mu.Lock()
	delete(e.mu.buckets, name) // from now on, lookups do not find it
	e.mu.Unlock()
	derr := e.detach(ctx, b, e.services, true)
	if err := e.dropBucket(b); err != nil {
		return err
	}
	if derr != nil {
		e.log.Warn("detaching services from a deleted bucket", "bucket", name, "err", derr)
	}
	e.log.Info("bucket deleted", "bucket", name)
	return nil
}

// dropBucket forgets b, removes its catalog entry, closes it and removes its
// files.
//
// REQUIRES: e.life held.
func (e *Engine) dropBucket(b *Bucket) error {
	e.mu.Lock()
	if e.mu.buckets[b.name] == b {
		delete(e.mu.buckets, b.name)
	}
	e.mu.Unlock()
	if err := e.catalog.remove(b.name); err != nil {
		return fmt.Errorf("engine: delete bucket %s: %w", b.name, err)
	}
	if err := b.close(); err != nil {
		e.log.Warn("closing deleted bucket", "bucket", b.name, "err", err)
	}
	if b.dir != "" {
		if err := os.RemoveAll(b.dir); err != nil {
			return fmt.Errorf("engine: remove bucket files %s: %w", b.name, err)
		}
	}
	return nil
}

func (e *Engine) putCatalog(ce catalogEntry) error {
	if err := e.catalog.put(ce); err != nil {
		return fmt.Errorf("engine: save catalog: %w", err)
	}
	return nil
}

// Close detaches every service from every bucket, flushes every bucket's
// acknowledged writes, marks each cleanly shut down and closes all files.
func (e *Engine) Close() error {
	e.life.Lock()
	defer e.life.Unlock()
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil
	}
	e.mu.closed = true
	buckets := make([]*Bucket, 0, len(e.mu.buckets))
	for _, b := range e.mu.buckets {
		buckets = append(buckets, b)
	}
	e.mu.Unlock()
	var errs []error
	for _, b := range buckets {
		errs = append(errs, e.detach(context.Background(), b, e.services, false))
	}
	for _, b := range buckets {
		errs = append(errs, b.close())
	}
	errs = append(errs, e.catalog.close())
	return errors.Join(errs...)
}

func (e *Engine) isClosed() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.mu.closed
}
