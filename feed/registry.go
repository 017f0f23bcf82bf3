package feed

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
	"sync"

	"github.com/mayflydb/mayfly/engine"
)

// Member is one consumer a service runs for a bucket (an index).
type Member interface {
	// Close stops it and releases what it holds.
	Close() error
}

// RegistryOptions configure a Registry.
type RegistryOptions[M Member, X any] struct {
	// Kind prefixes errors and log messages: "views", "search".
	Kind string
	// Dir is the folder, in a persistent bucket's directory, that holds the
	// service's files; it is removed when the bucket is deleted.
	Dir string
	// LogKey names a member's ID in log lines: "ddoc", "index"; Noun
	// names what a member's definition defines: "design document", "index".
	LogKey, Noun string
	// Logger receives the registry's warnings and errors.
	Logger *slog.Logger
	// ErrClosed, ErrNone and ErrNotFound are the service's errors for a
	// closed service, a bucket of a type it does not serve (memcached) and a
	// bucket it does not know (yet).
	ErrClosed, ErrNone, ErrNotFound error
	// Prefix is the prefix of the keys of the system documents that define
	// the members (design documents, index definitions).
	Prefix string
	// Load starts the member a stored definition (key, body) defines when a
	// bucket is attached, with the set's change lock held. It returns ok
	// false for a definition that makes no member (it may record something
	// with SetExtra or Broken itself); an error is logged, and remembered
	// for LoadErrors under the member's ID (see IDOf).
	Load func(ctx context.Context, set *Set[M, X], key string, body []byte) (m M, ok bool, err error)
	// IDOf returns the member ID of a definition's key (nil: the key).
	IDOf func(key string) string
	// Background makes AttachBucket return at once and load the bucket's
	// stored members in the background, so that a server starts serving
	// before its indexes are open: a member answers as soon as it is
	// loaded, and Member answers an error wrapping engine.ErrWarmup (a
	// temporary failure) for one not loaded yet. Changes of the set wait
	// for the load.
	Background bool
}

// Registry keeps, for a service, one Set of running members per bucket of
// an engine, from the bucket's attach to its detach: it is the service's
// engine.BucketService. Memcached buckets have none.
type Registry[M Member, X any] struct {
	eng  *engine.Engine
	opts RegistryOptions[M, X]

	mu struct {
		sync.Mutex
		sets   map[string]*Set[M, X] // by bucket name
		closed bool
	}
}

// Attach returns a registry over eng, attached to it (see
// engine.Engine.Attach): every open bucket's members are loaded.
func Attach[M Member, X any](ctx context.Context, eng *engine.Engine, opts RegistryOptions[M, X]) (*Registry[M, X], error) {
	r := &Registry[M, X]{eng: eng, opts: opts}
	r.mu.sets = make(map[string]*Set[M, X])
	if err := eng.Attach(ctx, r); err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: %w", opts.Kind, err)
	}
	return r, nil
}

// Set is one bucket's running members, by ID, with those that failed to
// load and extra named values (X) the service keeps beside them. Changes of
// the set that take long (opening an index) are serialized by Change, which
// queries never take.
type Set[M Member, X any] struct {
	// Bucket is the bucket the set belongs to.
	Bucket *engine.Bucket

	reg    *Registry[M, X]
	change sync.Mutex

	// loaded is closed once the stored members are loaded; stopLoad ends
	// a background load early (the set retires).
	loaded   chan struct{}
	stopLoad context.CancelFunc

	mu struct {
		sync.Mutex
		members map[string]M
		extras  map[string]X
		broken  map[string]error
		gone    bool // retired: no member may be added
	}
}

func (r *Registry[M, X]) newSet(b *engine.Bucket) *Set[M, X] {
	s := &Set[M, X]{Bucket: b, reg: r, loaded: make(chan struct{}), stopLoad: func() {}}
	s.mu.members = make(map[string]M)
	s.mu.extras = make(map[string]X)
	s.mu.broken = make(map[string]error)
	return s
}

// AttachBucket starts the members of b (see RegistryOptions.Load); nothing
// for a memcached bucket, or after Close.
func (r *Registry[M, X]) AttachBucket(ctx context.Context, b *engine.Bucket) error {
	if b.Settings().Type == engine.Memcached {
		return nil
	}
	set := r.newSet(b)
	set.change.Lock()
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		set.change.Unlock()
		return nil
	}
	old := r.mu.sets[b.Name()]
	r.mu.sets[b.Name()] = set
	r.mu.Unlock()
	if old != nil { // not detached: cannot happen with a well-behaved engine
		r.opts.Logger.Warn(r.opts.Kind+": bucket attached twice", "bucket", b.Name())
		old.retire(false)
	}
	if !r.opts.Background {
		defer set.change.Unlock()
		r.load(ctx, set)
		close(set.loaded)
		return nil
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	set.stopLoad = cancel
	go func() {
		defer set.change.Unlock()
		defer close(set.loaded)
		r.load(lctx, set)
	}()
	return nil
}

// load starts the members b stores the definitions of.
func (r *Registry[M, X]) load(ctx context.Context, set *Set[M, X]) {
	b := set.Bucket
	if r.opts.Load == nil {
		return
	}
	for _, key := range b.SystemDocKeys(r.opts.Prefix) {
		if ctx.Err() != nil {
			return // the set retires
		}
		body, err := b.SystemDoc(key)
		if err != nil {
			continue // deleted meanwhile
		}
		id := key
		if r.opts.IDOf != nil {
			id = r.opts.IDOf(key)
		}
		m, ok, err := r.opts.Load(ctx, set, key, body)
		switch {
		case err != nil:
			r.opts.Logger.Error(r.opts.Kind+": stored "+r.opts.Noun+" not loaded; it can be replaced or deleted",
				"bucket", b.Name(), r.opts.LogKey, id, "err", err)
			set.Broken(id, err)
		case ok:
			set.Put(id, m)
		}
	}
}

// DetachBucket retires b's set: its members close; with deleted, the
// service's folder of b goes too. After Close it does nothing.
func (r *Registry[M, X]) DetachBucket(ctx context.Context, b *engine.Bucket, deleted bool) error {
	r.mu.Lock()
	set := r.mu.sets[b.Name()]
	if set == nil || set.Bucket != b {
		r.mu.Unlock()
		return nil
	}
	delete(r.mu.sets, b.Name())
	r.mu.Unlock()
	return set.retire(deleted)
}

// Lookup returns a bucket's set: an error wrapping ErrClosed after Close,
// ErrNone for a memcached bucket, engine.ErrBucketNotFound for a missing
// one, engine.ErrWarmup for one not attached yet (just created, or
// restarting for a settings change: a temporary answer, 503 over HTTP).
func (r *Registry[M, X]) Lookup(bucket string) (*Set[M, X], error) {
	r.mu.Lock()
	closed, set := r.mu.closed, r.mu.sets[bucket]
	r.mu.Unlock()
	if closed {
		return nil, r.opts.ErrClosed
	}
	if set != nil {
		return set, nil
	}
	b, err := r.eng.Bucket(bucket)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.opts.Kind, err)
	}
	if b.Settings().Type == engine.Memcached {
		return nil, fmt.Errorf("%w: bucket %s is a memcached bucket", r.opts.ErrNone, bucket)
	}
	return nil, fmt.Errorf("%s: %w: bucket %s is still opening its indexes", r.opts.Kind, engine.ErrWarmup, bucket)
}

// Member returns the running member id of bucket. When there is none, the
// error is missing(why it failed to load, or nil when it does not exist).
func (r *Registry[M, X]) Member(bucket, id string, missing func(broken error) error) (M, error) {
	var zero M
	set, err := r.Lookup(bucket)
	if err != nil {
		return zero, err
	}
	m, ok, broken := set.Get(id)
	if !ok {
		if !set.Loaded() && broken == nil {
			return zero, fmt.Errorf("%s: %w: bucket %s is still opening its indexes", r.opts.Kind, engine.ErrWarmup, bucket)
		}
		return zero, missing(broken)
	}
	return m, nil
}

// Loaded reports whether the set's stored members are loaded (see
// RegistryOptions.Background).
func (s *Set[M, X]) Loaded() bool {
	select {
	case <-s.loaded:
		return true
	default:
		return false
	}
}

// LoadErrors returns why each stored member of bucket that could not be
// loaded was skipped, by ID (see Lookup for the errors).
func (r *Registry[M, X]) LoadErrors(bucket string) (map[string]error, error) {
	set, err := r.Lookup(bucket)
	if err != nil {
		return nil, err
	}
	return set.LoadErrors(), nil
}

// Change looks bucket's set up and takes its change lock (see Lookup and
// Set.Change).
func (r *Registry[M, X]) Change(bucket string) (set *Set[M, X], unlock func(), err error) {
	if set, err = r.Lookup(bucket); err != nil {
		return nil, nil, err
	}
	if unlock, err = set.Change(); err != nil {
		return nil, nil, err
	}
	return set, unlock, nil
}

// Sets returns every bucket's set, and whether the registry is closed.
func (r *Registry[M, X]) Sets() ([]*Set[M, X], bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Set[M, X], 0, len(r.mu.sets))
	for _, s := range r.mu.sets {
		out = append(out, s)
	}
	return out, r.mu.closed
}

// Close retires every set. Later calls to Close, AttachBucket and
// DetachBucket do nothing; Lookup fails with ErrClosed.
func (r *Registry[M, X]) Close() error {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil
	}
	r.mu.closed = true
	sets := r.mu.sets
	r.mu.sets = map[string]*Set[M, X]{}
	r.mu.Unlock()
	var errs []error
	for _, s := range sets {
		errs = append(errs, s.retire(false))
	}
	return errors.Join(errs...)
}

// retire closes every member and marks the set gone; with deleted, it
// removes the service's folder of the bucket.
func (s *Set[M, X]) retire(deleted bool) error {
	s.stopLoad()
	s.change.Lock() // wait out a change (or the load) in progress
	defer s.change.Unlock()
	s.mu.Lock()
	members := s.mu.members
	s.mu.members = map[string]M{}
	s.mu.extras = map[string]X{}
	s.mu.broken = map[string]error{}
	s.mu.gone = true
	s.mu.Unlock()
	var errs []error
	for id, m := range members {
		if err := m.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: close %s: %w", s.reg.opts.Kind, id, err))
		}
	}
	if deleted && s.Bucket.Dir() != "" && s.reg.opts.Dir != "" {
		if err := os.RemoveAll(filepath.Join(s.Bucket.Dir(), s.reg.opts.Dir)); err != nil {
			errs = append(errs, fmt.Errorf("%s: remove index files: %w", s.reg.opts.Kind, err))
		}
	}
	return errors.Join(errs...)
}

// Change takes the set's change lock, which serializes the changes of its
// members (and its attach and retire), and returns its release; an error
// wrapping ErrClosed once the set is retired.
func (s *Set[M, X]) Change() (unlock func(), err error) {
	s.change.Lock()
	s.mu.Lock()
	gone := s.mu.gone
	s.mu.Unlock()
	if gone {
		s.change.Unlock()
		return nil, fmt.Errorf("%w: bucket %s was closed or deleted", s.reg.opts.ErrClosed, s.Bucket.Name())
	}
	return s.change.Unlock, nil
}

// Get returns the member id and, when there is none, why it failed to load
// (nil: it does not exist).
func (s *Set[M, X]) Get(id string) (m M, ok bool, broken error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok = s.mu.members[id]
	return m, ok, s.mu.broken[id]
}

// Put makes m the member id, which then neither failed to load nor is an
// extra.
func (s *Set[M, X]) Put(id string, m M) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.members[id] = m
	delete(s.mu.broken, id)
	delete(s.mu.extras, id)
}

// Broken records why id failed to load.
func (s *Set[M, X]) Broken(id string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.broken[id] = err
}

// Remove forgets id (member, load error and extra) and returns the member
// it was, if any.
func (s *Set[M, X]) Remove(id string) (m M, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok = s.mu.members[id]
	delete(s.mu.members, id)
	delete(s.mu.broken, id)
	delete(s.mu.extras, id)
	return m, ok
}

// Members returns the running members, sorted by ID.
func (s *Set[M, X]) Members() []M {
	s.mu.Lock()
	ids := make([]string, 0, len(s.mu.members))
	for id := range s.mu.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]M, len(ids))
	for i, id := range ids {
		out[i] = s.mu.members[id]
	}
	s.mu.Unlock()
	return out
}

// LoadErrors returns why each stored member that could not be loaded was
// skipped, by ID.
func (s *Set[M, X]) LoadErrors() map[string]error {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]error, len(s.mu.broken))
	for id, err := range s.mu.broken {
		out[id] = err
	}
	return out
}

// Retire ends the member id for good (its definition was deleted or
// replaced by something else): it is forgotten and closed (a failure to
// close is logged), its feed registration h dropped and its files removed
// (remove). It returns the errors of the last two.
func (s *Set[M, X]) Retire(ctx context.Context, id string, h *engine.Consumer, remove func() error) error {
	m, ok := s.Remove(id)
	kind := s.reg.opts.Kind
	if ok {
		if err := m.Close(); err != nil {
			s.reg.opts.Logger.Warn(kind+": closing a retired index", "bucket", s.Bucket.Name(), s.reg.opts.LogKey, id, "err", err)
		}
	}
	var errs []error
	if err := h.Drop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", kind, err))
	}
	if err := remove(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// SetExtra records x under id beside the members (a search alias).
func (s *Set[M, X]) SetExtra(id string, x X) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.extras[id] = x
}

// Extra returns the extra value id.
func (s *Set[M, X]) Extra(id string) (X, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.mu.extras[id]
	return x, ok
}

var _ engine.BucketService = (*Registry[Member, struct{}])(nil)

// IndexPath is where a member's files live: in the folder dir beside the
// bucket's data, named by a hash of the member's ID (an ID may be longer
// than a file name can be, and hold any character) and ending in ext; ""
// (memory) for a bucket kept in memory.
func IndexPath(b *engine.Bucket, dir, id, ext string) string {
	if b.Dir() == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(b.Dir(), dir, hex.EncodeToString(sum[:16])+ext)
}

// StagingPath is where a replacing member's files are built while those of
// the member it replaces still answer: replacement is staged, then moved
// into place.
func StagingPath(path string) string { return path + ".next" }

// Defaults checks a service's batch size and fills in the defaults of it
// (def) and of its logger (one that discards).
func Defaults(batchSize *int, def int, logger **slog.Logger) error {
	if *batchSize < 0 {
		return fmt.Errorf("BatchSize %d is negative", *batchSize)
	}
	if *batchSize == 0 {
		*batchSize = def
	}
	if *logger == nil {
		*logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// OrZero returns *p, or the zero T when p is nil: a service's options, nil
// meaning the defaults.
func OrZero[T any](p *T) (v T) {
	if p != nil {
		v = *p
	}
	return v
}
