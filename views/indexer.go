package views

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/jsruntime"
)

// maxRecentErrors is how many map errors a view remembers for _info.
// (Couchbase's limits on what a map function may emit — keys under 4096
// bytes, 1 MiB per document per view — are enforced by jsruntime.)
const maxRecentErrors = 10

// MapError is one map function failure, as _info shows it.
type MapError struct {
	View   string `json:"view"`
	DocID  string `json:"id"`
	Reason string `json:"reason"`
	Time   int64  `json:"time"`
}

// ReduceErrorInfo is one failed reduction, as _info shows it: a query of the
// view that could not be answered. DocID is the document of the row at
// fault when it is known (a built-in given a value that is not a number).
type ReduceErrorInfo struct {
	View   string `json:"view"`
	Error  string `json:"error"`
	Reason string `json:"reason"`
	DocID  string `json:"id,omitempty"`
	Time   int64  `json:"time"`
}

// viewErrors counts and remembers one view's map and reduce errors.
type viewErrors struct {
	count        int64
	recent       []MapError
	reduceCount  int64
	recentReduce []ReduceErrorInfo
}

// indexer keeps one design document's index up to date from the bucket's
// change feed. One goroutine follows the feed; queries with stale=false wait
// for it to reach the sequence numbers they saw. Every goroutine it runs, and
// every catch-up a query asks of it, ends promptly once the indexer's
// lifetime context ends (close).
type indexer struct {
	bucket *engine.Bucket
	id     string                    // the design document's ID
	ddoc   atomic.Pointer[DesignDoc] // replaced when only non-function fields change
	names  []string                  // view names, in the order of the program's results
	prog   *jsruntime.Program
	idx    *index.Index
	batch  int
	log    func(msg string, args ...any)
	info   func(msg string, args ...any) // build start and end, at info level

	build   buildProgress
	reduced reduceHistory // views that have reduced without error, for reduce errors' reasons

	upd chan struct{} // holds a token while a catch-up runs: one at a time, waited for under a context

	mu struct {
		sync.Mutex
		errs map[string]*viewErrors
	}
	mapped    atomic.Int64 // documents run through the map functions since the indexer started
	rollbacks atomic.Int64 // times the index was discarded when it opened
	replaced  atomic.Bool  // a new index of the design document takes over: stop acknowledging

	auto      bool            // follow the feed as it moves; else only when kicked
	kick      chan struct{}   // asks the follower for one catch-up (stale=update_after)
	life      context.Context // ends at close
	cancel    context.CancelFunc
	done      chan struct{} // closed when the follower has returned
	closeOnce sync.Once
	closeErr  error
}

// newIndexer starts the indexer of d over idx; life is its lifetime context,
// which cancel ends.
func newIndexer(life context.Context, cancel context.CancelFunc, b *engine.Bucket, d *DesignDoc, prog *jsruntime.Program, idx *index.Index, batch int, auto bool, log, info func(string, ...any)) *indexer {
	ix := &indexer{bucket: b, id: d.ID, names: d.ViewNames(), prog: prog, idx: idx, batch: batch, log: log, info: info,
		auto: auto, kick: make(chan struct{}, 1), upd: make(chan struct{}, 1), life: life, cancel: cancel, done: make(chan struct{})}
	ix.ddoc.Store(d)
	ix.mu.errs = make(map[string]*viewErrors)
	if err := ix.ack(); err != nil {
		log("registering the view index with the change feed", "ddoc", d.ID, "err", err)
	}
	go ix.follow(life)
	return ix
}

// follow indexes whatever the feed brings (or, without auto-update, catches
// up when kicked) until ctx ends.
func (ix *indexer) follow(ctx context.Context) {
	defer close(ix.done)
	if !ix.auto {
		for {
			select {
			case <-ix.kick:
				if err := ix.catchUp(ctx, nil); err != nil && ctx.Err() == nil {
					ix.log("view indexing failed", "ddoc", ix.id, "err", err)
				}
			case <-ctx.Done():
				return
			}
		}
	}
	for ctx.Err() == nil {
		if err := ix.catchUp(ctx, nil); err != nil {
			if ctx.Err() != nil || errors.Is(err, engine.ErrClosed) || errors.Is(err, index.ErrClosed) {
				return
			}
			ix.log("view indexing failed; retrying", "ddoc", ix.id, "err", err)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return
			}
			continue
		}
		if err := ix.bucket.WaitChanges(ctx, ix.idx.Seqs()); err != nil {
			return
		}
	}
}

// updateAfter asks for a catch-up in the background, without waiting.
func (ix *indexer) updateAfter() {
	select {
	case ix.kick <- struct{}{}:
	default:
	}
}

// caughtUp reports whether the index has reached target in every partition.
func caughtUp(seqs, target []uint64) bool {
	for i, t := range target {
		if seqs[i] < t {
			return false
		}
	}
	return true
}

// catchUp indexes changes until the index reaches target (nil: until the feed
// has nothing more). Mapping and writing overlap: one goroutine reads the
// feed and runs the map functions on the next batch while this one writes
// the previous batch to the index.
//
// It ends, with ctx's error or ErrClosed, as soon as ctx or the indexer's
// lifetime ends.
func (ix *indexer) catchUp(ctx context.Context, target []uint64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ix.life, cancel)
	defer stop()
	select {
	case ix.upd <- struct{}{}:
	case <-ctx.Done():
		if ix.life.Err() != nil {
			return fmt.Errorf("%w: design document %s was replaced or deleted", ErrClosed, ix.id)
		}
		return ctx.Err()
	}
	defer func() { <-ix.upd }()
	if ix.life.Err() != nil {
		return fmt.Errorf("%w: design document %s was replaced or deleted", ErrClosed, ix.id)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	cursor := ix.idx.Seqs()
	if target != nil && caughtUp(cursor, target) {
		return nil
	}
	ix.build.start(ix, cursor)
	defer ix.build.finish(ix)
	batches := make(chan mappedBatch, 1)
	go ix.produce(ctx, cursor, target, batches)
	defer func() {
		cancel()
		for range batches { // let the producer finish before returning
		}
	}()
	for b := range batches {
		if b.err != nil {
			return b.err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := ix.idx.ApplyUpTo(ctx, b.updates, b.next); err != nil {
			return err
		}
		ix.build.applied(changesBetween(cursor, b.next), b.counted)
		cursor = b.next
		if err := ix.ack(); err != nil {
			return err
		}
	}
	return nil
}

// mappedBatch is one batch of the feed, mapped and ready for the index.
type mappedBatch struct {
	updates []index.DocUpdate
	counted uint64   // changes counted in build progress as mapped
	next    []uint64 // the feed position after this batch
	err     error
}

// produce reads the feed from cursor and maps it, batch by batch, until it
// reaches target (or the end of the feed), an error, or ctx ends. It closes
// out when it stops.
func (ix *indexer) produce(ctx context.Context, cursor, target []uint64, out chan<- mappedBatch) {
	defer close(out)
	for target == nil || !caughtUp(cursor, target) {
		if ctx.Err() != nil {
			return
		}
		changes, next, err := ix.bucket.Changes(cursor, ix.batch)
		if err == nil && len(changes) == 0 && caughtUp(cursor, next) {
			return // nothing new: the feed is at its end
		}
		var updates []index.DocUpdate
		if err == nil {
			updates, err = ix.mapChanges(ctx, changes)
		}
		select {
		case out <- mappedBatch{updates: updates, counted: uint64(len(changes)), next: next, err: err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
		cursor = next
	}
}

// mapChanges runs a batch of changes through the map functions and returns
// the index updates: new rows for live documents, none for deleted ones.
func (ix *indexer) mapChanges(ctx context.Context, changes []*engine.Document) ([]index.DocUpdate, error) {
	var live []jsruntime.Doc
	var liveAt []int
	updates := make([]index.DocUpdate, 0, len(changes))
	for _, d := range changes {
		if d.Collection != engine.DefaultCollectionID {
			continue // views index _default._default, as Couchbase 7's do
		}
		updates = append(updates, index.DocUpdate{DocID: d.Key, Partition: d.Partition, Seq: d.Seq, Expiration: d.Expiration})
		if d.Deleted {
			continue // nil Rows: the document's rows leave the index
		}
		liveAt = append(liveAt, len(updates)-1)
		live = append(live, mapInput(d))
	}
	if len(live) == 0 {
		ix.build.mapped(uint64(len(changes)))
		return updates, nil
	}
	// Mapped in chunks, so that _info's progress moves within a batch.
	results := make([][]jsruntime.ViewResult, 0, len(live))
	for from := 0; from < len(live); from += mapChunk {
		chunk := live[from:min(from+mapChunk, len(live))]
		res, err := ix.prog.Map(ctx, chunk)
		if err != nil {
			return nil, fmt.Errorf("views: map %s: %w", ix.id, err)
		}
		results = append(results, res...)
		ix.mapped.Add(int64(len(chunk)))
		ix.build.mapped(uint64(len(chunk)))
	}
	ix.build.mapped(uint64(len(changes) - len(live)))
	for i, res := range results {
		u := &updates[liveAt[i]]
		u.Rows = make(map[string][]index.Emit, len(ix.names))
		for j, vr := range res {
			view := ix.names[j]
			if vr.Err != nil {
				ix.recordError(view, u.DocID, vr.Err)
				continue
			}
			if len(vr.Emits) == 0 {
				continue
			}
			rows := make([]index.Emit, len(vr.Emits))
			for k, e := range vr.Emits {
				rows[k] = index.Emit{Key: e.Key, Value: e.Value}
			}
			u.Rows[view] = rows
		}
	}
	return updates, nil
}

// consumerName names a design document's indexer among the bucket's
// change-feed consumers.
func consumerName(ddocID string) string { return "views:" + ddocID }

// ack tells the bucket which changes the index has durably consumed, so the
// metadata purger may remove tombstones the index has seen, and no others.
func (ix *indexer) ack() error {
	if ix.replaced.Load() {
		return nil // the new index's position is the one the purge waits for
	}
	return ix.bucket.AckChanges(consumerName(ix.id), ix.idx.Seqs())
}

// recordError counts and remembers a map error of view for _info, and logs
// it.
func (ix *indexer) recordError(view, docID string, err error) {
	ix.log("view map function failed for a document; it has no rows in the view", "ddoc", ix.id, "view", view, "id", docID, "err", err)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ve := ix.mu.errs[view]
	if ve == nil {
		ve = &viewErrors{}
		ix.mu.errs[view] = ve
	}
	ve.count++
	ve.recent = append(ve.recent, MapError{View: view, DocID: docID, Reason: err.Error(), Time: ix.bucket.Clock().Now()})
	if len(ve.recent) > maxRecentErrors {
		ve.recent = ve.recent[len(ve.recent)-maxRecentErrors:]
	}
}

// recordReduceError counts and remembers a failed reduction of view for
// _info, and logs it.
func (ix *indexer) recordReduceError(view string, re *ReduceError) {
	info := ReduceErrorInfo{View: view, Error: re.Code, Reason: re.Reason, Time: ix.bucket.Clock().Now()}
	var be *jsruntime.BuiltinReduceError
	if errors.As(re.Err, &be) {
		info.DocID = be.DocID
	}
	args := []any{"ddoc", ix.id, "view", view, "error", re.Code, "reason", re.Reason}
	if info.DocID != "" { // a built-in reduce names the row at fault; a JavaScript one cannot
		args = append(args, "id", info.DocID)
	}
	ix.log("view reduce failed; queries of the view that reduce over the row at fault fail", args...)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ve := ix.mu.errs[view]
	if ve == nil {
		ve = &viewErrors{}
		ix.mu.errs[view] = ve
	}
	ve.reduceCount++
	ve.recentReduce = append(ve.recentReduce, info)
	if len(ve.recentReduce) > maxRecentErrors {
		ve.recentReduce = ve.recentReduce[len(ve.recentReduce)-maxRecentErrors:]
	}
}

// close stops following the feed, ends any catch-up a query started, and
// closes the index and the program. It returns promptly whatever the backlog
// of changes. Later calls return the first call's result.
func (ix *indexer) close() error {
	ix.closeOnce.Do(func() {
		ix.cancel()
		<-ix.done
		ix.upd <- struct{}{} // wait out a catch-up started by a query (cancelled too)
		defer func() { <-ix.upd }()
		ix.closeErr = ix.idx.Close()
		ix.prog.Close()
	})
	return ix.closeErr
}

// bigBuild is the backlog, in changes, from which a catch-up is logged (at
// info level) when it starts and when it ends.
const bigBuild = 1000

// changesBetween counts the changes from sequence numbers from to to.
func changesBetween(from, to []uint64) uint64 {
	var n uint64
	for i, t := range to {
		if i < len(from) && t > from[i] {
			n += t - from[i]
		}
	}
	return n
}

// pending counts the changes the index has not seen yet.
func (ix *indexer) pending() uint64 {
	return changesBetween(ix.idx.Seqs(), ix.bucket.HighSeqnos())
}

// mapChunk is how many documents the map functions get at once.
const mapChunk = 5000

// buildProgress follows the current catch-up (build) of an index, or the
// last one when none runs, for _info. Progress counts changes: those of
// batches in the index (settled) and those mapped but not yet written
// (ahead).
type buildProgress struct {
	mu       sync.Mutex
	building bool
	started  time.Time
	ended    time.Time
	backlog  uint64 // changes pending when it started
	settled  uint64 // changes the index holds since it started
	ahead    uint64 // changes mapped, not yet in the index
}

func (b *buildProgress) start(ix *indexer, cursor []uint64) {
	backlog := changesBetween(cursor, ix.bucket.HighSeqnos())
	b.mu.Lock()
	b.building, b.started, b.backlog, b.settled, b.ahead = true, time.Now(), backlog, 0, 0 // wall clock: build rate and ETA
	b.mu.Unlock()
	if backlog > bigBuild {
		ix.info("views: index build started", "ddoc", ix.id, "pending_changes", backlog)
	}
}

// mapped counts n changes mapped.
func (b *buildProgress) mapped(n uint64) {
	b.mu.Lock()
	b.ahead += n
	b.mu.Unlock()
}

// applied records a batch written to the index: seqs changes of the feed,
// counted of them counted as mapped before (the feed gives a document's
// latest version once, however many changes it had).
func (b *buildProgress) applied(seqs, counted uint64) {
	b.mu.Lock()
	b.settled += seqs
	b.ahead -= min(counted, b.ahead)
	b.mu.Unlock()
}

func (b *buildProgress) finish(ix *indexer) {
	b.mu.Lock()
	b.building, b.ended = false, time.Now() // wall clock: build rate and ETA
	backlog, indexed, took := b.backlog, b.settled, b.ended.Sub(b.started)
	b.ahead = 0
	b.mu.Unlock()
	if backlog > bigBuild {
		ix.info("views: index build ended", "ddoc", ix.id, "changes_indexed", indexed, "seconds", took.Seconds(),
			"rate", rate(indexed, took), "pending_changes", ix.pending())
	}
}

// rate is n over d, per second.
func rate(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// BuildInfo is an index's build progress as _info shows it.
type BuildInfo struct {
	// Building is true while the indexer is catching up with the feed.
	Building bool `json:"building"`
	// Indexed counts the changes the current build (the last one when none
	// runs) has indexed.
	Indexed uint64 `json:"docs_indexed"`
	// ToIndex counts the changes the index has not seen yet.
	ToIndex uint64 `json:"docs_to_index"`
	// Rate is Indexed per second over the current (or last) build.
	Rate float64 `json:"rate"`
	// ETA is ToIndex over Rate, in seconds, while building (0 otherwise or
	// before a rate is known).
	ETA float64 `json:"eta_seconds"`
}

func (ix *indexer) buildInfo() BuildInfo {
	pending := ix.pending()
	b := &ix.build
	b.mu.Lock()
	defer b.mu.Unlock()
	indexed := b.settled + b.ahead
	bi := BuildInfo{Building: b.building, Indexed: indexed, ToIndex: pending - min(b.ahead, pending)}
	end := b.ended
	if b.building {
		end = time.Now() // wall clock: build rate and ETA
	}
	if !b.started.IsZero() {
		bi.Rate = rate(indexed, end.Sub(b.started))
	}
	if b.building && bi.Rate > 0 {
		bi.ETA = float64(bi.ToIndex) / bi.Rate
	}
	return bi
}
