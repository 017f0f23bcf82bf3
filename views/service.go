package views

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/jsruntime"
)

// DefaultBatchSize is the default Options.BatchSize.
const DefaultBatchSize = 20000

// Options configure the views Service. A nil *Options means defaults.
type Options struct {
	// JS configures the JavaScript pool (workers, time limit per call).
	JS *jsruntime.Options
	// BatchSize is how many changed documents the indexer maps per index
	// transaction. The default value (0) is DefaultBatchSize; a negative
	// value is an error.
	BatchSize int
	// Logger receives indexing problems. The default value discards them.
	Logger *slog.Logger
	// NoAutoUpdate stops indexes from following the change feed on their
	// own: they then update only when a query asks (stale=false before
	// answering, stale=update_after after). Tests use it to see stale=ok
	// answer from an old index. The default value is false: every index
	// follows the feed as documents change.
	NoAutoUpdate bool
	// SkipDesignDocs names stored design documents not to load when a
	// bucket opens, as "bucket/_design/name" (or "bucket/name"): one that
	// made the server fail, or hog it, at start. A skipped design document
	// is reported by LoadErrors and can be replaced or deleted.
	SkipDesignDocs []string
	// NoSync skips fsync on index commits: faster, and a crash may lose
	// index updates (the index then rebuilds what it lost from the feed).
	// The default value is false.
	NoSync bool
}

// validate checks o and fills in its defaults.
func (o *Options) validate() error {
	if o.BatchSize < 0 {
		return fmt.Errorf("%w: BatchSize %d is negative", ErrInvalidOptions, o.BatchSize)
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.JS != nil {
		switch {
		case o.JS.Workers < 0:
			return fmt.Errorf("%w: JS.Workers %d is negative", ErrInvalidOptions, o.JS.Workers)
		case o.JS.Timeout < 0:
			return fmt.Errorf("%w: JS.Timeout %v is negative", ErrInvalidOptions, o.JS.Timeout)
		case o.JS.MaxCallStackSize < 0:
			return fmt.Errorf("%w: JS.MaxCallStackSize %d is negative", ErrInvalidOptions, o.JS.MaxCallStackSize)
		case o.JS.CachedPrograms < 0:
			return fmt.Errorf("%w: JS.CachedPrograms %d is negative", ErrInvalidOptions, o.JS.CachedPrograms)
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// Service owns the design documents and view indexes of every bucket of an
// engine. It is safe for concurrent use. It is an engine.BucketService: the
// engine tells it when a bucket opens (AttachBucket) and before it closes or
// is deleted (DetachBucket).
//
// Locking: s.mu guards only the map of buckets and is never held across
// anything slow. Each bucket's design-document changes (and its attach and
// detach) are serialized by that bucket's own change mutex, which may be
// held across disk I/O and index opens but never blocks queries, which take
// only short locks.
type Service struct {
	eng       *engine.Engine
	pool      *jsruntime.Pool
	opts      Options
	rollbacks atomic.Int64 // indexes discarded because the bucket's history moved on

	mu struct {
		sync.Mutex
		buckets map[string]*bucketViews // by bucket name; couchbase and ephemeral buckets only
		closed  bool
	}
}

// bucketViews are one bucket's running indexers.
type bucketViews struct {
	bucket *engine.Bucket

	// change serializes the design-document changes of the bucket, and its
	// attach and detach. It may be held across disk I/O and index opens.
	change sync.Mutex

	mu struct {
		sync.Mutex
		indexers map[string]*indexer // by design document ID
		broken   map[string]error    // stored design documents that failed to load, by ID
		gone     bool                // detached: no new indexer may be added
	}
}

// New starts the views service over eng and attaches it to eng (see
// engine.Engine.Attach): it opens the index of every design document already
// stored, and each indexer resumes from its recorded sequence numbers. A
// stored design document that cannot be loaded is logged and skipped (see
// LoadErrors).
func New(ctx context.Context, eng *engine.Engine, opts *Options) (*Service, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Service{eng: eng, pool: jsruntime.NewPool(o.JS), opts: o}
	s.mu.buckets = make(map[string]*bucketViews)
	if err := eng.Attach(ctx, s); err != nil {
		s.Close()
		return nil, fmt.Errorf("views: %w", err)
	}
	return s, nil
}

// AttachBucket opens the indexes of b's design documents (nothing for a
// memcached bucket). A design document that cannot be loaded is logged,
// remembered (see LoadErrors) and skipped. After Close it does nothing.
func (s *Service) AttachBucket(ctx context.Context, b *engine.Bucket) error {
	if b.Settings().Type == engine.Memcached {
		return nil
	}
	bv := &bucketViews{bucket: b}
	bv.mu.indexers = make(map[string]*indexer)
	bv.mu.broken = make(map[string]error)
	bv.change.Lock()
	defer bv.change.Unlock()
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	old := s.mu.buckets[b.Name()]
	s.mu.buckets[b.Name()] = bv
	s.mu.Unlock()
	if old != nil { // not detached: cannot happen with a well-behaved engine
		s.opts.Logger.Warn("views: bucket attached twice", "bucket", b.Name())
		s.retire(old, false)
	}
	for _, id := range b.SystemDocKeys(DesignDocPrefix) {
		if s.skipped(b.Name(), id) {
			s.opts.Logger.Warn("views: stored design document skipped (SkipDesignDocs); it can be replaced or deleted",
				"bucket", b.Name(), "ddoc", id)
			bv.mu.Lock()
			bv.mu.broken[id] = ErrSkipped
			bv.mu.Unlock()
			continue
		}
		body, err := b.SystemDoc(id)
		if err != nil {
			continue // deleted meanwhile
		}
		ix, err := s.load(ctx, b, id, body)
		if err != nil {
			s.opts.Logger.Error("views: stored design document not loaded; it can be replaced or deleted",
				"bucket", b.Name(), "ddoc", id, "err", err)
			bv.mu.Lock()
			bv.mu.broken[id] = err
			bv.mu.Unlock()
			continue
		}
		bv.mu.Lock()
		bv.mu.indexers[id] = ix
		bv.mu.Unlock()
	}
	return nil
}

// skipped reports whether Options.SkipDesignDocs names the design document
// id of bucket.
func (s *Service) skipped(bucket, id string) bool {
	for _, name := range s.opts.SkipDesignDocs {
		b, d, ok := strings.Cut(name, "/")
		if ok && b == bucket && (d == id || DesignDocPrefix+d == id) {
			return true
		}
	}
	return false
}

// load parses a stored design document and starts its indexer.
func (s *Service) load(ctx context.Context, b *engine.Bucket, id string, body []byte) (*indexer, error) {
	d, err := ParseDesignDoc(id, body)
	if err != nil {
		return nil, err
	}
	d.Rev = storedRev(b, id)
	if revNumber(d.Rev) == 0 { // stored before revisions were kept
		d.Rev = makeRev(1, d.Body)
	}
	prog, err := s.pool.Load(d.sources())
	if err != nil {
		return nil, fmt.Errorf("views: load %s: %w", id, err)
	}
	ix, err := s.startIndexer(ctx, b, d, prog, false)
	if err != nil {
		prog.Close()
		return nil, err
	}
	return ix, nil
}

// storedRev returns the last revision recorded for design document id of b,
// "" if none.
func storedRev(b *engine.Bucket, id string) string {
	v, err := b.SystemDoc(RevPrefix + id)
	if err != nil {
		return ""
	}
	return string(v)
}

// bumpRev records and returns the next revision of design document id of b,
// for body (nil: a delete). It is recorded before the change it stands for,
// so that a crash between the two skips a number and never reuses one.
func bumpRev(ctx context.Context, b *engine.Bucket, id string, body []byte) (string, error) {
	rev := makeRev(revNumber(storedRev(b, id))+1, body)
	if err := b.PutSystemDoc(ctx, RevPrefix+id, []byte(rev)); err != nil {
		return "", fmt.Errorf("views: store the revision of %s: %w", id, err)
	}
	return rev, nil
}

// DetachBucket closes the indexes of b; with deleted, it removes their files
// too. The service then holds nothing of b. After Close it does nothing.
func (s *Service) DetachBucket(ctx context.Context, b *engine.Bucket, deleted bool) error {
	s.mu.Lock()
	bv := s.mu.buckets[b.Name()]
	if bv == nil || bv.bucket != b {
		s.mu.Unlock()
		return nil
	}
	delete(s.mu.buckets, b.Name())
	s.mu.Unlock()
	return s.retire(bv, deleted)
}

// retire closes every indexer of bv and marks it gone; with deleted, it
// removes the index files.
func (s *Service) retire(bv *bucketViews, deleted bool) error {
	bv.change.Lock() // wait out a design-document change in progress
	defer bv.change.Unlock()
	bv.mu.Lock()
	ixs := bv.mu.indexers
	bv.mu.indexers = map[string]*indexer{}
	bv.mu.broken = map[string]error{}
	bv.mu.gone = true
	bv.mu.Unlock()
	var errs []error
	for _, ix := range ixs {
		if err := ix.close(); err != nil {
			errs = append(errs, fmt.Errorf("views: close %s: %w", ix.id, err))
		}
	}
	if deleted && bv.bucket.Dir() != "" {
		if err := os.RemoveAll(filepath.Join(bv.bucket.Dir(), "views")); err != nil {
			errs = append(errs, fmt.Errorf("views: remove index files: %w", err))
		}
	}
	return errors.Join(errs...)
}

// indexPath is where a design document's index lives: beside the bucket, one
// file per design document, named by a hash of the design document's ID (an
// ID may be longer than a file name can be, and hold any character); ""
// (memory) for a bucket kept in memory.
func indexPath(b *engine.Bucket, ddocID string) string {
	if b.Dir() == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(ddocID))
	return filepath.Join(b.Dir(), "views", hex.EncodeToString(sum[:16])+".idx")
}

// stagingPath is where a replacing index is built while the one it replaces
// still answers.
func stagingPath(path string) string { return path + ".next" }

// legacyIndexPath is where earlier versions kept a design document's index.
func legacyIndexPath(b *engine.Bucket, ddocID string) string {
	return filepath.Join(b.Dir(), "views", url.PathEscape(ddocID)+".idx")
}

// removeIndexFiles removes a design document's index file (and one of the
// old name), if any.
func removeIndexFiles(b *engine.Bucket, ddocID string) error {
	p := indexPath(b, ddocID)
	if p == "" {
		return nil
	}
	var errs []error
	for _, f := range []string{p, stagingPath(p), legacyIndexPath(b, ddocID)} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) && !isNameTooLong(err) {
			errs = append(errs, fmt.Errorf("views: remove index file: %w", err))
		}
	}
	return errors.Join(errs...)
}

// isNameTooLong reports whether err is a file name too long for the file
// system (which a legacy name may be).
func isNameTooLong(err error) bool { return errors.Is(err, syscall.ENAMETOOLONG) }

// startIndexer opens d's index, registers it as a change-feed consumer of b,
// checks that its position is still in b's history (discarding it when not)
// and starts its indexer.
//
// A staged indexer (replacing a running one) keeps its file at a staging
// path until promote moves it to the design document's path, so that the
// running one answers queries until the new one takes over.
func (s *Service) startIndexer(ctx context.Context, b *engine.Bucket, d *DesignDoc, prog *jsruntime.Program, staged bool) (*indexer, error) {
	life, cancel := context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			cancel()
		}
	}()
	var vcs []index.ViewConfig
	for _, n := range d.ViewNames() {
		r, err := prog.Reducer(n)
		if err != nil {
			return nil, fmt.Errorf("views: load %s: %w", d.ID, err)
		}
		vc := index.ViewConfig{Name: n}
		if r != nil {
			vc.Reducer = reducer{r: r, ctx: life}
		}
		vcs = append(vcs, vc)
	}
	path := indexPath(b, d.ID)
	if path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("views: %w", err)
		}
		if staged {
			path = stagingPath(path)
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("views: remove a leftover staged index: %w", err)
			}
		} else {
			s.migrate(b, d.ID, path)
		}
	}
	cfg := index.Config{Path: path, Signature: d.Signature(), Views: vcs, NumPartitions: b.NumPartitions()}
	cfg.NoSync = s.opts.NoSync
	idx, err := index.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("views: open the index of %s: %w", d.ID, err)
	}
	fail := func(err error) (*indexer, error) {
		idx.Close()
		return nil, err
	}
	if err := b.RegisterConsumer(ctx, consumerName(d.ID)); err != nil {
		return fail(fmt.Errorf("views: %s: %w", d.ID, err))
	}
	rolledBack := false
	if err := b.CheckPosition(idx.FeedUUID(), idx.Seqs()); err != nil {
		if !errors.Is(err, engine.ErrRollback) {
			return fail(fmt.Errorf("views: %s: %w", d.ID, err))
		}
		s.opts.Logger.Warn("views: the bucket no longer holds what the index was built from; rebuilding it",
			"bucket", b.Name(), "ddoc", d.ID, "err", err)
		if err := idx.Close(); err != nil {
			s.opts.Logger.Warn("views: closing a discarded index", "bucket", b.Name(), "ddoc", d.ID, "err", err)
		}
		if path != "" {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("views: discard the index of %s: %w", d.ID, err)
			}
		}
		if idx, err = index.Open(ctx, cfg); err != nil {
			return nil, fmt.Errorf("views: open the index of %s: %w", d.ID, err)
		}
		s.rollbacks.Add(1)
		rolledBack = true
	}
	if err := idx.SetFeedUUID(b.UUID()); err != nil {
		return fail(fmt.Errorf("views: %s: %w", d.ID, err))
	}
	log := newLimitedLog(s.opts.Logger, b.Clock(), "bucket", b.Name()).warn
	info := func(msg string, args ...any) { s.opts.Logger.Info(msg, append(args, "bucket", b.Name())...) }
	ix := newIndexer(life, cancel, b, d, prog, idx, s.opts.BatchSize, !s.opts.NoAutoUpdate, log, info)
	if rolledBack {
		ix.rollbacks.Add(1)
	}
	ok = true
	return ix, nil
}

// migrate renames an index file of the old naming scheme to path.
func (s *Service) migrate(b *engine.Bucket, id, path string) {
	old := legacyIndexPath(b, id)
	if _, err := os.Stat(old); err != nil {
		return // none (or a name the file system cannot hold)
	}
	if _, err := os.Stat(path); err == nil {
		os.Remove(old)
		return
	}
	if err := os.Rename(old, path); err != nil {
		s.opts.Logger.Warn("views: renaming an old index file", "bucket", b.Name(), "ddoc", id, "err", err)
	}
}

// lookup returns a bucket's views: an error wrapping ErrClosed after Close,
// ErrNoViews for a memcached bucket, engine.ErrBucketNotFound for a missing
// one.
func (s *Service) lookup(bucket string) (*bucketViews, error) {
	s.mu.Lock()
	closed, bv := s.mu.closed, s.mu.buckets[bucket]
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if bv != nil {
		return bv, nil
	}
	b, err := s.eng.Bucket(bucket)
	if err != nil {
		return nil, fmt.Errorf("views: %w", err)
	}
	if b.Settings().Type == engine.Memcached {
		return nil, fmt.Errorf("%w: bucket %s is a memcached bucket", ErrNoViews, bucket)
	}
	// Created, and not attached yet.
	return nil, fmt.Errorf("%w: bucket %s is not ready", ErrNotFound, bucket)
}

// PutDesignDoc validates, compiles and stores a design document ("_design/"
// is prepended to name). Replacing one whose functions changed rebuilds its
// index; one whose functions did not change keeps it.
func (s *Service) PutDesignDoc(ctx context.Context, bucket, name string, body []byte) (*DesignDoc, error) {
	if !ValidDesignDocName(name) {
		return nil, &DesignDocError{Reason: fmt.Sprintf("invalid design document name %q", name)}
	}
	id := DesignDocPrefix + name
	d, err := ParseDesignDoc(id, body)
	if err != nil {
		return nil, err
	}
	bv, err := s.lookup(bucket)
	if err != nil {
		return nil, err
	}
	prog, err := s.pool.Load(d.sources()) // compiled outside every lock
	if err != nil {
		return nil, fmt.Errorf("views: load %s: %w", id, err)
	}
	keepProg := false
	defer func() {
		if !keepProg {
			prog.Close()
		}
	}()

	bv.change.Lock()
	defer bv.change.Unlock()
	bv.mu.Lock()
	gone, old := bv.mu.gone, bv.mu.indexers[id]
	bv.mu.Unlock()
	if gone {
		return nil, fmt.Errorf("%w: bucket %s was closed or deleted", ErrClosed, bucket)
	}
	if d.Rev, err = bumpRev(ctx, bv.bucket, id, d.Body); err != nil {
		return nil, err
	}
	if old != nil && old.ddoc.Load().Signature() == d.Signature() {
		if err := bv.bucket.PutSystemDoc(ctx, id, d.Body); err != nil {
			return nil, fmt.Errorf("views: store %s: %w", id, err)
		}
		old.ddoc.Store(d)
		s.opts.Logger.Info("design document changed", "bucket", bucket, "ddoc", id, "change", "updated", "index", "kept")
		return d, nil
	}
	// The old index answers queries until the new one takes over; it stops
	// acknowledging changes, so the metadata purge waits for the new one.
	staged := old != nil && indexPath(bv.bucket, id) != ""
	if old != nil {
		old.replaced.Store(true)
	} else if err := removeIndexFiles(bv.bucket, id); err != nil {
		s.opts.Logger.Warn("views: removing a leftover index", "bucket", bucket, "ddoc", id, "err", err)
	}
	ix, err := s.startIndexer(ctx, bv.bucket, d, prog, staged)
	if err == nil {
		if err = bv.bucket.PutSystemDoc(ctx, id, d.Body); err != nil {
			err = fmt.Errorf("views: store %s: %w", id, err)
			ix.close()
			if staged {
				os.Remove(stagingPath(indexPath(bv.bucket, id)))
			} else {
				removeIndexFiles(bv.bucket, id)
			}
			if old == nil {
				bv.bucket.DropConsumer(ctx, consumerName(id))
			}
		}
	}
	if err != nil {
		if old != nil {
			old.replaced.Store(false)
		}
		return nil, err
	}
	keepProg = true
	bv.mu.Lock()
	bv.mu.indexers[id] = ix
	delete(bv.mu.broken, id)
	bv.mu.Unlock()
	if old != nil {
		if err := old.close(); err != nil {
			s.opts.Logger.Warn("views: closing a replaced index", "bucket", bucket, "ddoc", id, "err", err)
		}
		if staged {
			// The new index's file takes the design document's path (an
			// open file may be renamed); if the process stops before, the
			// stored design document's signature rebuilds the index there.
			final := indexPath(bv.bucket, id)
			if err := os.Rename(stagingPath(final), final); err != nil { // replaces the old file
				s.opts.Logger.Warn("views: moving a new index into place", "bucket", bucket, "ddoc", id, "err", err)
			}
			if err := os.Remove(legacyIndexPath(bv.bucket, id)); err != nil && !errors.Is(err, os.ErrNotExist) && !isNameTooLong(err) {
				s.opts.Logger.Warn("views: removing a replaced index", "bucket", bucket, "ddoc", id, "err", err)
			}
		}
		s.opts.Logger.Info("design document changed", "bucket", bucket, "ddoc", id, "change", "updated", "index", "rebuilding")
	} else {
		s.opts.Logger.Info("design document changed", "bucket", bucket, "ddoc", id, "change", "created", "index", "building")
	}
	return d, nil
}

// DesignDoc returns a stored design document. One stored but not loaded
// (see LoadErrors) is an error wrapping ErrLoadFailed that says why.
func (s *Service) DesignDoc(ctx context.Context, bucket, name string) (*DesignDoc, error) {
	ix, err := s.indexerFor(bucket, name)
	if err != nil {
		return nil, err
	}
	return ix.ddoc.Load(), nil
}

// DesignDocs lists a bucket's loaded design documents, sorted by ID (see
// LoadErrors for those that could not be loaded).
func (s *Service) DesignDocs(ctx context.Context, bucket string) ([]*DesignDoc, error) {
	bv, err := s.lookup(bucket)
	if err != nil {
		return nil, err
	}
	bv.mu.Lock()
	out := make([]*DesignDoc, 0, len(bv.mu.indexers))
	for _, ix := range bv.mu.indexers {
		out = append(out, ix.ddoc.Load())
	}
	bv.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// LoadErrors returns, by design document ID, why each stored design document
// of a bucket that could not be loaded (at start, or after a failed
// replacement) was skipped. Such a design document can be replaced or
// deleted.
func (s *Service) LoadErrors(ctx context.Context, bucket string) (map[string]error, error) {
	bv, err := s.lookup(bucket)
	if err != nil {
		return nil, err
	}
	bv.mu.Lock()
	defer bv.mu.Unlock()
	out := make(map[string]error, len(bv.mu.broken))
	for id, err := range bv.mu.broken {
		out[id] = err
	}
	return out, nil
}

// DeleteDesignDoc removes a design document and its index, or a stored
// design document that could not be loaded.
func (s *Service) DeleteDesignDoc(ctx context.Context, bucket, name string) error {
	id := DesignDocPrefix + name
	bv, err := s.lookup(bucket)
	if err != nil {
		return err
	}
	bv.change.Lock()
	defer bv.change.Unlock()
	bv.mu.Lock()
	gone, ix := bv.mu.gone, bv.mu.indexers[id]
	bv.mu.Unlock()
	if gone {
		return fmt.Errorf("%w: bucket %s was closed or deleted", ErrClosed, bucket)
	}
	if _, err := bv.bucket.SystemDoc(id); ix == nil && err != nil {
		return fmt.Errorf("%w: design document `%s` not found", ErrNotFound, id)
	}
	if _, err := bumpRev(ctx, bv.bucket, id, nil); err != nil {
		return err
	}
	if err := bv.bucket.PutSystemDoc(ctx, id, nil); err != nil {
		return fmt.Errorf("views: delete %s: %w", id, err)
	}
	bv.mu.Lock()
	delete(bv.mu.indexers, id)
	delete(bv.mu.broken, id)
	bv.mu.Unlock()
	var errs []error
	if ix != nil {
		if err := ix.close(); err != nil {
			s.opts.Logger.Warn("views: closing a deleted index", "bucket", bucket, "ddoc", id, "err", err)
		}
	}
	if err := bv.bucket.DropConsumer(ctx, consumerName(id)); err != nil {
		errs = append(errs, fmt.Errorf("views: %w", err))
	}
	if err := removeIndexFiles(bv.bucket, id); err != nil {
		errs = append(errs, err)
	}
	s.opts.Logger.Info("design document changed", "bucket", bucket, "ddoc", id, "change", "deleted", "index", "removed")
	return errors.Join(errs...)
}

// indexerFor returns the running indexer of a design document.
func (s *Service) indexerFor(bucket, name string) (*indexer, error) {
	bv, err := s.lookup(bucket)
	if err != nil {
		return nil, err
	}
	id := DesignDocPrefix + name
	bv.mu.Lock()
	ix, broken := bv.mu.indexers[id], bv.mu.broken[id]
	bv.mu.Unlock()
	if ix == nil {
		if broken != nil {
			return nil, fmt.Errorf("%w: design document `%s`: %w", ErrLoadFailed, id, broken)
		}
		return nil, fmt.Errorf("%w: Design document `%s` missing in database `%s`.", ErrNotFound, id, bucket)
	}
	return ix, nil
}

// Info describes a design document's index, for GET .../_design/{ddoc}/_info.
type Info struct {
	// Name is the design document's ID.
	Name string `json:"name"`
	// Signature identifies its functions (see DesignDoc.Signature).
	Signature string `json:"signature"`
	// Mapped counts the documents the index's rows come from runs of the
	// map functions over (every version of every document, since the index
	// was last built from scratch). It is kept with the index, so it
	// survives restarts.
	Mapped int64 `json:"documents_mapped"`
	// MappedSinceStart counts the documents run through the map functions
	// since this process opened the index.
	MappedSinceStart int64 `json:"documents_mapped_since_start"`
	// Seqs is the sum of the index's sequence numbers.
	Seqs uint64 `json:"update_seq"`
	// Pending counts the changes the index has not seen yet.
	Pending uint64 `json:"pending_changes"`
	// Rollbacks counts the times the index was discarded and rebuilt because
	// the bucket no longer held the changes it was built from.
	Rollbacks int64 `json:"rollbacks"`
	// LogDropped counts the log(...) lines of the design document's
	// functions dropped over the rate limit (see jsruntime.LogRate).
	LogDropped int64 `json:"log_dropped"`
	// Views describes each view.
	Views map[string]ViewInfo `json:"views"`
	// BuildInfo is the index's build progress: building, docs_indexed,
	// docs_to_index, rate, eta_seconds.
	BuildInfo
}

// ViewInfo describes one view's index.
type ViewInfo struct {
	// TotalRows is the number of rows.
	TotalRows int `json:"total_rows"`
	// Reduce is the reduce function, if any.
	Reduce string `json:"reduce,omitempty"`
	// MapErrors counts the map function's failures.
	MapErrors int64 `json:"map_errors"`
	// RecentErrors are the latest of them.
	RecentErrors []MapError `json:"recent_errors"`
	// ReduceErrors counts the queries whose reduction failed (a built-in
	// given a value that is not a number, a reduce function that threw).
	ReduceErrors int64 `json:"reduce_errors"`
	// RecentReduceErrors are the latest of them.
	RecentReduceErrors []ReduceErrorInfo `json:"recent_reduce_errors"`
}

// Info returns a design document's index state and its views' map errors.
func (s *Service) Info(ctx context.Context, bucket, name string) (*Info, error) {
	ix, err := s.indexerFor(bucket, name)
	if err != nil {
		return nil, err
	}
	d := ix.ddoc.Load()
	inf := &Info{Name: d.ID, Signature: d.Signature(), Mapped: int64(ix.idx.Mapped()), MappedSinceStart: ix.mapped.Load(), Rollbacks: ix.rollbacks.Load(),
		LogDropped: ix.prog.LogDropped(), Views: map[string]ViewInfo{}, BuildInfo: ix.buildInfo()}
	high := ix.bucket.HighSeqnos()
	for i, s := range ix.idx.Seqs() {
		inf.Seqs += s
		if high[i] > s {
			inf.Pending += high[i] - s
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, n := range ix.names {
		vi := ViewInfo{Reduce: d.Views[n].Reduce, RecentErrors: []MapError{}, RecentReduceErrors: []ReduceErrorInfo{}}
		vi.TotalRows, _ = ix.idx.TotalRows(n)
		if ve := ix.mu.errs[n]; ve != nil {
			vi.MapErrors = ve.count
			vi.RecentErrors = append(vi.RecentErrors, ve.recent...)
			vi.ReduceErrors = ve.reduceCount
			vi.RecentReduceErrors = append(vi.RecentReduceErrors, ve.recentReduce...)
		}
		inf.Views[n] = vi
	}
	return inf, nil
}

// Rollbacks counts the indexes the service discarded and rebuilt because
// their bucket no longer held the changes they were built from.
func (s *Service) Rollbacks() int64 { return s.rollbacks.Load() }

// Close stops every indexer and the JavaScript pool. Later calls to Close,
// AttachBucket and DetachBucket do nothing; other calls fail with ErrClosed.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	bvs := s.mu.buckets
	s.mu.buckets = map[string]*bucketViews{}
	s.mu.Unlock()
	var errs []error
	for _, bv := range bvs {
		errs = append(errs, s.retire(bv, false))
	}
	errs = append(errs, s.pool.Close())
	return errors.Join(errs...)
}

var _ engine.BucketService = (*Service)(nil)
