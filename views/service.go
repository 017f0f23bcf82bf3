package views

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/jsruntime"
)

// Options configure the views Service. A nil *Options means defaults.
type Options struct {
	// JS configures the JavaScript pool (workers, time limit per call).
	JS *jsruntime.Options
	// BatchSize is how many changed documents the indexer maps per index
	// transaction. The default value is 20000.
	BatchSize int
	// Logger receives indexing problems. The default value discards them.
	Logger *slog.Logger
	// NoAutoUpdate stops indexes from following the change feed on their
	// own: they then update only when a query asks (stale=false before
	// answering, stale=update_after after). Tests use it to see stale=ok
	// answer from an old index. The default value is false: every index
	// follows the feed as documents change.
	NoAutoUpdate bool
}

// Service owns the design documents and view indexes of every bucket of an
// engine. It is safe for concurrent use.
type Service struct {
	eng  *engine.Engine
	pool *jsruntime.Pool
	opts Options

	mu struct {
		sync.Mutex
		buckets map[string]*bucketViews
		closed  bool
	}
}

// bucketViews are one bucket's running indexers.
type bucketViews struct {
	bucket   *engine.Bucket
	indexers map[string]*indexer // by design document ID
}

// New starts the views service over eng and opens the index of every design
// document already stored; each indexer resumes from its recorded sequence
// numbers.
func New(ctx context.Context, eng *engine.Engine, opts *Options) (*Service, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 20000
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Service{eng: eng, pool: jsruntime.NewPool(o.JS), opts: o}
	s.mu.buckets = make(map[string]*bucketViews)
	for _, b := range eng.Buckets() {
		if _, err := s.bucketLocked(ctx, b.Name()); err != nil && !errors.Is(err, ErrNoViews) {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// bucketLocked returns a bucket's views, opening its indexers the first time
// and dropping those of a bucket that was deleted (or deleted and created
// again) since.
//
// REQUIRES: s.mu held (or s not yet shared).
func (s *Service) bucketLocked(ctx context.Context, name string) (*bucketViews, error) {
	if s.mu.closed {
		return nil, ErrClosed
	}
	b, err := s.eng.Bucket(name)
	bv := s.mu.buckets[name]
	if bv != nil && (err != nil || bv.bucket != b) {
		for _, ix := range bv.indexers {
			ix.close()
		}
		delete(s.mu.buckets, name)
		bv = nil
	}
	if err != nil {
		return nil, err
	}
	if b.Settings().Type == engine.Memcached {
		return nil, fmt.Errorf("%w: bucket %s is a memcached bucket", ErrNoViews, name)
	}
	if bv != nil {
		return bv, nil
	}
	bv = &bucketViews{bucket: b, indexers: map[string]*indexer{}}
	for _, key := range b.SystemDocKeys(DesignDocPrefix) {
		body, err := b.SystemDoc(key)
		if err != nil {
			continue
		}
		d, err := ParseDesignDoc(key, body)
		if err != nil {
			s.opts.Logger.Warn("stored design document no longer valid", "bucket", name, "ddoc", key, "err", err)
			continue
		}
		ix, err := s.startIndexer(ctx, b, d)
		if err != nil {
			for _, ix := range bv.indexers {
				ix.close()
			}
			return nil, err
		}
		bv.indexers[key] = ix
	}
	s.mu.buckets[name] = bv
	return bv, nil
}

// indexPath is where a design document's index lives: beside the bucket, one
// file per design document; "" (memory) for a bucket kept in memory.
func indexPath(b *engine.Bucket, ddocID string) string {
	if b.Dir() == "" {
		return ""
	}
	return filepath.Join(b.Dir(), "views", url.PathEscape(ddocID)+".idx")
}

func (s *Service) startIndexer(ctx context.Context, b *engine.Bucket, d *DesignDoc) (*indexer, error) {
	prog, err := s.pool.Load(d.sources())
	if err != nil {
		return nil, fmt.Errorf("views: load %s: %w", d.ID, err)
	}
	var vcs []index.ViewConfig
	for _, n := range d.ViewNames() {
		r, err := prog.Reducer(n)
		if err != nil {
			return nil, err
		}
		vc := index.ViewConfig{Name: n}
		if r != nil {
			vc.Reducer = reducer{r}
		}
		vcs = append(vcs, vc)
	}
	path := indexPath(b, d.ID)
	if path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("views: %w", err)
		}
	}
	idx, err := index.Open(ctx, index.Config{Path: path, Signature: d.Signature(), Views: vcs, NumPartitions: b.NumPartitions()})
	if err != nil {
		return nil, err
	}
	log := func(msg string, args ...any) { s.opts.Logger.Warn(msg, append(args, "bucket", b.Name())...) }
	return newIndexer(b, d, prog, idx, s.opts.BatchSize, !s.opts.NoAutoUpdate, log), nil
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
	s.mu.Lock()
	defer s.mu.Unlock()
	bv, err := s.bucketLocked(ctx, bucket)
	if err != nil {
		return nil, err
	}
	old := bv.indexers[id]
	if old != nil && old.ddoc.Signature() == d.Signature() {
		if err := bv.bucket.PutSystemDoc(ctx, id, d.Body); err != nil {
			return nil, err
		}
		old.ddoc = d
		return d, nil
	}
	if old != nil {
		old.close()
		delete(bv.indexers, id)
		if p := indexPath(bv.bucket, id); p != "" {
			os.Remove(p)
		}
	}
	if err := bv.bucket.PutSystemDoc(ctx, id, d.Body); err != nil {
		return nil, err
	}
	ix, err := s.startIndexer(ctx, bv.bucket, d)
	if err != nil {
		return nil, err
	}
	bv.indexers[id] = ix
	return d, nil
}

// DesignDoc returns a stored design document.
func (s *Service) DesignDoc(ctx context.Context, bucket, name string) (*DesignDoc, error) {
	ix, err := s.indexerFor(ctx, bucket, name)
	if err != nil {
		return nil, err
	}
	return ix.ddoc, nil
}

// DesignDocs lists a bucket's design documents, sorted by ID.
func (s *Service) DesignDocs(ctx context.Context, bucket string) ([]*DesignDoc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	bv, err := s.bucketLocked(ctx, bucket)
	if err != nil {
		return nil, err
	}
	var out []*DesignDoc
	for _, key := range bv.bucket.SystemDocKeys(DesignDocPrefix) {
		if ix := bv.indexers[key]; ix != nil {
			out = append(out, ix.ddoc)
		}
	}
	return out, nil
}

// DeleteDesignDoc removes a design document and its index.
func (s *Service) DeleteDesignDoc(ctx context.Context, bucket, name string) error {
	id := DesignDocPrefix + name
	s.mu.Lock()
	defer s.mu.Unlock()
	bv, err := s.bucketLocked(ctx, bucket)
	if err != nil {
		return err
	}
	ix := bv.indexers[id]
	if ix == nil {
		return fmt.Errorf("%w: design document `%s` not found", ErrNotFound, id)
	}
	if err := bv.bucket.PutSystemDoc(ctx, id, nil); err != nil {
		return err
	}
	delete(bv.indexers, id)
	ix.close()
	if err := bv.bucket.DropConsumer(ctx, ix.consumerName()); err != nil {
		return err
	}
	if p := indexPath(bv.bucket, id); p != "" {
		os.Remove(p)
	}
	return nil
}

func (s *Service) indexerFor(ctx context.Context, bucket, name string) (*indexer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	bv, err := s.bucketLocked(ctx, bucket)
	if err != nil {
		return nil, err
	}
	id := DesignDocPrefix + name
	ix := bv.indexers[id]
	if ix == nil {
		return nil, fmt.Errorf("%w: Design document `%s` missing in database `%s`.", ErrNotFound, id, bucket)
	}
	return ix, nil
}

// Info describes a design document's index, for GET .../_design/{ddoc}/_info.
type Info struct {
	Name      string              `json:"name"`
	Signature string              `json:"signature"`
	Mapped    int64               `json:"documents_mapped"`
	Seqs      uint64              `json:"update_seq"`
	Pending   uint64              `json:"pending_changes"`
	Views     map[string]ViewInfo `json:"views"`
}

// ViewInfo describes one view's index.
type ViewInfo struct {
	TotalRows    int        `json:"total_rows"`
	Reduce       string     `json:"reduce,omitempty"`
	MapErrors    int64      `json:"map_errors"`
	RecentErrors []MapError `json:"recent_errors"`
}

// Info returns a design document's index state and its views' map errors.
func (s *Service) Info(ctx context.Context, bucket, name string) (*Info, error) {
	ix, err := s.indexerFor(ctx, bucket, name)
	if err != nil {
		return nil, err
	}
	inf := &Info{Name: ix.ddoc.ID, Signature: ix.ddoc.Signature(), Mapped: ix.mapped.Load(), Views: map[string]ViewInfo{}}
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
		vi := ViewInfo{Reduce: ix.ddoc.Views[n].Reduce, RecentErrors: []MapError{}}
		vi.TotalRows, _ = ix.idx.TotalRows(n)
		if ve := ix.mu.errs[n]; ve != nil {
			vi.MapErrors = ve.count
			vi.RecentErrors = append(vi.RecentErrors, ve.recent...)
		}
		inf.Views[n] = vi
	}
	return inf, nil
}

// Close stops every indexer and the JavaScript pool.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	s.mu.closed = true
	var first error
	for _, bv := range s.mu.buckets {
		for _, ix := range bv.indexers {
			if err := ix.close(); err != nil && first == nil {
				first = err
			}
		}
	}
	s.mu.buckets = nil
	if err := s.pool.Close(); err != nil && first == nil {
		first = err
	}
	return first
}
