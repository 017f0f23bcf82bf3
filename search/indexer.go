package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/mayflydb/mayfly/engine"
)

// Keys of the values an index keeps beside its documents (bleve internal
// values), written in the same batch as the documents they describe.
var (
	keySeqs = []byte("_mayfly_seqs") // JSON sequence vector indexed
	keyUUID = []byte("_mayfly_uuid") // the bucket history the vector belongs to
	keySig  = []byte("_mayfly_sig")  // the definition's signature
	keyColl = []byte("_mayfly_coll") // the collection ID indexed (decimal)
)

// closeFlushTimeout bounds how long closing an index waits for scorch to
// write the batches it holds in memory.
const closeFlushTimeout = 30 * time.Second

// maxUnpersisted bounds the batches an index holds in memory only: the
// next one waits until scorch has written the oldest to disk.
const maxUnpersisted = 4

// noCollection is the collection ID of an index whose source collection does
// not exist (dropped, or its scope dropped): it indexes nothing.
const noCollection = engine.CollectionID(^uint32(0))

// indexer keeps one index up to date from its bucket's change feed. One
// goroutine follows the feed; a query with at_plus consistency waits for a
// catch-up to reach the sequence numbers it saw. Every goroutine ends
// promptly once the indexer's lifetime context ends (close).
type indexer struct {
	bucket *engine.Bucket
	name   string
	def    atomic.Pointer[IndexDef] // replaced when only fields outside the mapping change
	source string                   // "scope.collection"; "" for _default._default
	coll   atomic.Uint32            // the engine.CollectionID indexed (see followSource)
	path   string                   // "" for memory
	batch  int
	log    func(msg string, args ...any)
	info   func(msg string, args ...any) // build finished, at info level
	// fresh is true from the creation (or rebuild) of an empty index until
	// its first catch-up ends, which is logged as the build's end.
	fresh atomic.Bool

	// qmu is read-held by every use of idx, write-held by close.
	qmu    sync.RWMutex
	idx    bleve.Index
	closed bool // guarded by qmu

	seqMu sync.Mutex
	seqs  []uint64 // the feed position the index holds

	upd chan struct{} // holds a token while a catch-up runs

	// unpersisted holds a token per batch in memory and not yet on disk
	// (see apply); noSync acknowledges batches without waiting for disk.
	unpersisted chan struct{}
	noSync      bool

	// exp caches the documents expired at a second in an index snapshot
	// (the expiry filter); synonyms says the mapping has synonym sources,
	// and the filter is then a must_not clause.
	exp      expiredCache
	synonyms bool

	indexed   atomic.Int64 // documents indexed (added or replaced) since open
	deleted   atomic.Int64 // documents removed since open
	batches   atomic.Int64
	queries   atomic.Int64
	qerrors   atomic.Int64
	ierrors   atomic.Int64 // documents bleve refused, failed batches
	rollbacks atomic.Int64
	lastErr   atomic.Pointer[string]

	life      context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

func consumerName(name string) string { return "search:" + name }

// position returns a copy of the feed position the index holds.
func (ix *indexer) position() []uint64 {
	ix.seqMu.Lock()
	defer ix.seqMu.Unlock()
	return append([]uint64(nil), ix.seqs...)
}

func (ix *indexer) start(auto bool) {
	if err := ix.ack(); err != nil {
		ix.log("search: registering the index with the change feed", "index", ix.name, "err", err)
	}
	go ix.follow(ix.life, auto)
}

func (ix *indexer) ack() error {
	return ix.bucket.AckChanges(consumerName(ix.name), ix.position())
}

// follow indexes whatever the feed brings until ctx ends.
func (ix *indexer) follow(ctx context.Context, auto bool) {
	defer close(ix.done)
	if !auto {
		<-ctx.Done()
		return
	}
	for ctx.Err() == nil {
		if err := ix.catchUp(ctx, nil); err != nil {
			if ctx.Err() != nil || errors.Is(err, engine.ErrClosed) || errors.Is(err, ErrClosed) {
				return
			}
			ix.fail(err)
			ix.log("search: indexing failed; retrying", "index", ix.name, "err", err)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return
			}
			continue
		}
		if err := ix.bucket.WaitChanges(ctx, ix.position()); err != nil {
			return
		}
	}
}

func (ix *indexer) fail(err error) {
	ix.ierrors.Add(1)
	s := err.Error()
	ix.lastErr.Store(&s)
}

func caughtUp(seqs, target []uint64) bool {
	for i, t := range target {
		if seqs[i] < t {
			return false
		}
	}
	return true
}

func (ix *indexer) closedErr() error {
	return fmt.Errorf("%w: index %s was replaced, deleted or closed", ErrClosed, ix.name)
}

// lockUpdates takes the right to change the index (the upd token) and
// returns its release, or an error when ctx or the indexer ends first.
func (ix *indexer) lockUpdates(ctx context.Context) (func(), error) {
	select {
	case ix.upd <- struct{}{}:
	case <-ctx.Done():
		if ix.life.Err() != nil {
			return nil, ix.closedErr()
		}
		return nil, ctx.Err()
	case <-ix.life.Done():
		return nil, ix.closedErr()
	}
	if ix.life.Err() != nil {
		<-ix.upd
		return nil, ix.closedErr()
	}
	return func() { <-ix.upd }, nil
}

// catchUp indexes changes until the index reaches target (nil: until the feed
// has nothing more). One goroutine reads the feed and prepares the next batch
// (JSON decoding, mapping) while this one writes the previous one.
func (ix *indexer) catchUp(ctx context.Context, target []uint64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ix.life, cancel)
	defer stop()
	unlock, err := ix.lockUpdates(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := ix.followSource(); err != nil {
		return err
	}
	cursor := ix.position()
	if target != nil && caughtUp(cursor, target) {
		return nil
	}
	build := ix.startBuild(cursor)
	batches := make(chan preparedBatch, 1)
	go ix.produce(ctx, cursor, target, batches)
	defer func() {
		cancel()
		for range batches { // let the producer finish
		}
	}()
	for pb := range batches {
		if pb.err != nil {
			return pb.err
		}
		if err := ctx.Err(); err != nil {
			if ix.life.Err() != nil {
				return ix.closedErr()
			}
			return err
		}
		if err := ix.apply(pb); err != nil {
			return err
		}
		build.docs += pb.indexed + pb.deleted
	}
	if ix.life.Err() != nil {
		return ix.closedErr()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ix.endBuild(build)
	return nil
}

// bigBuild is the backlog, in changes, from which a catch-up is logged as a
// build (at info level) when it ends; the first catch-up of a new or rebuilt
// index always is.
const bigBuild = 1000

// buildRun is one catch-up, for the log.
type buildRun struct {
	log     bool // an index build: log its end
	backlog uint64
	docs    int
	began   time.Time
}

func (ix *indexer) startBuild(cursor []uint64) *buildRun {
	var backlog uint64
	for i, h := range ix.bucket.HighSeqnos() {
		if i < len(cursor) && h > cursor[i] {
			backlog += h - cursor[i]
		}
	}
	return &buildRun{log: ix.fresh.Load() || backlog > bigBuild, backlog: backlog, began: time.Now()} // wall clock: build duration
}

func (ix *indexer) endBuild(b *buildRun) {
	if !b.log {
		return
	}
	ix.fresh.Store(false)
	took := time.Since(b.began) // wall clock: build duration
	rate := 0.0
	if took > 0 {
		rate = float64(b.docs) / took.Seconds()
	}
	ix.info("search index build finished", "index", ix.name, "documents", b.docs, "changes", b.backlog,
		"seconds", took.Seconds(), "rate", rate)
}

// preparedBatch is one batch of the feed, ready for the index.
type preparedBatch struct {
	batch   *bleve.Batch
	indexed int
	deleted int
	next    []uint64
	err     error
}

// produce reads the feed from cursor and prepares it, batch by batch, until
// it reaches target (or the end of the feed), an error, or ctx ends.
func (ix *indexer) produce(ctx context.Context, cursor, target []uint64, out chan<- preparedBatch) {
	defer close(out)
	for target == nil || !caughtUp(cursor, target) {
		if ctx.Err() != nil {
			return
		}
		changes, next, err := ix.bucket.Changes(cursor, ix.batch)
		if err == nil && len(changes) == 0 && caughtUp(cursor, next) {
			return
		}
		var pb preparedBatch
		if err == nil {
			pb, err = ix.prepare(changes)
		}
		pb.next, pb.err = next, err
		select {
		case out <- pb:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
		cursor = next
	}
}

// prepare turns changes into a bleve batch: live JSON objects of the
// index's collection are indexed with their expiration; tombstones,
// non-JSON and non-object values are removed.
func (ix *indexer) prepare(changes []*engine.Document) (preparedBatch, error) {
	ix.qmu.RLock()
	defer ix.qmu.RUnlock()
	if ix.closed {
		return preparedBatch{}, ix.closedErr()
	}
	pb := preparedBatch{batch: ix.idx.NewBatch()}
	coll := ix.collection()
	for _, d := range changes {
		if d.Collection != coll {
			continue
		}
		if v := ix.docValue(d); v != nil {
			if err := pb.batch.Index(d.Key, v); err == nil {
				pb.indexed++
				continue
			} else {
				ix.fail(fmt.Errorf("document %q: %w", d.Key, err))
			}
		}
		pb.batch.Delete(d.Key)
		pb.deleted++
	}
	return pb, nil
}

// docValue is what the index holds of d: its JSON object with the
// expiration field, or nil when nothing of it is indexed (a tombstone, a
// value that is not a JSON object, or a document whose type's mapping is
// disabled: bleve would keep such a document, without fields, and match_all
// would find it).
func (ix *indexer) docValue(d *engine.Document) map[string]any {
	if d.Deleted || d.Type != engine.TypeJSON {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(d.Value, &m); err != nil || m == nil {
		return nil // an array, a scalar
	}
	if im := ix.def.Load().mapping; im != nil && !mappingFor(im, m).Enabled {
		return nil
	}
	if d.Expiration > 0 {
		m[expField] = expTerm(d.Expiration)
	} else {
		delete(m, expField)
	}
	return m
}

// mappingFor returns the document mapping bleve applies to doc: that of
// the type its type field names, or the default mapping.
func mappingFor(im *mapping.IndexMappingImpl, doc map[string]any) *mapping.DocumentMapping {
	typ := im.DefaultType
	var v any = doc
	for _, part := range strings.Split(im.TypeField, ".") {
		o, ok := v.(map[string]any)
		if !ok {
			v = nil
			break
		}
		v = o[part]
	}
	if s, ok := v.(string); ok {
		typ = s
	}
	if dm := im.TypeMapping[typ]; dm != nil {
		return dm
	}
	return im.DefaultMapping
}

// apply writes pb with the new feed position, in one bleve batch. The batch
// returns once scorch holds it in memory (queries see it); scorch writes it
// to disk in the background, on its own or merged with the next ones, so
// that writing one batch overlaps with building the next. The feed position
// is acknowledged to the bucket (which may then purge the tombstones before
// it) only from the batch's persisted callback, when the position is on
// disk with the documents; at most maxUnpersisted batches wait for it.
func (ix *indexer) apply(pb preparedBatch) error {
	seqs, _ := json.Marshal(pb.next)
	pb.batch.SetInternal(keySeqs, seqs)
	if !ix.noSync {
		select {
		case ix.unpersisted <- struct{}{}:
		case <-ix.life.Done():
			return ix.closedErr()
		}
		next, name := pb.next, consumerName(ix.name)
		pb.batch.SetPersistedCallback(func(err error) {
			<-ix.unpersisted
			if err == nil {
				ix.bucket.AckChanges(name, next)
			}
		})
	}
	ix.qmu.RLock()
	defer ix.qmu.RUnlock()
	if ix.closed {
		return ix.closedErr()
	}
	err := ix.idx.Batch(pb.batch)
	if err != nil {
		if !ix.noSync {
			<-ix.unpersisted // never introduced: no callback
		}
		return fmt.Errorf("search: index %s: %w", ix.name, err)
	}
	ix.seqMu.Lock()
	ix.seqs = pb.next
	ix.seqMu.Unlock()
	ix.indexed.Add(int64(pb.indexed))
	ix.deleted.Add(int64(pb.deleted))
	ix.batches.Add(1)
	if ix.noSync {
		return ix.ack()
	}
	return nil
}

// awaitPersisted waits, at most timeout, until scorch has written every
// batch to disk (their callbacks have run), and reports whether it did.
func (ix *indexer) awaitPersisted(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	taken := 0
	defer func() {
		for range taken {
			<-ix.unpersisted
		}
	}()
	for taken < cap(ix.unpersisted) {
		select {
		case ix.unpersisted <- struct{}{}:
			taken++
		case <-t.C:
			return false
		}
	}
	return true
}

// collection is the collection the index holds documents of.
func (ix *indexer) collection() engine.CollectionID { return engine.CollectionID(ix.coll.Load()) }

// sourceID returns the ID of the collection the index's source names now:
// noCollection when it does not exist.
func sourceID(b *engine.Bucket, source string) engine.CollectionID {
	if source == "" {
		return engine.DefaultCollectionID
	}
	scope, name, _ := splitCollection(source)
	c, err := b.Collection(scope, name)
	if err != nil {
		return noCollection
	}
	return c.ID()
}

// sourceMoved reports whether the index's source collection was dropped
// (or dropped and created again) since the index last looked.
func (ix *indexer) sourceMoved() bool { return sourceID(ix.bucket, ix.source) != ix.collection() }

// ensureSource brings the index in line with its source collection when
// that was dropped (see followSource); queries call it first, so that the
// documents of a dropped collection leave their answers when the drop
// returns.
func (ix *indexer) ensureSource(ctx context.Context) error {
	if !ix.sourceMoved() {
		return nil
	}
	unlock, err := ix.lockUpdates(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return ix.followSource()
}

// followSource empties the index when its source collection is no longer
// the one it holds documents of (dropped: the engine's feed does not tell
// consumers of a dropped collection's documents), and starts it over on
// the collection now of that name, if any, from the start of the feed.
// The caller holds the upd token.
func (ix *indexer) followSource() error {
	cur := sourceID(ix.bucket, ix.source)
	if cur == ix.collection() {
		return nil
	}
	ids, err := ix.docIDs()
	if err != nil {
		return fmt.Errorf("search: index %s: emptying it: %w", ix.name, err)
	}
	seqs := make([]uint64, ix.bucket.NumPartitions())
	if cur == noCollection { // nothing to index until it exists again
		seqs = ix.bucket.HighSeqnos()
	}
	pb := preparedBatch{next: seqs}
	for id := range ids {
		if pb.batch == nil {
			pb.batch = ix.newBatch()
			if pb.batch == nil {
				return ix.closedErr()
			}
		}
		pb.batch.Delete(id)
		pb.deleted++
		if pb.batch.Size() >= ix.batch {
			pb.next = ix.position() // not yet the new position
			if err := ix.apply(pb); err != nil {
				return err
			}
			pb = preparedBatch{next: seqs}
		}
	}
	if pb.batch == nil {
		if pb.batch = ix.newBatch(); pb.batch == nil {
			return ix.closedErr()
		}
	}
	pb.batch.SetInternal(keyColl, []byte(strconv.FormatUint(uint64(cur), 10)))
	if err := ix.apply(pb); err != nil {
		return err
	}
	ix.coll.Store(uint32(cur))
	ix.log("search: the index's source collection was dropped; its documents left the index",
		"index", ix.name, "collection", ix.source, "exists_again", cur != noCollection)
	return nil
}

// newBatch returns a new batch of the index, or nil once it is closed.
func (ix *indexer) newBatch() *bleve.Batch {
	ix.qmu.RLock()
	defer ix.qmu.RUnlock()
	if ix.closed {
		return nil
	}
	return ix.idx.NewBatch()
}

// readState reads the feed position, history UUID and signature the index
// holds.
func readState(idx bleve.Index, n int) (seqs []uint64, uuid uint64, sig string, err error) {
	v, err := idx.GetInternal(keySeqs)
	if err != nil {
		return nil, 0, "", err
	}
	seqs = make([]uint64, n)
	if v != nil {
		if err := json.Unmarshal(v, &seqs); err != nil {
			return nil, 0, "", fmt.Errorf("corrupt feed position: %w", err)
		}
	}
	if v, err = idx.GetInternal(keyUUID); err != nil {
		return nil, 0, "", err
	}
	if v != nil {
		if uuid, err = strconv.ParseUint(string(v), 10, 64); err != nil {
			return nil, 0, "", fmt.Errorf("corrupt feed UUID: %w", err)
		}
	}
	s, err := idx.GetInternal(keySig)
	return seqs, uuid, string(s), err
}

// close stops following the feed, ends any catch-up, and closes the index.
// Later calls return the first call's result.
func (ix *indexer) close() error {
	ix.closeOnce.Do(func() {
		ix.cancel()
		<-ix.done
		ix.upd <- struct{}{} // wait out a catch-up a query started
		defer func() { <-ix.upd }()
		// Scorch drops what it has not written when it closes: let it
		// write the batches it holds (the index would otherwise redo them
		// from the feed when it opens).
		if !ix.awaitPersisted(closeFlushTimeout) {
			ix.log("search: closing before the index was written to disk; it will catch up when it opens", "index", ix.name)
		}
		ix.qmu.Lock()
		defer ix.qmu.Unlock()
		ix.closed = true
		ix.closeErr = ix.idx.Close()
	})
	return ix.closeErr
}

// diskBytes sums the sizes of the index's files.
func (ix *indexer) diskBytes() int64 {
	if ix.path == "" {
		return 0
	}
	var n int64
	filepath.WalkDir(ix.path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
