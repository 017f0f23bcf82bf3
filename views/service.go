package views

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unicode/utf8"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/feed"
	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/jsruntime"
)

// DefaultBatchSize is the default Options.BatchSize.
const DefaultBatchSize = 20000

// DefaultBatchBytes is the default Options.BatchBytes: 32 MiB of keys and
// values. A build's batch holds its documents' values (read back from disk
// for those ejected), goja's parsed objects and the mapped rows, many
// times its bytes: with batches bounded by documents alone, 20,000
// documents of 1 MB would be 20 GB of values (BENCHMARKS.md, issue 19).
// 20,000 documents of up to 1.6 KiB, most JSON documents, still fill a
// batch by count, so small documents build as fast as before.
const DefaultBatchBytes = 32 << 20

// Options configure the views Service. A nil *Options means defaults.
type Options struct {
	// JS configures the JavaScript pool (workers, time limit per call).
	JS *jsruntime.Options
	// BatchSize is how many changed documents the indexer maps per index
	// transaction, at most: a quarter of it while the process's memory is
	// near Go's memory limit (feed.Options.BatchSize). The default value
	// (0) is DefaultBatchSize; a negative value is an error.
	BatchSize int
	// BatchBytes bounds an index transaction by the bytes of its
	// documents' keys and values too (feed.Options.BatchBytes): a batch
	// ends with the document that takes it to BatchBytes. The default
	// value (0) is DefaultBatchBytes; a negative value is an error.
	BatchBytes int
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
	// IndexCache, if not nil, pages every persisted view index: its B+tree
	// nodes stay in its file and leaves are read through this cache, whose
	// byte budget all the indexes share (see index.Config.Cache). An index
	// written with the other layout is rebuilt from the feed when it opens.
	// The default (nil) keeps each index's trees in memory.
	IndexCache *index.PageCache
	// OpenInBackground makes New return at once and open each bucket's
	// stored indexes in the background, as a server that answers at once
	// after a restart wants: a design document answers as soon as its
	// index is open, and a query of one not open yet is a temporary
	// failure (engine.ErrWarmup). The default value, false, opens them all
	// before New returns.
	OpenInBackground bool

	// buildQuietDocs, set by the package's tests only, is the indexes'
	// feed.Options.BuildQuietDocs (0: the feed's default).
	buildQuietDocs int
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
	return nil
}

// Service owns the design documents and view indexes of every bucket of an
// engine. It is safe for concurrent use. Its registry is the
// engine.BucketService: the engine tells it when a bucket opens and before it
// closes or is deleted.
//
// Locking: each bucket's design-document changes (and its attach and
// detach) are serialized by that bucket's set's change lock (feed.Set),
// which may be held across disk I/O and index opens but never blocks
// queries, which take only short locks.
type Service struct {
	eng       *engine.Engine
	pool      *jsruntime.Pool
	opts      Options
	rollbacks atomic.Int64 // indexes discarded because the bucket's history moved on
	// replacedRetries counts the queries started again on a design
	// document's new index (see Query.Run).
	replacedRetries atomic.Int64
	reg             *feed.Registry[*indexer, struct{}]
	// cover is, by bucket name, the partitions its indexes hold (Cover),
	// for the incarnation named by the entry's UUID; a bucket without an
	// entry of its incarnation: every partition.
	cover struct {
		sync.Mutex
		m map[string]coverEntry
	}
	// hooks inject faults in tests; nil fields mean none. Set before the
	// calls they affect.
	hooks struct {
		// rename, if set, moves index files instead of os.Rename.
		rename func(oldpath, newpath string) error
		// store, if set, runs before a design document is stored by
		// PutDesignDoc; its error fails the store.
		store func() error
		// prepared, if set, is told of each batch an index prepares: the
		// feed.ChangeBytes of each change the feed gave it, in order.
		prepared func(ddocID string, sizes []int64)
	}
}

// bucketViews are one bucket's running indexers, by design document ID.
type bucketViews = feed.Set[*indexer, struct{}]

// New starts the views service over eng and attaches it to eng (see
// engine.Engine.Attach): it opens the index of every design document already
// stored, and each indexer resumes from its recorded sequence numbers. A
// stored design document that cannot be loaded is logged and skipped (see
// LoadErrors).
func New(ctx context.Context, eng *engine.Engine, opts *Options) (*Service, error) {
	o := feed.OrZero(opts)
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Service{eng: eng, pool: jsruntime.NewPool(o.JS), opts: o}
	reg, err := feed.Attach(ctx, eng, feed.RegistryOptions[*indexer, struct{}]{
		Kind: "views", Dir: "views", LogKey: "ddoc", Noun: "design document", Logger: o.Logger,
		ErrClosed: ErrClosed, ErrNone: ErrNoViews, ErrNotFound: ErrNotFound,
		Prefix: DesignDocPrefix, Load: s.loadStored, Background: o.OpenInBackground,
	})
	if err != nil {
		s.pool.Close()
		return nil, err
	}
	s.reg = reg
	return s, nil
}

// loadStored starts the indexer of a stored design document when its bucket
// is attached, unless Options.SkipDesignDocs names it.
func (s *Service) loadStored(ctx context.Context, bv *bucketViews, id string, body []byte) (*indexer, bool, error) {
	b := bv.Bucket
	if s.skipped(b.Name(), id) {
		s.opts.Logger.Warn("views: stored design document skipped (SkipDesignDocs); it can be replaced or deleted",
			"bucket", b.Name(), "ddoc", id)
		bv.Broken(id, ErrSkipped)
		return nil, false, nil
	}
	ix, err := s.load(ctx, b, id, body)
	return ix, err == nil, err
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
	d.Rev = loadedRev(b, id, d.Body)
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

// loadedRev is the revision of stored design document id of b whose body
// is body: the one recorded, or the first for a design document stored
// before revisions were kept.
func loadedRev(b *engine.Bucket, id string, body []byte) string {
	if rev := storedRev(b, id); revNumber(rev) != 0 {
		return rev
	}
	return makeRev(1, body)
}

// bumpRev records and returns the next revision of design document id of b,
// for body (nil: a delete). It is recorded before the change it stands for,
// so that a crash between the two skips a number and never reuses one.
func bumpRev(ctx context.Context, b *engine.Bucket, id string, body []byte) (string, error) {
	return setRev(ctx, b, id, makeRev(revNumber(storedRev(b, id))+1, body))
}

// setRev records rev as the revision of design document id of b, before
// the change it stands for (see bumpRev).
func setRev(ctx context.Context, b *engine.Bucket, id, rev string) (string, error) {
	if err := b.PutSystemDoc(ctx, RevPrefix+id, []byte(rev)); err != nil {
		return "", fmt.Errorf("views: store the revision of %s: %w", id, err)
	}
	return rev, nil
}

// indexPath is where a design document's index lives: beside the bucket, one
// file per design document, named by a hash of the design document's ID (an
// ID may be longer than a file name can be, and hold any character); ""
// (memory) for a bucket kept in memory.
func indexPath(b *engine.Bucket, ddocID string) string {
	return feed.IndexPath(b, "views", ddocID, ".idx")
}

// stagingPath is where a replacing index is built while the one it replaces
// still answers.
func stagingPath(path string) string { return feed.StagingPath(path) }

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
	for _, f := range []string{p, stagingPath(p), legacyIndexPath(b, ddocID), coverPath(p), coverPath(stagingPath(p))} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) && !isNameTooLong(err) {
			errs = append(errs, fmt.Errorf("views: remove index file: %w", err))
		}
	}
	return errors.Join(errs...)
}

// isNameTooLong reports whether err is a file name too long for the file
// system (which a legacy name may be).
func isNameTooLong(err error) bool { return errors.Is(err, syscall.ENAMETOOLONG) }

// startIndexer opens d's index and starts its feed consumer, which
// registers it with b's change feed and checks that its position is still
// in b's history (discarding it when not).
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
			for _, f := range []string{path, coverPath(path)} {
				if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
					return nil, fmt.Errorf("views: remove a leftover staged index: %w", err)
				}
			}
		} else {
			s.migrate(b, d.ID, path)
		}
	}
	cfg := index.Config{Path: path, Signature: d.Signature(), Views: vcs, NumPartitions: b.NumPartitions()}
	cfg.NoSync = s.opts.NoSync
	cfg.Cache = s.opts.IndexCache
	idx, err := index.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("views: open the index of %s: %w", d.ID, err)
	}
	ix := &indexer{bucket: b, id: d.ID, names: d.ViewNames(), prog: prog, cfg: cfg, idx: idx,
		log: newLimitedLog(s.opts.Logger, b.Clock(), "bucket", b.Name()).warn, life: life, cancel: cancel,
		preparedHook: s.hooks.prepared}
	ix.ddoc.Store(d)
	ix.mu.errs = make(map[string]*viewErrors)
	ix.want = func() (*coverSet, bool) { return s.wantCover(b) }
	ix.cover.parts, ix.cover.stored = readCover(coverPath(path), b.NumPartitions())
	held := ix.cover.parts
	ix.filter.Store(&held) // until the first catch-up applies the service's set
	ix.feed, err = feed.Start(ctx, b.Consumer(consumerName(d.ID)), feed.Sink[[]index.DocUpdate](ix), feed.Options{
		Kind: "views", LogKey: "ddoc", LogID: d.ID, BatchSize: s.opts.BatchSize, BatchBytes: int64(s.opts.BatchBytes), Auto: !s.opts.NoAutoUpdate,
		StartedMsg: "views: index build started", EndedMsg: "views: index build ended",
		Warn:    ix.log,
		Info:    func(msg string, args ...any) { s.opts.Logger.Info(msg, append(args, "bucket", b.Name())...) },
		Stopped: ix.closedErr,
		Life:    life,
		// 0 but in tests: feed.DefaultBuildQuietDocs.
		BuildQuietDocs: s.opts.buildQuietDocs,
	})
	if err != nil {
		ix.idx.Close()
		return nil, fmt.Errorf("views: %s: %w", d.ID, err)
	}
	if ix.feed.RolledBack() {
		s.rollbacks.Add(1)
		ix.rollbacks.Add(1)
	}
	ok = true
	return ix, nil
}

// placeIndex moves a running indexer's file to its design document's
// path, where the next start opens it, if it is elsewhere (at the staging
// path, where its replacement was built), and removes a file of the old
// naming scheme. The caller holds the bucket's change lock.
func (s *Service) placeIndex(b *engine.Bucket, ix *indexer) error {
	rename := s.hooks.rename
	if rename == nil {
		rename = os.Rename
	}
	if err := ix.moveTo(indexPath(b, ix.id), rename); err != nil {
		return err
	}
	if err := os.Remove(legacyIndexPath(b, ix.id)); err != nil && !errors.Is(err, os.ErrNotExist) && !isNameTooLong(err) {
		return err
	}
	return nil
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
func (s *Service) lookup(bucket string) (*bucketViews, error) { return s.reg.Lookup(bucket) }

// PutDesignDoc validates, compiles and stores a design document ("_design/"
// is prepended to name). Replacing one whose functions changed rebuilds its
// index; one whose functions did not change keeps it. A name that is not
// valid UTF-8 is refused with ErrNameNotUTF8.
func (s *Service) PutDesignDoc(ctx context.Context, bucket, name string, body []byte) (*DesignDoc, error) {
	if err := checkNameUTF8(name); err != nil {
		return nil, err
	}
	return s.putDesignDoc(ctx, bucket, name, body, 0)
}

// checkNameUTF8 refuses a new design document's name that is not valid
// UTF-8: an error wrapping ErrNameNotUTF8 that says where it breaks.
func checkNameUTF8(name string) error {
	if utf8.ValidString(name) {
		return nil
	}
	at := 0
	for at < len(name) {
		r, n := utf8.DecodeRuneInString(name[at:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		at += n
	}
	return fmt.Errorf("%w (byte %d of the name, 0x%02X)", ErrNameNotUTF8, at, name[at])
}

// PutDesignDocVersion stores a design document as PutDesignDoc does, but
// as the given version: its revision is version's ("N-hash" with N =
// version) instead of the next of the bucket's own count. A cluster node
// applies the definitions every node agrees on this way (the version comes
// from the cluster's state), so that every node answers the same _rev.
// Storing the version the design document already has, with the same
// body, changes nothing. version 0 is refused.
func (s *Service) PutDesignDocVersion(ctx context.Context, bucket, name string, body []byte, version uint64) (*DesignDoc, error) {
	if version == 0 {
		return nil, fmt.Errorf("views: design document %s: version 0", name)
	}
	return s.putDesignDoc(ctx, bucket, name, body, version)
}

// CheckDesignDoc validates a design document as PutDesignDoc would (its
// name, its body, its functions compiled, its bucket one with views) and
// stores nothing: a cluster node checks a definition this way before it
// writes it to the cluster's state. A name that is not valid UTF-8 is
// refused with ErrNameNotUTF8, as PutDesignDoc refuses it.
func (s *Service) CheckDesignDoc(ctx context.Context, bucket, name string, body []byte) error {
	if err := checkNameUTF8(name); err != nil {
		return err
	}
	if !ValidDesignDocName(name) {
		return &DesignDocError{Reason: fmt.Sprintf("invalid design document name %q", name)}
	}
	d, err := ParseDesignDoc(DesignDocPrefix+name, body)
	if err != nil {
		return err
	}
	if _, err := s.lookup(bucket); err != nil {
		return err
	}
	prog, err := s.pool.Load(d.sources())
	if err != nil {
		return fmt.Errorf("views: load %s: %w", d.ID, err)
	}
	prog.Close()
	return nil
}

// putDesignDoc is PutDesignDoc (version 0: the bucket's next revision) and
// PutDesignDocVersion.
func (s *Service) putDesignDoc(ctx context.Context, bucket, name string, body []byte, version uint64) (*DesignDoc, error) {
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

	unlock, err := bv.Change()
	if err != nil {
		return nil, err
	}
	defer unlock()
	old, _, _ := bv.Get(id)
	if version != 0 && old != nil {
		if cur := old.ddoc.Load(); cur.Rev == makeRev(version, d.Body) && bytes.Equal(cur.Body, d.Body) {
			return cur, nil // applied already
		}
	}
	kept := old != nil && old.ddoc.Load().Signature() == d.Signature()
	if old != nil && !kept {
		// A running index whose move into place failed lives at the
		// staging path, where the new one is about to be built: it moves
		// into place first, or the replacement fails and changes nothing.
		if err := s.placeIndex(bv.Bucket, old); err != nil {
			return nil, fmt.Errorf("views: %s: moving its index into place before its replacement: %w", id, err)
		}
	}
	if version == 0 {
		d.Rev, err = bumpRev(ctx, bv.Bucket, id, d.Body)
	} else {
		d.Rev, err = setRev(ctx, bv.Bucket, id, makeRev(version, d.Body))
	}
	if err != nil {
		return nil, err
	}
	if kept {
		if err := bv.Bucket.PutSystemDoc(ctx, id, d.Body); err != nil {
			return nil, fmt.Errorf("views: store %s: %w", id, err)
		}
		old.ddoc.Store(d)
		s.opts.Logger.Info("design document changed", "bucket", bucket, "ddoc", id, "change", "updated", "index", "kept")
		return d, nil
	}
	b := bv.Bucket
	_, replaced, err := feed.Replace(ctx, bv, id, feed.Replacement[*indexer]{
		Path: indexPath(b, id), Feed: b.Consumer(consumerName(id)),
		RemoveFiles: func() error { return removeIndexFiles(b, id) },
		Start:       func(staged bool) (*indexer, error) { return s.startIndexer(ctx, b, d, prog, staged) },
		Store: func() error {
			if s.hooks.store != nil {
				if err := s.hooks.store(); err != nil {
					return err
				}
			}
			return b.PutSystemDoc(ctx, id, d.Body)
		},
		// The new index's file takes the design document's path (an open
		// file may be renamed; it replaces the old one); if the process
		// stops before, the stored design document's signature rebuilds the
		// index there.
		Promote: func(ix *indexer) error { return s.placeIndex(b, ix) },
	})
	if err != nil {
		return nil, err
	}
	keepProg = true
	if replaced {
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

// StoredDesignDoc returns a design document as it is stored, loaded or
// not: DesignDoc's answer for one that is loaded; for one stored but not
// loaded (see LoadErrors: skipped by Options.SkipDesignDocs, or refused
// when it was loaded), its ID, stored body and revision, with no Views, so
// that its owner can read it to fix it, and the audit record of its
// replacement or deletion can hold it. A design document that is not
// stored is ErrNotFound.
func (s *Service) StoredDesignDoc(ctx context.Context, bucket, name string) (*DesignDoc, error) {
	id := DesignDocPrefix + name
	bv, err := s.lookup(bucket)
	if err != nil {
		return nil, err
	}
	ix, ok, broken := bv.Get(id)
	if ok {
		return ix.ddoc.Load(), nil
	}
	if broken != nil {
		if body, err := bv.Bucket.SystemDoc(id); err == nil {
			return &DesignDoc{ID: id, Body: body, Rev: loadedRev(bv.Bucket, id, body)}, nil
		}
	}
	return s.DesignDoc(ctx, bucket, name) // missing, or the bucket still warming up
}

// DesignDocs lists a bucket's loaded design documents, sorted by ID (see
// LoadErrors for those that could not be loaded).
func (s *Service) DesignDocs(ctx context.Context, bucket string) ([]*DesignDoc, error) {
	bv, err := s.lookup(bucket)
	if err != nil {
		return nil, err
	}
	ixs := bv.Members()
	out := make([]*DesignDoc, len(ixs))
	for i, ix := range ixs {
		out[i] = ix.ddoc.Load()
	}
	return out, nil
}

// Loaded reports whether every stored design document of bucket is loaded
// (see Options.OpenInBackground: until then DesignDocs lists only those
// loaded so far); false for a bucket without views.
func (s *Service) Loaded(bucket string) bool {
	bv, err := s.lookup(bucket)
	return err == nil && bv.Loaded()
}

// LoadErrors returns, by design document ID, why each stored design document
// of a bucket that could not be loaded (at start, or after a failed
// replacement) was skipped. Such a design document can be replaced or
// deleted.
func (s *Service) LoadErrors(ctx context.Context, bucket string) (map[string]error, error) {
	return s.reg.LoadErrors(bucket)
}

// DeleteDesignDoc removes a design document and its index, or a stored
// design document that could not be loaded.
func (s *Service) DeleteDesignDoc(ctx context.Context, bucket, name string) error {
	id := DesignDocPrefix + name
	bv, unlock, err := s.reg.Change(bucket)
	if err != nil {
		return err
	}
	defer unlock()
	ix, _, _ := bv.Get(id)
	if _, err := bv.Bucket.SystemDoc(id); ix == nil && err != nil {
		return fmt.Errorf("%w: design document `%s` not found", ErrNotFound, id)
	}
	if _, err := bumpRev(ctx, bv.Bucket, id, nil); err != nil {
		return err
	}
	if err := bv.Bucket.PutSystemDoc(ctx, id, nil); err != nil {
		return fmt.Errorf("views: delete %s: %w", id, err)
	}
	err = bv.Retire(ctx, id, bv.Bucket.Consumer(consumerName(id)), func() error { return removeIndexFiles(bv.Bucket, id) })
	s.opts.Logger.Info("design document changed", "bucket", bucket, "ddoc", id, "change", "deleted", "index", "removed")
	return err
}

// indexerFor returns the running indexer of a design document.
func (s *Service) indexerFor(bucket, name string) (*indexer, error) {
	id := DesignDocPrefix + name
	return s.reg.Member(bucket, id, func(broken error) error {
		if broken != nil {
			return fmt.Errorf("%w: design document `%s`: %w", ErrLoadFailed, id, broken)
		}
		return fmt.Errorf("%w: Design document `%s` missing in database `%s`.", ErrNotFound, id, bucket)
	})
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
	// MemoryRetries counts the design document's map and reduce calls run
	// again after the memory limit stopped them, most of them for the rest
	// of the server's allocation (see jsruntime.Pool.MemoryRetries); one
	// that fails again shows among the view's errors.
	MemoryRetries int64 `json:"memory_retries"`
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
	// One snapshot: the sequence numbers and the row counts agree. An
	// index closed under Info (its design document replaced) gives way to
	// the design document's current one, as a query's does (see Query.Run).
	var ix *indexer
	var rd *index.Reader
	for tries := 0; ; tries++ {
		var err error
		if ix, err = s.indexerFor(bucket, name); err != nil {
			return nil, err
		}
		if rd, err = ix.idx.Reader(); err == nil {
			break
		}
		if tries == maxReplacedRetries || ix.life.Err() == nil {
			return nil, fmt.Errorf("%w: design document %s: %w", ErrClosed, ix.id, err)
		}
	}
	defer rd.Close()
	d := ix.ddoc.Load()
	inf := &Info{Name: d.ID, Signature: d.Signature(), Mapped: int64(ix.idx.Mapped()), MappedSinceStart: ix.mapped.Load(), Rollbacks: ix.rollbacks.Load(),
		LogDropped: ix.prog.LogDropped(), MemoryRetries: ix.prog.MemoryRetries(), Views: map[string]ViewInfo{}, BuildInfo: ix.feed.BuildInfo()}
	high := ix.feed.Handle().HighSeqnos()
	for i, s := range rd.Seqs() {
		inf.Seqs += s
		if high[i] > s {
			inf.Pending += high[i] - s
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, n := range ix.names {
		vi := ViewInfo{Reduce: d.Views[n].Reduce, RecentErrors: []MapError{}, RecentReduceErrors: []ReduceErrorInfo{}}
		vi.TotalRows, _ = rd.TotalRows(n)
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
	return errors.Join(s.reg.Close(), s.pool.Close())
}
