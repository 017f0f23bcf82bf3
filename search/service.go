package search

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/feed"
)

// DefaultBatchSize is the default Options.BatchSize.
const DefaultBatchSize = 2000

// DefaultBatchBytes is the default Options.BatchBytes: 4 MiB of keys and
// values. A batch's heap while bleve analyses and writes it is many times
// its documents' bytes (BENCHMARKS.md, issue 19: 2,000 documents of 20 KB,
// 40 MB, peaked at 1.78 GB of heap; 200 of them at 0.61 GB). 4 MiB is
// about cbft's 200-operation batches (BleveMaxOpsPerBatch) of such
// documents, while 2,000 documents of up to 2 KiB, most JSON documents,
// still fill a batch by count, so small documents index as fast as
// before.
const DefaultBatchBytes = 4 << 20

// Options configure the search Service. A nil *Options means defaults.
type Options struct {
	// BatchSize is how many changed documents go into one index batch, at
	// most: a quarter of it while the process's memory is near Go's memory
	// limit (feed.Options.BatchSize). The default value (0) is
	// DefaultBatchSize; a negative value is an error.
	BatchSize int
	// BatchBytes bounds an index batch by the bytes of its documents'
	// keys and values too (feed.Options.BatchBytes): a batch ends with
	// the document that takes it to BatchBytes. The default value (0) is
	// DefaultBatchBytes; a negative value is an error.
	BatchBytes int
	// QueryTimeout bounds a search whose request gives no ctl.timeout. The
	// default value (0) is DefaultQueryTimeout; a negative value leaves
	// such searches unbounded.
	QueryTimeout time.Duration
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
	// OpenInBackground makes New return at once and open each bucket's
	// stored indexes in the background (see views.Options.OpenInBackground):
	// a query of an index not open yet is a temporary failure
	// (engine.ErrWarmup). The default value, false, opens them all before
	// New returns.
	OpenInBackground bool
}

// validate checks o and fills in its defaults.
func (o *Options) validate() error {
	if err := feed.Defaults(&o.BatchSize, DefaultBatchSize, &o.Logger); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	switch {
	case o.BatchBytes < 0:
		return fmt.Errorf("%w: BatchBytes %d is negative", ErrInvalidOptions, o.BatchBytes)
	case o.BatchBytes == 0:
		o.BatchBytes = DefaultBatchBytes
	}
	switch {
	case o.QueryTimeout < 0:
		o.QueryTimeout = 0 // none
	case o.QueryTimeout == 0:
		o.QueryTimeout = DefaultQueryTimeout
	}
	return nil
}

// Service owns the full-text indexes of every bucket of an engine. It is safe
// for concurrent use. Its registry is the engine.BucketService: the engine
// tells it when a bucket opens and before it closes or is deleted.
//
// Locking: each bucket's definition changes (and its attach and detach) are
// serialized by that bucket's set's change lock (feed.Set), which may be
// held across disk I/O and index opens but is never taken by queries.
type Service struct {
	eng       *engine.Engine
	opts      Options
	rollbacks atomic.Int64
	// replacedRetries counts the searches run again on an index that
	// replaced the one they used (see Search).
	replacedRetries atomic.Int64
	aliasCache      expiredCache // the expiry filter's cache for alias queries
	reg             *feed.Registry[*indexer, *IndexDef]
	// hooks inject faults in tests; nil fields mean none. Set before the
	// indexes they affect start.
	hooks struct {
		// apply, if set, runs before each batch an index applies; an
		// error fails the batch.
		apply func(ctx context.Context, index string) error
		// prepared, if set, is told of each batch an index prepares:
		// the bytes (feed.ChangeBytes) of each of its changes.
		prepared func(index string, sizes []int64)
	}
}

// bucketIndexes are one bucket's running indexers by index name, with its
// alias definitions beside them (the set's extras).
type bucketIndexes = feed.Set[*indexer, *IndexDef]

// New starts the search service over eng and attaches it to eng: it opens
// the index of every definition already stored, each resuming from the feed
// position it holds.
func New(ctx context.Context, eng *engine.Engine, opts *Options) (*Service, error) {
	o := feed.OrZero(opts)
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Service{eng: eng, opts: o}
	reg, err := feed.Attach(ctx, eng, feed.RegistryOptions[*indexer, *IndexDef]{
		Kind: "search", Dir: "search", LogKey: "index", Noun: "index", Logger: o.Logger,
		ErrClosed: ErrClosed, ErrNone: ErrNoSearch, ErrNotFound: ErrNotFound,
		Prefix: DefPrefix, Load: s.loadStored, Background: o.OpenInBackground,
		IDOf: func(key string) string { return strings.TrimPrefix(key, DefPrefix) },
	})
	if err != nil {
		return nil, err
	}
	s.reg = reg
	return s, nil
}

// loadStored starts the indexer of a stored definition when its bucket is
// attached; an alias's definition is kept beside the indexers.
func (s *Service) loadStored(ctx context.Context, bi *bucketIndexes, key string, body []byte) (*indexer, bool, error) {
	name := strings.TrimPrefix(key, DefPrefix)
	if d, err := loadIndexDef(bi.Bucket.Name(), name, body); err == nil && d.IsAlias() {
		bi.SetExtra(name, d)
		return nil, false, nil
	}
	ix, err := s.load(ctx, bi.Bucket, name, body)
	return ix, err == nil, err
}

func (s *Service) load(ctx context.Context, b *engine.Bucket, name string, body []byte) (*indexer, error) {
	d, err := loadIndexDef(b.Name(), name, body)
	if err != nil {
		return nil, err
	}
	return s.startIndexer(ctx, b, d, false)
}

// IndexPath is where an index's files live: a folder beside the bucket's
// data, named by a hash of the index name; "" (memory) for a bucket kept in
// memory.
func IndexPath(b *engine.Bucket, name string) string {
	return feed.IndexPath(b, "search", name, ".bleve")
}

// removeIndexFiles removes an index's files, and those of a replacement
// being built, if any.
func removeIndexFiles(b *engine.Bucket, name string) error {
	p := IndexPath(b, name)
	if p == "" {
		return nil
	}
	for _, f := range []string{p, feed.StagingPath(p)} {
		if err := os.RemoveAll(f); err != nil {
			return fmt.Errorf("search: remove index files: %w", err)
		}
	}
	return nil
}

// openConfig is the scorch configuration of an index on disk. Batches
// return once in memory; the indexer learns when each is on disk from its
// persisted callback (see indexer.apply).
func openConfig() map[string]any { return map[string]any{"unsafe_batch": true} }

// openIndex opens d's bleve index at path, creating it when missing.
// fresh says it was created.
func (s *Service) openIndex(d *IndexDef, path string) (idx bleve.Index, fresh bool, err error) {
	m, err := d.indexMapping()
	if err != nil {
		return nil, false, err
	}
	cfg := openConfig()
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
	// Created with safe batches: bleve stores the mapping in the index as it
	// creates it, and an unsafe batch stays in memory until scorch's
	// persister runs, and is dropped if the index closes first (a staged
	// replacement with nothing to build is closed and moved at once). Then
	// opened again with the configuration it runs with.
	idx, err = bleve.NewUsing(path, m, scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, false, err
	}
	if err := idx.Close(); err != nil {
		return nil, false, err
	}
	idx, err = bleve.OpenUsing(path, cfg)
	return idx, true, err
}

// startIndexer opens d's index (rebuilding it when it was built for another
// definition or collection) and starts its feed consumer, which registers
// it with b's change feed and checks that its position is in b's history
// (rebuilding it when not).
//
// A staged indexer (replacing a running one) keeps its files at a staging
// path until moveTo moves them to the index's path, so that the running
// one answers queries until the new one takes over.
func (s *Service) startIndexer(ctx context.Context, b *engine.Bucket, d *IndexDef, staged bool) (*indexer, error) {
	coll := sourceID(b, d.SourceCollection)
	path := IndexPath(b, d.Name)
	if path != "" {
		if err := os.RemoveAll(feed.StagingPath(path)); err != nil { // a leftover
			return nil, fmt.Errorf("search: remove a leftover staged index: %w", err)
		}
		if staged {
			path = feed.StagingPath(path)
		}
	}
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
		} else if err := b.CheckPosition(uuid, seqs); err == nil && string(heldColl) != strconv.FormatUint(uint64(coll), 10) {
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
	ix := &indexer{
		bucket: b, name: d.Name, source: d.SourceCollection, path: path, batch: s.opts.BatchSize,
		log: func(msg string, args ...any) { s.opts.Logger.Warn(msg, append(args, "bucket", b.Name())...) },
		open: func(path string) (bleve.Index, error) {
			idx, _, err := s.openIndex(d, path)
			return idx, err
		},
		idx: idx, seqs: seqs, uuid: uuid, applyHook: s.hooks.apply, preparedHook: s.hooks.prepared,
		noSync:      s.opts.NoSync || path == "", // in memory: no disk to wait for
		unpersisted: make(chan struct{}, maxUnpersisted),
	}
	if sm, ok := idx.Mapping().(mapping.SynonymMapping); ok && sm.SynonymCount() > 0 {
		ix.synonyms = true
	}
	ix.coll.Store(uint32(coll))
	if coll == noCollection && (rebuild || fresh) {
		ix.seqs, ix.uuid = b.HighSeqnos(), b.UUID() // nothing to index until it exists again
	}
	ix.def.Store(d)
	ix.feed, err = feed.Start(ctx, b.Consumer(consumerName(d.Name)), feed.Sink[preparedBatch](ix), feed.Options{
		Kind: "search", LogKey: "index", LogID: d.Name, BatchSize: s.opts.BatchSize, BatchBytes: int64(s.opts.BatchBytes), Auto: !s.opts.NoAutoUpdate,
		Fresh:      fresh || rebuild,
		StartedMsg: "search index build started", EndedMsg: "search index build finished",
		Warn:    ix.log,
		Info:    func(msg string, args ...any) { s.opts.Logger.Info(msg, append(args, "bucket", b.Name())...) },
		OnError: ix.fail,
		Stopped: ix.closedErr,
	})
	if err != nil {
		ix.idx.Close()
		return nil, fmt.Errorf("search: index %s: %w", d.Name, err)
	}
	if ix.feed.RolledBack() {
		s.rollbacks.Add(1)
	}
	return ix, nil
}

// lookup returns a bucket's indexes.
func (s *Service) lookup(bucket string) (*bucketIndexes, error) { return s.reg.Lookup(bucket) }

// indexerFor returns the running indexer of an index.
func (s *Service) indexerFor(bucket, name string) (*indexer, error) {
	return s.reg.Member(bucket, name, func(broken error) error {
		if broken != nil {
			return fmt.Errorf("%w: index %s: %w", ErrLoadFailed, name, broken)
		}
		return fmt.Errorf("%w: index %s not found in bucket %s", ErrNotFound, name, bucket)
	})
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
	bi, err := s.checkIndex(bucket, d)
	if err != nil {
		return nil, err
	}
	return s.putIndex(ctx, bi, d)
}

// CheckIndex validates an index definition as PutIndex would and stores
// nothing; it returns the definition PutIndex would store, with a new
// uuid (its Body holds it). A cluster node checks a definition this way,
// writes its Body to the cluster's state, and every node stores that Body
// with PutIndexDef, so that every node answers the same uuid.
func (s *Service) CheckIndex(ctx context.Context, bucket, name string, body []byte) (*IndexDef, error) {
	d, err := ParseIndexDef(bucket, name, body)
	if err != nil {
		return nil, err
	}
	if _, err := s.checkIndex(bucket, d); err != nil {
		return nil, err
	}
	return d, nil
}

// PutIndexDef stores an index definition exactly as given, its uuid kept:
// body is a definition as GetIndex returns it (CheckIndex's Body). Storing
// the body an index already has changes nothing; otherwise it is checked
// and stored as PutIndex does.
func (s *Service) PutIndexDef(ctx context.Context, bucket, name string, body []byte) (*IndexDef, error) {
	if cur, err := s.GetIndex(ctx, bucket, name); err == nil && bytes.Equal(cur.Body, body) {
		return cur, nil
	}
	d, err := loadIndexDef(bucket, name, body)
	if err != nil {
		return nil, err
	}
	bi, err := s.checkIndex(bucket, d)
	if err != nil {
		return nil, err
	}
	return s.putIndex(ctx, bi, d)
}

// checkIndex checks what a parsed definition needs of its bucket: the
// bucket exists, no other bucket has an index of that name, the uuid it
// names (if any) is its index's (checkPrevUUID), an alias's targets are
// indexes of the bucket, an index's source collection exists.
func (s *Service) checkIndex(bucket string, d *IndexDef) (*bucketIndexes, error) {
	bi, err := s.lookup(bucket)
	if err != nil {
		return nil, sourceError(bucket, err)
	}
	if other, err := s.FindIndex(d.Name); err == nil && other != bucket {
		// cbgt's words, which gocbcore's search error decoder reads as
		// ErrIndexExists.
		return nil, defErr("cannot create index because an index with the same name already exists: %s, in bucket %s", d.Name, other)
	}
	if err := checkCurrentUUID(bi, d); err != nil { // again under the change lock when stored
		return nil, err
	}
	if d.IsAlias() {
		return bi, checkAliasTargets(bi, d)
	}
	if _, err := d.collectionID(bi.Bucket); err != nil {
		return nil, &DefError{Reason: fmt.Sprintf("sourceCollection %s: %v", d.SourceCollection, err), Err: err}
	}
	return bi, nil
}

// putIndex stores a checked definition and starts (or keeps, or
// replaces) its index.
func (s *Service) putIndex(ctx context.Context, bi *bucketIndexes, d *IndexDef) (*IndexDef, error) {
	if d.IsAlias() {
		return s.putAlias(ctx, bi, d)
	}
	bucket, name := bi.Bucket.Name(), d.Name
	unlock, err := bi.Change()
	if err != nil {
		return nil, err
	}
	defer unlock()
	key := DefPrefix + name
	if err := checkCurrentUUID(bi, d); err != nil {
		return nil, err
	}
	old, _, _ := bi.Get(name)
	if old != nil && old.def.Load().sig == d.sig {
		if err := bi.Bucket.PutSystemDoc(ctx, key, d.Body); err != nil {
			return nil, fmt.Errorf("search: store %s: %w", name, err)
		}
		old.def.Store(d)
		s.opts.Logger.Info("search index updated", "bucket", bucket, "index", name, "rebuild", false)
		return d, nil
	}
	b := bi.Bucket
	if old != nil {
		// The move is finished whatever ctx does: an index left at the
		// staging path is where the next replacement builds.
		moveCtx := context.WithoutCancel(ctx)
		// A running index whose move into place failed lives at the staging
		// path, where the new one is about to be built: it moves into place
		// first, or the replacement fails and takes nothing from it.
		if err := old.moveTo(moveCtx, IndexPath(b, name)); err != nil {
			return nil, fmt.Errorf("search: index %s: moving it into place before its replacement: %w", name, err)
		}
	}
	_, replaced, err := feed.Replace(ctx, bi, name, feed.Replacement[*indexer]{
		Path: IndexPath(b, name), Feed: b.Consumer(consumerName(name)),
		RemoveFiles: func() error { return removeIndexFiles(b, name) },
		Start:       func(staged bool) (*indexer, error) { return s.startIndexer(ctx, b, d, staged) },
		Store:       func() error { return b.PutSystemDoc(ctx, key, d.Body) },
		// The new index's files take the index's path once its build
		// lets it (see moveLater): the PUT answers now, as Couchbase's
		// does, and other definitions change meanwhile. If the process
		// stops before, the stored definition's signature rebuilds the
		// index there.
		Promote: func(ix *indexer) error { ix.moveLater(IndexPath(b, name)); return nil },
	})
	if err != nil {
		return nil, err
	}
	if replaced {
		s.opts.Logger.Info("search index updated", "bucket", bucket, "index", name, "rebuild", true)
	} else {
		s.opts.Logger.Info("search index created", "bucket", bucket, "index", name, "source_collection", d.SourceCollection)
	}
	return d, nil
}

// checkCurrentUUID is checkPrevUUID against the definition stored now;
// the caller holds the bucket's change lock, so that no change comes
// between the check and the store.
func checkCurrentUUID(bi *bucketIndexes, d *IndexDef) error {
	cur, err := bi.Bucket.SystemDoc(DefPrefix + d.Name)
	if err != nil {
		cur = nil // none stored
	}
	return checkPrevUUID(d, cur)
}

// GetIndex returns an index's definition.
func (s *Service) GetIndex(ctx context.Context, bucket, name string) (*IndexDef, error) {
	bi, err := s.lookup(bucket)
	if err != nil {
		return nil, err
	}
	body, err := bi.Bucket.SystemDoc(DefPrefix + name)
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
	for _, key := range bi.Bucket.SystemDocKeys(DefPrefix) {
		name := strings.TrimPrefix(key, DefPrefix)
		body, err := bi.Bucket.SystemDoc(key)
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
	return s.reg.LoadErrors(bucket)
}

// DeleteIndex removes an index: its definition, its files, and its
// registration with the change feed.
func (s *Service) DeleteIndex(ctx context.Context, bucket, name string) error {
	bi, unlock, err := s.reg.Change(bucket)
	if err != nil {
		return err
	}
	defer unlock()
	ix, _, _ := bi.Get(name)
	key := DefPrefix + name
	if _, err := bi.Bucket.SystemDoc(key); ix == nil && err != nil {
		return fmt.Errorf("%w: index %s not found in bucket %s", ErrNotFound, name, bucket)
	}
	if err := bi.Bucket.PutSystemDoc(ctx, key, nil); err != nil {
		return fmt.Errorf("search: delete %s: %w", name, err)
	}
	err = bi.Retire(ctx, name, bi.Bucket.Consumer(consumerName(name)), func() error { return removeIndexFiles(bi.Bucket, name) })
	s.opts.Logger.Info("search index deleted", "bucket", bucket, "index", name)
	return err
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
	for _, ix := range bi.Members() {
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
	high := ix.feed.Handle().HighSeqnos()
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
func (s *Service) Close() error { return s.reg.Close() }
