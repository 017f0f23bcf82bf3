package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"

	bolt "go.etcd.io/bbolt"
)

var bktBuckets = []byte("buckets")

// catalogEntry is how a bucket's definition is stored.
type catalogEntry struct {
	Settings BucketSettings                       `json:"settings"`
	Scopes   map[string]map[string]collectionInfo `json:"scopes"`
	NextCID  CollectionID                         `json:"nextCollectionID"`
	Parts    int                                  `json:"numPartitions"`
}

// Engine owns the buckets of one data directory. It is safe for concurrent use.
type Engine struct {
	dir     string
	opts    Options
	log     *slog.Logger
	catalog *bolt.DB

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
	cat, err := bolt.Open(filepath.Join(dir, "catalog.db"), 0o600, &bolt.Options{Timeout: boltTimeout})
	if err != nil {
		return nil, fmt.Errorf("engine: open catalog (is another server using %s?): %w", dir, err)
	}
	e := &Engine{dir: dir, opts: o, log: o.Logger, catalog: cat}
	e.mu.buckets = make(map[string]*Bucket)
	var entries []catalogEntry
	err = cat.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bktBuckets)
		if err != nil {
			return err
		}
		return bk.ForEach(func(_, v []byte) error {
			var ce catalogEntry
			if err := json.Unmarshal(v, &ce); err != nil {
				return fmt.Errorf("engine: corrupt catalog entry: %w", err)
			}
			entries = append(entries, ce)
			return nil
		})
	})
	if err != nil {
		cat.Close()
		return nil, err
	}
	for _, ce := range entries {
		b, err := e.openBucket(ce)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.mu.buckets[ce.Settings.Name] = b
	}
	return e, nil
}

// Clock returns the engine's clock.
func (e *Engine) Clock() Clock { return e.opts.Clock }

// Dir returns the data directory.
func (e *Engine) Dir() string { return e.dir }

func (e *Engine) bucketDir(name string) string { return filepath.Join(e.dir, "buckets", name) }

// openBucket builds a bucket from its catalog entry, loading its documents.
func (e *Engine) openBucket(ce catalogEntry) (*Bucket, error) {
	s := ce.Settings
	b := &Bucket{eng: e, name: s.Name, clock: e.opts.Clock, exps: newExpiryIndex()}
	b.mu.settings = s
	b.mu.scopes = ce.Scopes
	b.mu.nextCID = ce.NextCID
	b.mu.byID = make(map[CollectionID]collectionInfo)
	b.mu.sys = make(map[string][]byte)
	for _, colls := range ce.Scopes {
		for _, ci := range colls {
			b.mu.byID[ci.ID] = ci
		}
	}
	b.parts = make([]*partition, ce.Parts)
	for i := range b.parts {
		b.parts[i] = newPartition(uint16(i))
	}
	if s.Type != Couchbase {
		return b, nil
	}
	b.dir = e.bucketDir(s.Name)
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return nil, fmt.Errorf("engine: bucket %s: %w", s.Name, err)
	}
	st, err := openStore(filepath.Join(b.dir, "data.db"), &e.opts)
	if err != nil {
		return nil, err
	}
	l, err := st.load()
	if err != nil {
		st.close()
		return nil, fmt.Errorf("engine: load bucket %s: %w", s.Name, err)
	}
	b.store = st
	b.mu.sys = l.sys
	b.cas.Store(l.maxCAS)
	for _, d := range l.docs {
		if int(d.Partition) >= len(b.parts) {
			st.close()
			return nil, fmt.Errorf("engine: bucket %s: document %q in partition %d of %d", s.Name, d.Key, d.Partition, len(b.parts))
		}
		p := b.parts[d.Partition]
		k := docKey{cid: d.Collection, key: d.Key}
		p.mu.docs[k] = d
		p.mu.log = append(p.mu.log, logEntry{seq: d.Seq, key: k})
		p.mu.seq = max(p.mu.seq, d.Seq)
		b.cas.Store(max(b.cas.Load(), d.CAS))
		if d.Deleted {
			b.tombs.Add(1)
		} else {
			b.currItems.Add(1)
		}
	}
	for _, p := range b.parts {
		sort.Slice(p.mu.log, func(i, j int) bool { return p.mu.log[i].seq < p.mu.log[j].seq })
		p.mu.seq = max(p.mu.seq, l.seqs[p.id])
	}
	for _, it := range l.exps {
		b.exps.update(it.key, 0, it.exp)
	}
	return b, nil
}

// CreateBucket creates a bucket with the given settings (unset fields take
// their defaults) and the _default scope and collection.
func (e *Engine) CreateBucket(ctx context.Context, s BucketSettings) (*Bucket, error) {
	s = s.withDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.closed {
		return nil, ErrClosed
	}
	if _, ok := e.mu.buckets[s.Name]; ok {
		return nil, fmt.Errorf("%w: %s", ErrBucketExists, s.Name)
	}
	ce := catalogEntry{
		Settings: s,
		Scopes:   map[string]map[string]collectionInfo{"_default": {"_default": {ID: DefaultCollectionID}}},
		NextCID:  8, // Couchbase starts user collection IDs at 8
		Parts:    e.opts.NumPartitions,
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
	e.mu.buckets[s.Name] = b
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

// DeleteBucket closes a bucket and removes it with all its files.
func (e *Engine) DeleteBucket(ctx context.Context, name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, ok := e.mu.buckets[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrBucketNotFound, name)
	}
	err := e.catalog.Update(func(tx *bolt.Tx) error { return tx.Bucket(bktBuckets).Delete([]byte(name)) })
	if err != nil {
		return fmt.Errorf("engine: delete bucket %s: %w", name, err)
	}
	delete(e.mu.buckets, name)
	if err := b.close(); err != nil {
		e.log.Warn("closing deleted bucket", "bucket", name, "err", err)
	}
	if b.dir != "" {
		if err := os.RemoveAll(b.dir); err != nil {
			return fmt.Errorf("engine: remove bucket files %s: %w", name, err)
		}
	}
	return nil
}

func (e *Engine) putCatalog(ce catalogEntry) error {
	v, err := json.Marshal(ce)
	if err != nil {
		return err
	}
	err = e.catalog.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktBuckets).Put([]byte(ce.Settings.Name), v)
	})
	if err != nil {
		return fmt.Errorf("engine: save catalog: %w", err)
	}
	return nil
}

// saveCatalogLocked persists b's definition.
//
// REQUIRES: b.mu held.
func (e *Engine) saveCatalogLocked(b *Bucket) error {
	return e.putCatalog(catalogEntry{Settings: b.mu.settings, Scopes: b.mu.scopes, NextCID: b.mu.nextCID, Parts: len(b.parts)})
}

// Close flushes every bucket's acknowledged writes and closes all files.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.closed {
		return nil
	}
	e.mu.closed = true
	var first error
	for _, b := range e.mu.buckets {
		if err := b.close(); err != nil && first == nil {
			first = err
		}
	}
	if err := e.catalog.Close(); err != nil && first == nil {
		first = err
	}
	return first
}
