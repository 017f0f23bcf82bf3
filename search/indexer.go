package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/feed"
	"github.com/mayflydb/mayfly/search/internal/typeddoc"
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

// indexer keeps one index up to date from its bucket's change feed: it is
// the index's feed.Sink, and its feed.Consumer follows the feed; a query
// with at_plus consistency waits for a catch-up to reach the sequence
// numbers it saw. Every goroutine ends promptly once the indexer closes.
type indexer struct {
	bucket *engine.Bucket
	name   string
	def    atomic.Pointer[IndexDef] // replaced when only fields outside the mapping change
	source string                   // "scope.collection"; "" for _default._default
	coll   atomic.Uint32            // the engine.CollectionID indexed (see followSource)
	batch  int
	log    func(msg string, args ...any)
	open   func(path string) (bleve.Index, error) // opens (creating) an empty index at path

	// qmu is read-held by every use of idx, write-held by close and by a
	// move of the files.
	qmu    sync.RWMutex
	idx    bleve.Index
	path   string // "" for memory
	closed bool   // guarded by qmu

	seqMu sync.Mutex
	seqs  []uint64 // the feed position the index holds
	uuid  uint64   // the bucket history it belongs to

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

	// applyHook, if set (by tests), runs before each batch is applied.
	applyHook func(ctx context.Context, index string) error
	// preparedHook, if set (by tests), is told of each batch prepared:
	// the feed.ChangeBytes of each change the feed gave it, in order.
	preparedHook func(index string, sizes []int64)

	feed      *feed.Consumer[preparedBatch]
	gone      atomic.Bool    // set when Close starts: a query failing now failed because of it
	moving    sync.WaitGroup // a move into place in the background (moveLater); Close waits for it
	moveMu    sync.Mutex     // orders moveLater's start before Close's wait
	noMoves   bool           // Close has begun: moveLater starts nothing; guarded by moveMu
	moveTgt   string         // where moveLater was asked to move the files; guarded by moveMu
	closeOnce sync.Once
	closeErr  error
}

// isGone reports whether the indexer is closing or closed (replaced,
// deleted, its bucket detached).
func (ix *indexer) isGone() bool { return ix.gone.Load() }

func consumerName(name string) string { return "search:" + name }

// position returns a copy of the feed position the index holds.
func (ix *indexer) position() []uint64 {
	ix.seqMu.Lock()
	defer ix.seqMu.Unlock()
	return append([]uint64(nil), ix.seqs...)
}

// Position returns the history and feed position the index holds
// (feed.Sink).
func (ix *indexer) Position() (uint64, []uint64) {
	ix.seqMu.Lock()
	defer ix.seqMu.Unlock()
	return ix.uuid, append([]uint64(nil), ix.seqs...)
}

// Follow records, with the definition and the collection, the bucket
// history the index follows (feed.Sink).
func (ix *indexer) Follow(uuid uint64) error {
	bt := ix.idx.NewBatch()
	bt.SetInternal(keyUUID, []byte(strconv.FormatUint(uuid, 10)))
	bt.SetInternal(keySig, []byte(ix.def.Load().sig))
	bt.SetInternal(keyColl, []byte(strconv.FormatUint(uint64(ix.collection()), 10)))
	// Counted with the batches not yet on disk, so that a close or a move
	// waiting for them (awaitPersisted) keeps the history too: an index
	// that loses it is rebuilt when it opens.
	token := !ix.noSync && ix.takeUnpersisted()
	if token {
		bt.SetPersistedCallback(func(error) { <-ix.unpersisted })
	}
	if err := ix.idx.Batch(bt); err != nil {
		if token {
			<-ix.unpersisted // never introduced: no callback
		}
		return err
	}
	ix.seqMu.Lock()
	ix.uuid = uuid
	ix.seqMu.Unlock()
	return nil
}

// Reset discards the index and opens an empty one in its place
// (feed.Sink). It runs before the indexer answers anything.
func (ix *indexer) Reset(ctx context.Context) error {
	ix.idx.Close()
	if ix.path != "" {
		if err := os.RemoveAll(ix.path); err != nil {
			return fmt.Errorf("search: discard index %s: %w", ix.name, err)
		}
	}
	idx, err := ix.open(ix.path)
	if err != nil {
		return fmt.Errorf("search: open index %s: %w", ix.name, err)
	}
	idx.SetName(ix.name)
	ix.idx = idx
	ix.rollbacks.Add(1)
	coll := sourceID(ix.bucket, ix.source)
	ix.coll.Store(uint32(coll))
	ix.seqMu.Lock()
	ix.seqs = make([]uint64, ix.bucket.NumPartitions())
	if coll == noCollection { // nothing to index until it exists again
		ix.seqs = ix.bucket.HighSeqnos()
	}
	ix.seqMu.Unlock()
	return nil
}

// BeforeCatchUp follows the source collection (feed.BeforeCatchUp).
func (ix *indexer) BeforeCatchUp(ctx context.Context, ack func([]uint64) error) error {
	return ix.followSource(ctx, ack)
}

// The indexer must stay a feed.BeforeCatchUp: a sink whose methods no longer
// match the interface would silently lose its BeforeCatchUp.
var _ feed.BeforeCatchUp = (*indexer)(nil)

// BeforeCatchUpDue reports whether the source collection moved
// (feed.BeforeCatchUp): followSource records the collection it follows
// after the batch that empties the index and sets its position.
func (ix *indexer) BeforeCatchUpDue() bool { return ix.sourceMoved() }

// Prepare turns changes into a bleve batch (feed.Sink).
func (ix *indexer) Prepare(ctx context.Context, changes iter.Seq[*engine.Document], _ *feed.Progress) (preparedBatch, int, error) {
	pb, err := ix.prepare(changes)
	return pb, pb.indexed + pb.deleted, err
}

// Apply writes pb with the feed position next (feed.Sink; see apply).
func (ix *indexer) Apply(ctx context.Context, pb preparedBatch, next []uint64, durable func()) error {
	if ix.applyHook != nil {
		if err := ix.applyHook(ctx, ix.name); err != nil {
			return err
		}
	}
	return ix.apply(ctx, pb, next, durable)
}

func (ix *indexer) fail(err error) {
	ix.ierrors.Add(1)
	s := err.Error()
	ix.lastErr.Store(&s)
}

func (ix *indexer) closedErr() error {
	return fmt.Errorf("%w: index %s was replaced, deleted or closed", ErrClosed, ix.name)
}

// catchUp catches the index up to every change committed by now.
func (ix *indexer) catchUp(ctx context.Context) error { return ix.feed.CatchUpNow(ctx) }

// preparedBatch is one batch of the feed, ready for the index.
type preparedBatch struct {
	batch   *bleve.Batch
	indexed int
	deleted int
}

// prepare turns changes into a bleve batch: live JSON objects of the
// index's collection are indexed with their expiration; tombstones,
// non-JSON and non-object values are removed.
func (ix *indexer) prepare(changes iter.Seq[*engine.Document]) (preparedBatch, error) {
	ix.qmu.RLock()
	defer ix.qmu.RUnlock()
	if ix.closed {
		return preparedBatch{}, ix.closedErr()
	}
	pb := preparedBatch{batch: ix.idx.NewBatch()}
	coll := ix.collection()
	var sizes []int64
	if ix.preparedHook != nil {
		defer func() { ix.preparedHook(ix.name, sizes) }()
	}
	for d := range changes {
		if ix.preparedHook != nil {
			sizes = append(sizes, feed.ChangeBytes(d))
		}
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

// docValue is what the index holds of d: its JSON object, without a
// top-level "_id" field, with the expiration field (typed by its key under
// the doc_config docid modes, see typeddoc), or nil when nothing of it is indexed (a tombstone, a value
// that is not a JSON object, or a document whose type's mapping is
// disabled: bleve would keep such a document, without fields, and
// match_all would find it).
func (ix *indexer) docValue(d *engine.Document) any {
	if d.Deleted || d.Type != engine.TypeJSON {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(d.Value, &m); err != nil || m == nil {
		return nil // an array, a scalar
	}
	def := ix.def.Load()
	var typ string
	if im := def.mapping; im != nil {
		if def.typer.byKey() {
			typ = def.typer.keyType(d.Key, im.DefaultType)
		} else {
			typ = typeOf(im, m)
		}
		if !mappingFor(im, typ).Enabled {
			return nil
		}
	}
	// bleve names a document by its "_id" field, so a top-level "_id" of
	// the body (as `mayfly load` keeps it) would replace the key in the
	// hits: it is left out, and in a query or a sort "_id" is the key.
	delete(m, "_id")
	if d.Expiration > 0 {
		m[expField] = expTerm(d.Expiration)
	} else {
		delete(m, expField)
	}
	if def.typer.byKey() {
		return typeddoc.New(m, typ)
	}
	return m
}

// typeOf returns the type bleve gives doc by the mapping's type field: the
// field's value if it is a string, else the default type.
func typeOf(im *mapping.IndexMappingImpl, doc map[string]any) string {
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
		return s
	}
	return im.DefaultType
}

// mappingFor returns the document mapping bleve applies to a document of
// type typ: that type's, or the default mapping.
func mappingFor(im *mapping.IndexMappingImpl, typ string) *mapping.DocumentMapping {
	if dm := im.TypeMapping[typ]; dm != nil {
		return dm
	}
	return im.DefaultMapping
}

// apply writes pb with the feed position next, in one bleve batch. The
// batch returns once scorch holds it in memory (queries see it); scorch
// writes it to disk in the background, on its own or merged with the next
// ones, so that writing one batch overlaps with building the next. durable
// (the acknowledgement of the position to the bucket, which may then purge
// the tombstones before it) runs only from the batch's persisted callback,
// when the position is on disk with the documents; at most maxUnpersisted
// batches wait for it.
func (ix *indexer) apply(ctx context.Context, pb preparedBatch, next []uint64, durable func()) error {
	seqs, _ := json.Marshal(next)
	pb.batch.SetInternal(keySeqs, seqs)
	if !ix.noSync {
		select {
		case ix.unpersisted <- struct{}{}:
		case <-ctx.Done(): // ends when the indexer closes
			return ix.closedErr()
		}
		pb.batch.SetPersistedCallback(func(err error) {
			<-ix.unpersisted
			if err == nil {
				durable()
			}
		})
	}
	ix.qmu.RLock()
	defer ix.qmu.RUnlock()
	if ix.closed {
		if !ix.noSync {
			<-ix.unpersisted
		}
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
	ix.seqs = next
	ix.seqMu.Unlock()
	ix.indexed.Add(int64(pb.indexed))
	ix.deleted.Add(int64(pb.deleted))
	ix.batches.Add(1)
	if ix.noSync {
		durable()
	}
	return nil
}

// takeUnpersisted takes a token of a batch not yet on disk, waiting at most
// closeFlushTimeout for one, and reports whether it did.
func (ix *indexer) takeUnpersisted() bool {
	t := time.NewTimer(closeFlushTimeout)
	defer t.Stop()
	select {
	case ix.unpersisted <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
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
	unlock, err := ix.feed.Lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return ix.followSource(ctx, ix.feed.Ack)
}

// followSource empties the index when its source collection is no longer
// the one it holds documents of (dropped: the engine's feed does not tell
// consumers of a dropped collection's documents), and starts it over on
// the collection now of that name, if any, from the start of the feed.
// The caller holds the right to change the index (feed.Consumer.Lock).
func (ix *indexer) followSource(ctx context.Context, acknowledge func([]uint64) error) error {
	cur := sourceID(ix.bucket, ix.source)
	if cur == ix.collection() {
		return nil
	}
	seqs := make([]uint64, ix.bucket.NumPartitions())
	if cur == noCollection { // nothing to index until it exists again
		seqs = ix.bucket.HighSeqnos()
	}
	ack := func() {
		if err := acknowledge(seqs); err != nil {
			ix.log("search: acknowledging changes", "index", ix.name, "err", err)
		}
	}
	last := func(b *bleve.Batch) { b.SetInternal(keyColl, []byte(strconv.FormatUint(uint64(cur), 10))) }
	if err := ix.removeDocs(ctx, func(string) bool { return true }, last, seqs, ack); err != nil {
		return fmt.Errorf("search: index %s: emptying it: %w", ix.name, err)
	}
	ix.coll.Store(uint32(cur))
	ix.log("search: the index's source collection was dropped; its documents left the index",
		"index", ix.name, "collection", ix.source, "exists_again", cur != noCollection)
	return nil
}

// Rewind removes the documents of partitions parts from the index and sets
// its position in them to 0 (feed.Sink). The removals go in batches, each
// at the position the index holds, the last one with the new position (a
// crash before it leaves a position the bucket's history no longer holds:
// the index is then rebuilt when it opens).
func (ix *indexer) Rewind(ctx context.Context, parts []int, durable func()) error {
	in := make(map[int]bool, len(parts))
	to := ix.position()
	for _, p := range parts {
		in[p] = true
		to[p] = 0
	}
	drop := func(id string) bool { return in[ix.bucket.PartitionOf(id)] }
	if err := ix.removeDocs(ctx, drop, nil, to, durable); err != nil {
		return fmt.Errorf("search: index %s: %w", ix.name, err)
	}
	return nil
}

// removeDocs removes the documents drop selects from the index, in
// batches of ix.batch documents applied at the position the index holds,
// the last one (which last, if not nil, adds to) applied at position to;
// durable is called once that one is durable.
func (ix *indexer) removeDocs(ctx context.Context, drop func(id string) bool, last func(*bleve.Batch), to []uint64, durable func()) error {
	ids, err := ix.docIDs()
	if err != nil {
		return err
	}
	var pb preparedBatch
	for id := range ids {
		if !drop(id) {
			continue
		}
		if pb.batch == nil {
			if pb.batch = ix.newBatch(); pb.batch == nil {
				return ix.closedErr()
			}
		}
		pb.batch.Delete(id)
		pb.deleted++
		if pb.batch.Size() >= ix.batch {
			// Not yet the new position; what the bucket was told it
			// holds already.
			if err := ix.apply(ctx, pb, ix.position(), func() {}); err != nil {
				return err
			}
			pb = preparedBatch{}
		}
	}
	if pb.batch == nil {
		if pb.batch = ix.newBatch(); pb.batch == nil {
			return ix.closedErr()
		}
	}
	if last != nil {
		last(pb.batch)
	}
	return ix.apply(ctx, pb, to, durable)
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

// PauseAcks stops or resumes acknowledging feed positions (feed.Replaceable).
func (ix *indexer) PauseAcks(pause bool) { ix.feed.PauseAcks(pause) }

// Close stops following the feed, ends any catch-up, and closes the index.
// Later calls return the first call's result.
func (ix *indexer) Close() error {
	ix.closeOnce.Do(func() {
		ix.gone.Store(true)
		ix.feed.Stop()
		ix.moveMu.Lock()
		ix.noMoves = true
		target := ix.moveTgt
		ix.moveMu.Unlock()
		ix.moving.Wait() // a move waiting for the feed gives up now
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
		if ix.closeErr == nil && target != "" && ix.path != target {
			// The move into place that the feed did not let happen before
			// Close: the files are closed now, so that the next open finds
			// them in place rather than rebuilding.
			err := os.RemoveAll(target)
			if err == nil {
				err = os.Rename(ix.path, target)
			}
			if err != nil {
				ix.log("search: moving a closed index into place", "index", ix.name, "err", err)
			} else {
				ix.path = target
			}
		}
	})
	return ix.closeErr
}

// moveTo moves the index's files to path (a staged index taking the place
// of the one it replaced): the index is written to disk, closed, renamed
// and opened again, queries and catch-ups waiting meanwhile. When the move
// fails the index stays where it is.
func (ix *indexer) moveTo(ctx context.Context, path string) error {
	ix.qmu.RLock()
	at := ix.path
	ix.qmu.RUnlock()
	if at == "" || at == path {
		return nil
	}
	unlock, err := ix.feed.Lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if !ix.awaitPersisted(closeFlushTimeout) {
		return fmt.Errorf("search: index %s: not written to disk in %v", ix.name, closeFlushTimeout)
	}
	ix.qmu.Lock()
	defer ix.qmu.Unlock()
	if ix.closed {
		return ix.closedErr()
	}
	if ix.path == path { // moved meanwhile (moveLater, or the next replacement)
		return nil
	}
	if err := ix.idx.Close(); err != nil {
		return fmt.Errorf("search: index %s: close before the move: %w", ix.name, err)
	}
	var errs []error
	at = ix.path
	if err := os.RemoveAll(path); err != nil {
		errs = append(errs, err)
	} else if err := os.Rename(ix.path, path); err != nil {
		errs = append(errs, err)
	} else {
		at = path
	}
	idx, err := bleve.OpenUsing(at, openConfig())
	if err != nil {
		ix.closed = true // unusable until the service opens it again (it then rebuilds)
		return errors.Join(append(errs, fmt.Errorf("search: reopen index %s: %w", ix.name, err))...)
	}
	idx.SetName(ix.name)
	ix.idx, ix.path = idx, at
	return errors.Join(errs...)
}

// moveLater moves the index's files to path (see moveTo) in the
// background, once the feed lets it: a build holds the feed until it ends,
// and the replacement that starts one answers without waiting for it.
// Queries meanwhile use the index where it is. A failure is logged, and the
// index stays where it is (the next replacement moves it first); Close
// ends the wait, and moves the closed files itself.
func (ix *indexer) moveLater(path string) {
	ix.moveMu.Lock()
	defer ix.moveMu.Unlock()
	if ix.noMoves {
		return
	}
	ix.moveTgt = path
	ix.moving.Add(1)
	go func() {
		defer ix.moving.Done()
		if err := ix.moveTo(context.Background(), path); err != nil && !ix.gone.Load() {
			ix.log("search: moving a new index into place", "index", ix.name, "err", err)
		}
	}()
}

// diskBytes sums the sizes of the index's files.
func (ix *indexer) diskBytes() int64 {
	ix.qmu.RLock()
	path := ix.path
	ix.qmu.RUnlock()
	if path == "" {
		return 0
	}
	var n int64
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
