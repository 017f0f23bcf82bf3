package views

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"sync"
	"sync/atomic"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/feed"
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
// change feed: it is the index's feed.Sink, and its feed.Consumer follows the
// feed; queries with stale=false catch up through it to the sequence numbers
// they saw. Every goroutine it runs, and every catch-up a query asks of it,
// ends promptly once the indexer's lifetime context ends (close).
type indexer struct {
	bucket *engine.Bucket
	id     string                    // the design document's ID
	ddoc   atomic.Pointer[DesignDoc] // replaced when only non-function fields change
	names  []string                  // view names, in the order of the program's results
	prog   *jsruntime.Program
	// cfg is how idx opens (Reset opens it again). cfg.Path is where the
	// file is now: moveTo changes it, under the bucket's change lock.
	cfg index.Config
	idx *index.Index // replaced only by Reset, before the consumer starts
	log func(msg string, args ...any)

	feed    *feed.Consumer[[]index.DocUpdate]
	reduced reduceHistory // views that have reduced without error, for reduce errors' reasons
	// answers holds the 32 KiB writers view answers are buffered in (until
	// the first flush nothing has reached the client, so a query can run
	// again after a replacement), reused rather than allocated per query.
	answers sync.Pool
	// seqBufs holds the *[]uint64 pending reads sequence vectors into.
	seqBufs sync.Pool

	mu struct {
		sync.Mutex
		errs map[string]*viewErrors
	}
	// subsets are the partition sets this node answered a share of the
	// views for, by their bitmap (see subset).
	subsets struct {
		sync.Mutex
		m map[string]*index.Subset
	}
	// want is the set of partitions the service has for the bucket (see
	// Service.Cover); filter the set Prepare indexes (nil: every
	// partition), cover what the index holds (see syncCover: changed with
	// the right to change the sink held, and under its mutex, which moveTo
	// takes too).
	want   func() (*coverSet, bool)
	filter atomic.Pointer[[]bool]
	cover  struct {
		sync.Mutex
		parts  []bool    // the partitions the index holds rows of (nil: all)
		stored bool      // parts is known (its file could be read)
		set    *coverSet // the service's set parts comes from
		known  bool      // set was applied once
	}
	// applied is the service's set cover last applied (nil: none yet),
	// stored with cover's fields: BeforeCatchUpDue reads it without the
	// mutex, which moveTo and syncCover hold through a file's fsync.
	applied   atomic.Pointer[appliedCover]
	mapped    atomic.Int64 // documents run through the map functions since the indexer started
	rollbacks atomic.Int64 // times the index was discarded when it opened

	// preparedHook, if set (by tests), is told of each batch prepared:
	// the feed.ChangeBytes of each change the feed gave it, in order.
	preparedHook func(ddocID string, sizes []int64)

	life      context.Context // ends at close
	cancel    context.CancelFunc
	closeOnce sync.Once
	closeErr  error
}

// Position returns the history and feed position the index holds
// (feed.Sink). Both are read without a lock (an atomic and the published
// snapshot's vector, whose rows queries read), the history first: a
// Rewind publishes its zeros before Follow records the history, so the
// vector read after it is no older than the history.
func (ix *indexer) Position() (uint64, []uint64) {
	uuid := ix.idx.FeedUUID()
	return uuid, ix.idx.Seqs()
}

// Follow records the bucket history the index follows (feed.Sink).
func (ix *indexer) Follow(uuid uint64) error { return ix.idx.SetFeedUUID(uuid) }

// Reset discards the index and opens an empty one in its place (feed.Sink).
func (ix *indexer) Reset(ctx context.Context) error {
	if err := ix.idx.Close(); err != nil {
		ix.log("views: closing a discarded index", "ddoc", ix.id, "err", err)
	}
	if ix.cfg.Path != "" {
		if err := os.Remove(ix.cfg.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("views: discard the index of %s: %w", ix.id, err)
		}
	}
	idx, err := index.Open(ctx, ix.cfg)
	if err != nil {
		return fmt.Errorf("views: open the index of %s: %w", ix.id, err)
	}
	ix.idx = idx
	return nil
}

// Rewind removes the rows of the documents of partitions parts and sets
// the index's position in them to 0, in one logged transaction (see
// index.Index.Rewind), durable when it returns, while queries go on
// (feed.Sink).
func (ix *indexer) Rewind(ctx context.Context, parts []int, durable func()) error {
	return ix.idx.Rewind(ctx, parts, ix.bucket.PartitionOf, durable)
}

// moveTo moves the index's file to path with rename (os.Rename but in
// tests), if it is not there already; the open index goes on reading and
// writing it (an open file may be renamed). If rename fails, the file stays
// where it was, and so does cfg.Path. The caller holds the bucket's change
// lock.
func (ix *indexer) moveTo(path string, rename func(oldpath, newpath string) error) error {
	ix.cover.Lock()
	defer ix.cover.Unlock()
	if ix.cfg.Path == "" || ix.cfg.Path == path {
		return nil
	}
	// The partitions it holds are recorded at the new path first: what
	// was at path before is another index, which a restart discards (its
	// signature is not the design document's).
	if ix.cover.stored {
		if err := writeCover(coverPath(path), ix.cover.parts, !ix.cfg.NoSync); err != nil {
			return fmt.Errorf("views: move the index of %s: %w", ix.id, err)
		}
	} else if err := os.Remove(coverPath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("views: move the index of %s: %w", ix.id, err)
	}
	if err := rename(ix.cfg.Path, path); err != nil {
		return fmt.Errorf("views: move the index of %s: %w", ix.id, err)
	}
	os.Remove(coverPath(ix.cfg.Path))
	ix.cfg.Path = path
	return nil
}

// Apply writes a mapped batch to the index with the feed position it
// reaches, in one transaction, which is durable when it returns (a paged
// index logs it, see index.ApplyDurable; feed.Sink).
func (ix *indexer) Apply(ctx context.Context, updates []index.DocUpdate, next []uint64, durable func()) error {
	return ix.idx.ApplyDurable(ctx, updates, next, durable)
}

// Quiet writes back the pages a paged index holds changed in memory (their
// changes are in its log already), once the feed has gone quiet, so that an
// idle index holds no dirty leaves and its next open replays no log, and at
// the end of a build's catch-up (feed.Quieter, feed.Options.BuildQuietDocs).
// An index in memory has nothing to write.
func (ix *indexer) Quiet(context.Context) error { return ix.idx.WriteBack() }

// closedErr is the error of a call on an indexer closed under it.
func (ix *indexer) closedErr() error {
	return fmt.Errorf("%w: design document %s was replaced or deleted", ErrClosed, ix.id)
}

// Prepare runs a batch of changes through the map functions and returns the
// index updates: new rows for live documents, none for deleted ones
// (feed.Sink).
func (ix *indexer) Prepare(ctx context.Context, changes iter.Seq[*engine.Document], p *feed.Progress) ([]index.DocUpdate, int, error) {
	var live []jsruntime.Doc
	var liveAt []int
	var updates []index.DocUpdate
	var sizes []int64
	if ix.preparedHook != nil {
		defer func() { ix.preparedHook(ix.id, sizes) }()
	}
	for d := range changes {
		if ix.preparedHook != nil {
			sizes = append(sizes, feed.ChangeBytes(d))
		}
		if d.Collection != engine.DefaultCollectionID {
			continue // views index _default._default, as Couchbase 7's do
		}
		if f := ix.filter.Load(); f != nil && !covers(*f, int(d.Partition)) {
			continue // a partition another node covers (Service.Cover)
		}
		updates = append(updates, index.DocUpdate{DocID: d.Key, Partition: d.Partition, Seq: d.Seq, Expiration: d.Expiration})
		if d.Deleted {
			continue // nil Rows: the document's rows leave the index
		}
		liveAt = append(liveAt, len(updates)-1)
		live = append(live, mapInput(d))
	}
	if len(live) == 0 {
		return updates, len(updates), nil
	}
	// Mapped in chunks; each document counts in _info (its progress, its
	// map errors) as soon as it is mapped, not when its chunk or batch is:
	// a map function that runs into its time limit on every document
	// takes that limit per document, and _info shows it as it happens.
	results := make([][]jsruntime.ViewResult, 0, len(live))
	for from := 0; from < len(live); from += mapChunk {
		chunk := live[from:min(from+mapChunk, len(live))]
		res, err := ix.prog.MapEach(ctx, chunk, func(i int, res []jsruntime.ViewResult) {
			for j, vr := range res {
				if vr.Err != nil {
					ix.recordError(ix.names[j], chunk[i].Meta.ID, vr.Err)
				}
			}
			ix.mapped.Add(1)
			p.Prepared(1)
		})
		if err != nil {
			return nil, 0, fmt.Errorf("views: map %s: %w", ix.id, err)
		}
		results = append(results, res...)
	}
	for i, res := range results {
		u := &updates[liveAt[i]]
		u.Rows = make(map[string][]index.Emit, len(ix.names))
		for j, vr := range res {
			view := ix.names[j]
			if vr.Err != nil {
				continue // recorded as it happened
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
	return updates, len(updates), nil
}

// consumerName names a design document's indexer among the bucket's
// change-feed consumers.
func consumerName(ddocID string) string { return "views:" + ddocID }

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

// PauseAcks stops or resumes acknowledging feed positions (feed.Replaceable).
func (ix *indexer) PauseAcks(pause bool) { ix.feed.PauseAcks(pause) }

// Close stops following the feed, ends any catch-up a query started, and
// closes the index and the program. It returns promptly whatever the backlog
// of changes. Later calls return the first call's result.
func (ix *indexer) Close() error {
	ix.closeOnce.Do(func() {
		ix.cancel()
		ix.feed.Stop()
		ix.closeErr = ix.idx.Close()
		ix.prog.Close()
	})
	return ix.closeErr
}

// pending counts the changes the index has not seen yet.
//
// It is asked for every answer (Query.Behind), so it reads both vectors
// (a sequence number per partition each, 8 KiB apiece at 1,024
// partitions) into buffers from a pool rather than new slices
// (feed.Consumer.Pending's copies were most of a 100-row answer's
// garbage).
func (ix *indexer) pending() uint64 {
	buf, _ := ix.seqBufs.Get().(*[]uint64)
	if buf == nil {
		buf = new([]uint64)
	}
	mine := ix.idx.AppendSeqs((*buf)[:0])
	all := ix.feed.Handle().AppendHighSeqnos(mine)
	n := feed.Between(all[:len(mine)], all[len(mine):])
	*buf = all
	ix.seqBufs.Put(buf)
	return n
}

// mapChunk is how many documents the map functions get at once.
const mapChunk = 5000

// BuildInfo is an index's build progress as _info shows it.
type BuildInfo = feed.BuildInfo
