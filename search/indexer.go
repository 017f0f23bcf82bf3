package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/mayflydb/mayfly/engine"
)

// Keys of the values an index keeps beside its documents (bleve internal
// values), written in the same batch as the documents they describe.
var (
	keySeqs = []byte("_mayfly_seqs") // JSON sequence vector indexed
	keyUUID = []byte("_mayfly_uuid") // the bucket history the vector belongs to
	keySig  = []byte("_mayfly_sig")  // the definition's signature
)

// indexer keeps one index up to date from its bucket's change feed. One
// goroutine follows the feed; a query with at_plus consistency waits for a
// catch-up to reach the sequence numbers it saw. Every goroutine ends
// promptly once the indexer's lifetime context ends (close).
type indexer struct {
	bucket *engine.Bucket
	name   string
	def    atomic.Pointer[IndexDef] // replaced when only fields outside the mapping change
	coll   engine.CollectionID
	path   string // "" for memory
	batch  int
	log    func(msg string, args ...any)

	// qmu is read-held by every use of idx, write-held by close.
	qmu    sync.RWMutex
	idx    bleve.Index
	closed bool // guarded by qmu

	seqMu sync.Mutex
	seqs  []uint64 // the feed position the index holds

	upd chan struct{} // holds a token while a catch-up runs

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

// catchUp indexes changes until the index reaches target (nil: until the feed
// has nothing more). One goroutine reads the feed and prepares the next batch
// (JSON decoding, mapping) while this one writes the previous one.
func (ix *indexer) catchUp(ctx context.Context, target []uint64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ix.life, cancel)
	defer stop()
	select {
	case ix.upd <- struct{}{}:
	case <-ctx.Done():
		if ix.life.Err() != nil {
			return ix.closedErr()
		}
		return ctx.Err()
	}
	defer func() { <-ix.upd }()
	if ix.life.Err() != nil {
		return ix.closedErr()
	}
	cursor := ix.position()
	if target != nil && caughtUp(cursor, target) {
		return nil
	}
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
		if err := ix.ack(); err != nil {
			return err
		}
	}
	if ix.life.Err() != nil {
		return ix.closedErr()
	}
	return ctx.Err()
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
	for _, d := range changes {
		if d.Collection != ix.coll {
			continue
		}
		if v := docValue(d); v != nil {
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
// expiration field, or nil when nothing of it is indexed.
func docValue(d *engine.Document) map[string]any {
	if d.Deleted || d.Type != engine.TypeJSON {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(d.Value, &m); err != nil || m == nil {
		return nil // an array, a scalar
	}
	if d.Expiration > 0 {
		m[expField] = expTerm(d.Expiration)
	} else {
		delete(m, expField)
	}
	return m
}

// apply writes pb with the new feed position, in one bleve batch.
func (ix *indexer) apply(pb preparedBatch) error {
	seqs, _ := json.Marshal(pb.next)
	pb.batch.SetInternal(keySeqs, seqs)
	ix.qmu.RLock()
	defer ix.qmu.RUnlock()
	if ix.closed {
		return ix.closedErr()
	}
	err := ix.idx.Batch(pb.batch)
	if err != nil {
		return fmt.Errorf("search: index %s: %w", ix.name, err)
	}
	ix.seqMu.Lock()
	ix.seqs = pb.next
	ix.seqMu.Unlock()
	ix.indexed.Add(int64(pb.indexed))
	ix.deleted.Add(int64(pb.deleted))
	ix.batches.Add(1)
	return nil
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
