package search

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/mayflydb/mayfly/engine"
)

// DefaultBatchSize is the default Options.BatchSize.
const DefaultBatchSize = 2000

// Options configure the search Service. A nil *Options means defaults.
type Options struct {
	// BatchSize is how many changed documents go into one index batch. The
	// default value (0) is DefaultBatchSize; a negative value is an error.
	BatchSize int
	// Logger receives indexing problems. The default value discards them.
	Logger *slog.Logger
	// NoAutoUpdate stops indexes from following the change feed on their
	// own: they then update only when a query asks (at_plus consistency),
	// or Check runs. The default value is false.
	NoAutoUpdate bool
	// NoSync acknowledges a batch's changes to the bucket as soon as the
	// index holds them in memory, rather than once scorch has them on disk:
	// a tombstone purged meanwhile could then be missed by an index that a
	// crash sends back to its last position on disk. Meant for tests and
	// benchmarks. The default value is false.
	NoSync bool
}

func (o *Options) validate() error {
	if o.BatchSize < 0 {
		return fmt.Errorf("%w: BatchSize %d is negative", ErrInvalidOptions, o.BatchSize)
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// Service owns the full-text indexes of every bucket of an engine. It is safe
// for concurrent use. It is an engine.BucketService: the engine tells it when
// a bucket opens (AttachBucket) and before it closes or is deleted
// (DetachBucket).
//
// Locking: s.mu guards only the map of buckets. Each bucket's definition
// changes (and its attach and detach) are serialized by that bucket's change
// mutex, which may be held across disk I/O and index opens but is never
// taken by queries.
type Service struct {
	eng        *engine.Engine
	opts       Options
	rollbacks  atomic.Int64
	aliasCache expiredCache // the expiry filter's cache for alias queries

	mu struct {
		sync.Mutex
		buckets map[string]*bucketIndexes
		closed  bool
	}
}

// bucketIndexes are one bucket's running indexers.
type bucketIndexes struct {
	bucket *engine.Bucket
	change sync.Mutex

	mu struct {
		sync.Mutex
		indexers map[string]*indexer  // by index name
		aliases  map[string]*IndexDef // alias definitions, by name
		broken   map[string]error     // stored definitions that failed to load
		gone     bool
	}
}

// New starts the search service over eng and attaches it to eng: it opens
// the index of every definition already stored, each resuming from the feed
// position it holds.
func New(ctx context.Context, eng *engine.Engine, opts *Options) (*Service, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Service{eng: eng, opts: o}
	s.mu.buckets = make(map[string]*bucketIndexes)
	if err := eng.Attach(ctx, s); err != nil {
		s.Close()
		return nil, fmt.Errorf("search: %w", err)
	}
	return s, nil
}

// AttachBucket opens the indexes of b's stored definitions (nothing for a
// memcached bucket). One that cannot be loaded is logged, remembered (see
// LoadErrors) and skipped.
func (s *Service) AttachBucket(ctx context.Context, b *engine.Bucket) error {
	if b.Settings().Type == engine.Memcached {
		return nil
	}
	bi := &bucketIndexes{bucket: b}
	bi.mu.indexers = make(map[string]*indexer)
	bi.mu.aliases = make(map[string]*IndexDef)
	bi.mu.broken = make(map[string]error)
	bi.change.Lock()
	defer bi.change.Unlock()
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	old := s.mu.buckets[b.Name()]
	s.mu.buckets[b.Name()] = bi
	s.mu.Unlock()
	if old != nil {
		s.opts.Logger.Warn("search: bucket attached twice", "bucket", b.Name())
		s.retire(old, false)
	}
	for _, key := range b.SystemDocKeys(DefPrefix) {
		body, err := b.SystemDoc(key)
		if err != nil {
			continue
		}
		name := strings.TrimPrefix(key, DefPrefix)
		if d, err := loadIndexDef(b.Name(), name, body); err == nil && d.IsAlias() {
			bi.mu.Lock()
			bi.mu.aliases[name] = d
			bi.mu.Unlock()
			continue
		}
		ix, err := s.load(ctx, b, name, body)
		if err != nil {
			s.opts.Logger.Error("search: stored index not loaded; it can be replaced or deleted",
				"bucket", b.Name(), "index", name, "err", err)
			bi.mu.Lock()
			bi.mu.broken[name] = err
			bi.mu.Unlock()
			continue
		}
		bi.mu.Lock()
		bi.mu.indexers[name] = ix
		bi.mu.Unlock()
	}
	return nil
}

func (s *Service) load(ctx context.Context, b *engine.Bucket, name string, body []byte) (*indexer, error) {
	d, err := loadIndexDef(b.Name(), name, body)
	if err != nil {
		return nil, err
	}
	return s.startIndexer(ctx, b, d)
}

// DetachBucket closes the indexes of b; with deleted, it removes their files.
func (s *Service) DetachBucket(ctx context.Context, b *engine.Bucket, deleted bool) error {
	s.mu.Lock()
	bi := s.mu.buckets[b.Name()]
	if bi == nil || bi.bucket != b {
		s.mu.Unlock()
		return nil
	}
	delete(s.mu.buckets, b.Name())
	s.mu.Unlock()
	return s.retire(bi, deleted)
}

func (s *Service) retire(bi *bucketIndexes, deleted bool) error {
	bi.change.Lock()
	defer bi.change.Unlock()
	bi.mu.Lock()
	ixs := bi.mu.indexers
	bi.mu.indexers = map[string]*indexer{}
	bi.mu.aliases = map[string]*IndexDef{}
	bi.mu.broken = map[string]error{}
	bi.mu.gone = true
	bi.mu.Unlock()
	var errs []error
	for _, ix := range ixs {
		if err := ix.close(); err != nil {
			errs = append(errs, fmt.Errorf("search: close %s: %w", ix.name, err))
		}
	}
	if deleted && bi.bucket.Dir() != "" {
		if err := os.RemoveAll(filepath.Join(bi.bucket.Dir(), "search")); err != nil {
			errs = append(errs, fmt.Errorf("search: remove index files: %w", err))
		}
	}
	return errors.Join(errs...)
}

// IndexPath is where an index's files live: a folder beside the bucket's
// data, named by a hash of the index name; "" (memory) for a bucket kept in
// memory.
func IndexPath(b *engine.Bucket, name string) string {
	if b.Dir() == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(b.Dir(), "search", hex.EncodeToString(sum[:16])+".bleve")
}

func removeIndexFiles(b *engine.Bucket, name string) error {
	p := IndexPath(b, name)
	if p == "" {
		return nil
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("search: remove index files: %w", err)
	}
	return nil
}

// openIndex opens d's bleve index at path, creating it when missing.
// fresh says it was created.
func (s *Service) openIndex(d *IndexDef, path string) (idx bleve.Index, fresh bool, err error) {
	m, err := d.indexMapping()
	if err != nil {
		return nil, false, err
	}
	// Batches return once in memory; the indexer learns when each is on
	// disk from its persisted callback (see indexer.apply).
	cfg := map[string]any{"unsafe_batch": true}
	if path == "" {
		// scorch in memory rather than bleve.NewMemOnly (upsidedown on
		// gtreap), whose iterators leave goroutines behind: the same engine
		// for both bucket types.
		idx, err = bleve.NewUsing("", m, scorch.Name, scorch.Name, nil)
		return idx, true, err
	}
	if _, err := os.Stat(path); err == nil {
		idx, err = bleve.OpenUsing(path, cfg)
		if err == nil {
			return idx, false, nil
		}
		s.opts.Logger.Warn("search: index files do not open; rebuilding", "index", d.Name, "err", err)
		if err := os.RemoveAll(path); err != nil {
			return nil, false, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, false, err
	}
	idx, err = bleve.NewUsing(path, m, scorch.Name, scorch.Name, cfg)
	return idx, true, err
}

// startIndexer opens d's index, registers it as a change-feed consumer of b,
// checks that its position is in b's history (rebuilding it when not, or
// when it was built for another definition) and starts its indexer.
func (s *Service) startIndexer(ctx context.Context, b *engine.Bucket, d *IndexDef) (*indexer, error) {
	coll := sourceID(b, d.SourceCollection)
	path := IndexPath(b, d.Name)
	idx, fresh, err := s.openIndex(d, path)
	if err != nil {
		return nil, fmt.Errorf("search: open index %s: %w", d.Name, err)
	}
	fail := func(err error) (*indexer, error) {
		idx.Close()
		return nil, fmt.Errorf("search: index %s: %w", d.Name, err)
	}
	seqs, uuid, sig, err := readState(idx, b.NumPartitions())
	if err != nil {
		return fail(err)
	}
	heldColl, err := idx.GetInternal(keyColl)
	if err != nil {
		return fail(err)
	}
	rebuild := false
	if !fresh {
		if sig != d.sig {
			s.opts.Logger.Warn("search: index files hold another definition; rebuilding", "bucket", b.Name(), "index", d.Name)
			rebuild = true
		} else if err := b.CheckPosition(uuid, seqs); err != nil {
			if !errors.Is(err, engine.ErrRollback) {
				return fail(err)
			}
			s.opts.Logger.Warn("search: the bucket no longer holds what the index was built from; rebuilding",
				"bucket", b.Name(), "index", d.Name, "err", err)
			rebuild = true
			s.rollbacks.Add(1)
		} else if string(heldColl) != strconv.FormatUint(uint64(coll), 10) {
			s.opts.Logger.Warn("search: the index's source collection was dropped; rebuilding",
				"bucket", b.Name(), "index", d.Name, "collection", d.SourceCollection)
			rebuild = true
		}
	}
	if rebuild {
		idx.Close()
		if err := os.RemoveAll(path); err != nil {
			return nil, fmt.Errorf("search: discard index %s: %w", d.Name, err)
		}
		if idx, _, err = s.openIndex(d, path); err != nil {
			return nil, fmt.Errorf("search: open index %s: %w", d.Name, err)
		}
		seqs = make([]uint64, b.NumPartitions())
	}
	idx.SetName(d.Name)
	if err := b.RegisterConsumer(ctx, consumerName(d.Name)); err != nil {
		return fail(err)
	}
	bt := idx.NewBatch()
	bt.SetInternal(keyUUID, []byte(strconv.FormatUint(b.UUID(), 10)))
	bt.SetInternal(keySig, []byte(d.sig))
	bt.SetInternal(keyColl, []byte(strconv.FormatUint(uint64(coll), 10)))
	if err := idx.Batch(bt); err != nil {
		return fail(err)
	}
	life, cancel := context.WithCancel(context.Background())
	ix := &indexer{
		bucket: b, name: d.Name, source: d.SourceCollection, path: path, batch: s.opts.BatchSize,
		log:  func(msg string, args ...any) { s.opts.Logger.Warn(msg, append(args, "bucket", b.Name())...) },
		info: func(msg string, args ...any) { s.opts.Logger.Info(msg, append(args, "bucket", b.Name())...) },
		idx:  idx, seqs: seqs, upd: make(chan struct{}, 1),
		noSync:      s.opts.NoSync || path == "", // in memory: no disk to wait for
		unpersisted: make(chan struct{}, maxUnpersisted),
		life:        life, cancel: cancel, done: make(chan struct{}),
	}
	if sm, ok := idx.Mapping().(mapping.SynonymMapping); ok && sm.SynonymCount() > 0 {
		ix.synonyms = true
	}
	ix.coll.Store(uint32(coll))
	if coll == noCollection && (rebuild || fresh) {
		ix.seqs = b.HighSeqnos() // nothing to index until it exists again
	}
	ix.def.Store(d)
	ix.fresh.Store(fresh || rebuild)
	if rebuild && sig == d.sig {
		ix.rollbacks.Add(1)
	}
	ix.start(!s.opts.NoAutoUpdate)
	return ix, nil
}

// lookup returns a bucket's indexes.
func (s *Service) lookup(bucket string) (*bucketIndexes, error) {
	s.mu.Lock()
	closed, bi := s.mu.closed, s.mu.buckets[bucket]
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if bi != nil {
		return bi, nil
	}
	b, err := s.eng.Bucket(bucket)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	if b.Settings().Type == engine.Memcached {
		return nil, fmt.Errorf("%w: bucket %s is a memcached bucket", ErrNoSearch, bucket)
	}
	return nil, fmt.Errorf("%w: bucket %s is not ready", ErrNotFound, bucket)
}

// indexerFor returns the running indexer of an index.
func (s *Service) indexerFor(bucket, name string) (*indexer, error) {
	bi, err := s.lookup(bucket)
	if err != nil {
		return nil, err
	}
	bi.mu.Lock()
	ix, broken := bi.mu.indexers[name], bi.mu.broken[name]
	bi.mu.Unlock()
	if ix == nil {
		if broken != nil {
			return nil, fmt.Errorf("%w: index %s: %w", ErrLoadFailed, name, broken)
		}
		return nil, fmt.Errorf("%w: index %s not found in bucket %s", ErrNotFound, name, bucket)
	}
	return ix, nil
}

// FindIndex returns the bucket that holds the index called name (Couchbase's
// /api/index/{name} names no bucket), or an error wrapping ErrNotFound.
func (s *Service) FindIndex(name string) (string, error) {
	for _, b := range s.eng.Buckets() {
		if b.Settings().Type == engine.Memcached {
			continue
		}
		if _, err := b.SystemDoc(DefPrefix + name); err == nil {
			return b.Name(), nil
		}
	}
	return "", fmt.Errorf("%w: index %s", ErrNotFound, name)
}

// PutIndex validates and stores an index definition and starts its index.
// Replacing a definition whose mapping or source collection changed
// rebuilds the index; one that did not change keeps it. A bad definition is
// a *DefError. Index names are unique across the buckets, as Couchbase's
// are.
func (s *Service) PutIndex(ctx context.Context, bucket, name string, body []byte) (*IndexDef, error) {
	d, err := ParseIndexDef(bucket, name, body)
	if err != nil {
		return nil, err
	}
	bi, err := s.lookup(bucket)
	if err != nil {
		return nil, sourceError(bucket, err)
	}
	if other, err := s.FindIndex(name); err == nil && other != bucket {
		return nil, defErr("an index called %q already exists in bucket %s", name, other)
	}
	if d.IsAlias() {
		return s.putAlias(ctx, bi, d)
	}
	if _, err := d.collectionID(bi.bucket); err != nil {
		return nil, &DefError{Reason: fmt.Sprintf("sourceCollection %s: %v", d.SourceCollection, err), Err: err}
	}
	bi.change.Lock()
	defer bi.change.Unlock()
	bi.mu.Lock()
	gone, old := bi.mu.gone, bi.mu.indexers[name]
	bi.mu.Unlock()
	if gone {
		return nil, fmt.Errorf("%w: bucket %s was closed or deleted", ErrClosed, bucket)
	}
	key := DefPrefix + name
	if old != nil && old.def.Load().sig == d.sig {
		if err := bi.bucket.PutSystemDoc(ctx, key, d.Body); err != nil {
			return nil, fmt.Errorf("search: store %s: %w", name, err)
		}
		old.def.Store(d)
		s.opts.Logger.Info("search index updated", "bucket", bucket, "index", name, "rebuild", false)
		return d, nil
	}
	if old != nil {
		bi.mu.Lock()
		delete(bi.mu.indexers, name)
		bi.mu.Unlock()
		if err := old.close(); err != nil {
			s.opts.Logger.Warn("search: closing a replaced index", "bucket", bucket, "index", name, "err", err)
		}
	}
	if err := removeIndexFiles(bi.bucket, name); err != nil {
		s.opts.Logger.Warn("search: removing a replaced index", "bucket", bucket, "index", name, "err", err)
	}
	ix, err := s.startIndexer(ctx, bi.bucket, d)
	if err == nil {
		if err = bi.bucket.PutSystemDoc(ctx, key, d.Body); err != nil {
			err = fmt.Errorf("search: store %s: %w", name, err)
			ix.close()
			removeIndexFiles(bi.bucket, name)
			if old == nil {
				bi.bucket.DropConsumer(ctx, consumerName(name))
			}
		}
	}
	if err != nil {
		if old != nil { // the old definition is still the stored one
			if ix, rerr := s.startIndexer(ctx, bi.bucket, old.def.Load()); rerr == nil {
				bi.mu.Lock()
				bi.mu.indexers[name] = ix
				bi.mu.Unlock()
			}
		}
		return nil, err
	}
	bi.mu.Lock()
	bi.mu.indexers[name] = ix
	delete(bi.mu.aliases, name)
	delete(bi.mu.broken, name)
	bi.mu.Unlock()
	if old != nil {
		s.opts.Logger.Info("search index updated", "bucket", bucket, "index", name, "rebuild", true)
	} else {
		s.opts.Logger.Info("search index created", "bucket", bucket, "index", name, "source_collection", d.SourceCollection)
	}
	return d, nil
}

// GetIndex returns an index's definition.
func (s *Service) GetIndex(ctx context.Context, bucket, name string) (*IndexDef, error) {
	bi, err := s.lookup(bucket)
	if err != nil {
		return nil, err
	}
	body, err := bi.bucket.SystemDoc(DefPrefix + name)
	if err != nil {
		return nil, fmt.Errorf("%w: index %s not found in bucket %s", ErrNotFound, name, bucket)
	}
	d, err := loadIndexDef(bucket, name, body)
	if err != nil {
		return nil, fmt.Errorf("%w: index %s: %w", ErrLoadFailed, name, err)
	}
	return d, nil
}

// ListIndexes returns a bucket's index definitions, sorted by name.
func (s *Service) ListIndexes(ctx context.Context, bucket string) ([]*IndexDef, error) {
	bi, err := s.lookup(bucket)
	if err != nil {
		return nil, err
	}
	var out []*IndexDef
	for _, key := range bi.bucket.SystemDocKeys(DefPrefix) {
		name := strings.TrimPrefix(key, DefPrefix)
		body, err := bi.bucket.SystemDoc(key)
		if err != nil {
			continue
		}
		d, err := loadIndexDef(bucket, name, body)
		if err != nil {
			continue // LoadErrors says why
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// LoadErrors returns, by index name, why each stored definition of a bucket
// that could not be loaded was skipped.
func (s *Service) LoadErrors(ctx context.Context, bucket string) (map[string]error, error) {
	bi, err := s.lookup(bucket)
	if err != nil {
		return nil, err
	}
	bi.mu.Lock()
	defer bi.mu.Unlock()
	out := make(map[string]error, len(bi.mu.broken))
	for n, err := range bi.mu.broken {
		out[n] = err
	}
	return out, nil
}

// DeleteIndex removes an index: its definition, its files, and its
// registration with the change feed.
func (s *Service) DeleteIndex(ctx context.Context, bucket, name string) error {
	bi, err := s.lookup(bucket)
	if err != nil {
		return err
	}
	bi.change.Lock()
	defer bi.change.Unlock()
	bi.mu.Lock()
	gone, ix := bi.mu.gone, bi.mu.indexers[name]
	bi.mu.Unlock()
	if gone {
		return fmt.Errorf("%w: bucket %s was closed or deleted", ErrClosed, bucket)
	}
	key := DefPrefix + name
	if _, err := bi.bucket.SystemDoc(key); ix == nil && err != nil {
		return fmt.Errorf("%w: index %s not found in bucket %s", ErrNotFound, name, bucket)
	}
	if err := bi.bucket.PutSystemDoc(ctx, key, nil); err != nil {
		return fmt.Errorf("search: delete %s: %w", name, err)
	}
	bi.mu.Lock()
	delete(bi.mu.indexers, name)
	delete(bi.mu.aliases, name)
	delete(bi.mu.broken, name)
	bi.mu.Unlock()
	var errs []error
	if ix != nil {
		if err := ix.close(); err != nil {
			s.opts.Logger.Warn("search: closing a deleted index", "bucket", bucket, "index", name, "err", err)
		}
	}
	if err := bi.bucket.DropConsumer(ctx, consumerName(name)); err != nil {
		errs = append(errs, fmt.Errorf("search: %w", err))
	}
	if err := removeIndexFiles(bi.bucket, name); err != nil {
		errs = append(errs, err)
	}
	s.opts.Logger.Info("search index deleted", "bucket", bucket, "index", name)
	return errors.Join(errs...)
}

// Stats describe one index.
type Stats struct {
	Name   string `json:"name"`
	Bucket string `json:"bucket"`
	// DocCount counts the live documents the index holds (expired ones
	// left out).
	DocCount uint64 `json:"doc_count"`
	// DocsIndexed counts the documents indexed (added or replaced) since
	// the index opened; DocsDeleted those removed.
	DocsIndexed int64 `json:"docs_indexed"`
	DocsDeleted int64 `json:"docs_deleted"`
	// Batches counts the batches written since the index opened.
	Batches int64 `json:"batches"`
	// SeqsBehind counts the changes the index has not seen yet.
	SeqsBehind uint64 `json:"seqs_behind"`
	// DiskBytes is the size of the index's files (0 in memory).
	DiskBytes int64 `json:"disk_bytes"`
	// Queries counts the queries run; QueryErrors those that failed.
	Queries     int64 `json:"queries"`
	QueryErrors int64 `json:"query_errors"`
	// IndexErrors counts documents bleve refused and failed batches;
	// LastError is the latest.
	IndexErrors int64  `json:"index_errors"`
	LastError   string `json:"last_error,omitempty"`
	// Rollbacks counts the times the index was discarded when it opened,
	// the bucket no longer holding what it was built from.
	Rollbacks int64 `json:"rollbacks"`
}

// Stats returns the stats of every index of a bucket, sorted by name.
func (s *Service) Stats(ctx context.Context, bucket string) ([]Stats, error) {
	bi, err := s.lookup(bucket)
	if err != nil {
		return nil, err
	}
	var out []Stats
	for _, ix := range bi.indexers() {
		st, err := ix.stats(ctx)
		if err != nil {
			if errors.Is(err, ErrClosed) {
				continue
			}
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// IndexStats returns one index's stats.
func (s *Service) IndexStats(ctx context.Context, bucket, name string) (Stats, error) {
	ix, err := s.indexerFor(bucket, name)
	if err != nil {
		return Stats{}, err
	}
	return ix.stats(ctx)
}

func (bi *bucketIndexes) indexers() []*indexer {
	bi.mu.Lock()
	out := make([]*indexer, 0, len(bi.mu.indexers))
	for _, ix := range bi.mu.indexers {
		out = append(out, ix)
	}
	bi.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (ix *indexer) stats(ctx context.Context) (Stats, error) {
	n, err := ix.count(ctx)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Name: ix.name, Bucket: ix.bucket.Name(), DocCount: n,
		DocsIndexed: ix.indexed.Load(), DocsDeleted: ix.deleted.Load(), Batches: ix.batches.Load(),
		DiskBytes: ix.diskBytes(), Queries: ix.queries.Load(), QueryErrors: ix.qerrors.Load(),
		IndexErrors: ix.ierrors.Load(), Rollbacks: ix.rollbacks.Load()}
	if p := ix.lastErr.Load(); p != nil {
		st.LastError = *p
	}
	high := ix.bucket.HighSeqnos()
	for i, s := range ix.position() {
		if high[i] > s {
			st.SeqsBehind += high[i] - s
		}
	}
	return st, nil
}

// Rollbacks counts the indexes the service discarded and rebuilt because
// their bucket no longer held the changes they were built from.
func (s *Service) Rollbacks() int64 { return s.rollbacks.Load() }

// Close stops every indexer. Later calls to Close, AttachBucket and
// DetachBucket do nothing; other calls fail with ErrClosed.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	bis := s.mu.buckets
	s.mu.buckets = map[string]*bucketIndexes{}
	s.mu.Unlock()
	var errs []error
	for _, bi := range bis {
		errs = append(errs, s.retire(bi, false))
	}
	return errors.Join(errs...)
}

var _ engine.BucketService = (*Service)(nil)
