package index

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// MaxReductionSize is the largest reduction, in bytes of JSON, that a view may
// store or return: a longer one is an error wrapping ErrReductionTooLarge.
const MaxReductionSize = 64 << 10

// Reducer reduces a view's rows. It is supplied by the caller: the built-ins
// _count, _sum and _stats and JavaScript reduce functions live elsewhere. It must
// be safe for concurrent use: queries call it from their own goroutines.
type Reducer interface {
	// Reduce reduces emitted rows: keys[i] is the raw JSON key, ids[i] the
	// document id and values[i] the raw JSON value of row i. It returns raw JSON.
	// The slices and their bytes belong to the index: Reduce must not change or
	// keep them.
	// ctx is the query's (or Check's): a reduce that can run long stops
	// when it ends.
	Reduce(ctx context.Context, keys [][]byte, ids []string, values [][]byte) ([]byte, error)
	// Rereduce combines earlier results of Reduce and Rereduce (raw JSON) into
	// one. It must agree with Reduce: reducing rows in parts and rereducing the
	// parts gives what reducing them all at once gives.
	Rereduce(ctx context.Context, values [][]byte) ([]byte, error)
}

// ViewConfig names one view of a design document.
type ViewConfig struct {
	// Name identifies the view in Apply, Query and Reduce.
	Name string
	// Reducer is the view's reduce function; nil for a map-only view.
	Reducer Reducer
}

// Config describes the index of one design document.
type Config struct {
	// Path is the bbolt file that persists the index; "" keeps it in memory only
	// (ephemeral buckets). The file is created if missing.
	Path string
	// Signature identifies the view definitions the stored rows were built with.
	// It is opaque to the index. When the stored signature (or the list of view
	// names, or NumPartitions) differs, Open discards the stored rows and the
	// index starts empty at sequence 0 everywhere, with FeedUUID 0.
	Signature string
	// Views lists the design document's views; names must be distinct and not
	// empty.
	Views []ViewConfig
	// NumPartitions is the length of the sequence vector, one entry per partition
	// (vBucket): 1 to 65536, typically 1024.
	NumPartitions int
	// NoSync opens the file with bbolt's NoSync: commits are not fsynced.
	// Faster, but a machine crash (power loss, kernel panic; a process crash
	// is harmless) can lose Applies that had returned, or damage the file so
	// that Open fails and the index must be rebuilt. The engine sets it under
	// mayfly serve --no-sync. The default, false, fsyncs every commit. Without
	// a Path it has no effect.
	NoSync bool
	// Cache, if not nil (and Path is set), makes the index paged: its
	// trees' nodes live in the file and leaves' rows are read through
	// Cache, which may be shared by many indexes (see pager.go). Its
	// Applies are logged, and their pages written back lazily, up to the
	// cache's dirty budget (see PageCache.SetDirtyBudget). A file written
	// with the other layout is rebuilt, as one of another Signature is.
	// Without a Path it has no effect.
	Cache *PageCache

	// leafRows, if not 0, is the most rows of a paged index's leaf
	// (pagedLeafItems otherwise): tests lower it.
	leafRows int
}

// Emit is one row emitted by a map function: raw JSON key and value. A nil
// Value stands for null.
type Emit struct {
	Key, Value []byte
}

// DocUpdate carries the new rows of one document, from the mutation with
// sequence number Seq in partition Partition.
type DocUpdate struct {
	// DocID is the document's id; rows with equal keys order by it byte-wise.
	DocID string
	// Partition is the document's partition, below Config.NumPartitions.
	Partition uint16
	// Seq is the sequence number of the mutation in its partition.
	Seq uint64
	// Expiration is the document's expiration, absolute Unix seconds (0:
	// never). Every row of the document carries it: queries that exclude
	// expired rows (Range.ExcludeExpired) leave them out once it has passed.
	Expiration int64
	// Rows holds the document's rows per view name, in emit order. A view that
	// is missing or empty has no rows of this document; a nil map means the
	// document was deleted. Every name must be a configured view.
	Rows map[string][]Emit
}

// Index is the stored rows of the views of one design document: for each view,
// rows ordered by key collation, then document id, then emit order, with
// reductions of its subtrees kept in the inner nodes of an in-memory B+tree; a
// back index from document id to the document's rows; and the sequence number
// indexed so far in each partition. See the package documentation for the
// design.
//
// An Index is safe for concurrent use. Apply calls are serialized; queries run
// concurrently with them on a consistent snapshot and never wait for them.
type Index struct {
	views     []ViewConfig
	byName    map[string]int
	signature string      // Config.Signature
	db        *bolt.DB    // nil: memory only
	ps        *pager      // nil: not paged (trees in memory)
	mm        *mapRelease // releases db's mapped pages; nil when db is

	snap     atomic.Pointer[snapshot]
	closed   atomic.Bool
	cursors  sync.Pool     // *cursor, for Reader.Query (see getCursor)
	feedUUID atomic.Uint64 // see FeedUUID
	mapped   atomic.Uint64 // see Mapped

	// leafRows is the most rows of a leaf a paged index writes:
	// pagedLeafItems, or less in tests.
	leafRows int
	// checkpointDocs is the fewest logged documents that trigger a checkpoint:
	// the constant checkpointDocs, or less in tests.
	checkpointDocs int
	// fixedCheckpoint makes a paged index write back at checkpointDocs
	// logged documents exactly, not at half its rows (see writeBackDue):
	// set by tests.
	fixedCheckpoint bool
	// ckptHook, if set (by tests), runs in a background checkpoint after it
	// has written its rows and before it switches to them. Guarded by mu.
	ckptHook func()

	mu struct {
		sync.Mutex                    // one writer at a time
		gen         uint64            // generation of the tree nodes the writer may change
		back        map[string][]byte // back index: document id → its rows (see appendEntry)
		logDocs     int               // documents in the log since the checkpoint
		logNext     uint64            // key of the next log record
		ckpt        byte              // which checkpoint ('a' or 'b') is current
		ckptRunning bool              // a background checkpoint is being written
		ckptErr     error             // a background checkpoint failed; Apply reports it once
	}
	ckptDone sync.WaitGroup // the background checkpoint, if one runs
}

// snapshot is what queries see: one immutable tree per view and the sequence
// vector, published together once they are durable.
type snapshot struct {
	roots []*node
	// expRoots holds, per view, the rows of the view whose document has an
	// expiration, ordered by expiration, then document id and emit order
	// (see expiryRow), with cached reductions like any tree: a forecast
	// reduces the rows that expire in an interval as one key range. It is
	// derived from roots: not persisted, rebuilt when the file is loaded.
	expRoots []*node
	seqs     []uint64
	// gen is the writer generation of the Apply that published the
	// snapshot (0 for the one Open makes).
	gen uint64
}

// newSnapshot returns an empty snapshot of nviews views and nparts
// partitions.
func newSnapshot(nviews, nparts int) *snapshot {
	snap := &snapshot{roots: make([]*node, nviews), expRoots: make([]*node, nviews), seqs: make([]uint64, nparts)}
	for i := range snap.roots {
		snap.roots[i], snap.expRoots[i] = &node{}, &node{}
	}
	return snap
}

// Open opens the index described by cfg, loading persisted rows if cfg.Path
// names an existing file written with the same Signature, view names and
// NumPartitions, and discarding them otherwise.
func Open(ctx context.Context, cfg Config) (*Index, error) {
	if cfg.NumPartitions < 1 || cfg.NumPartitions > 1<<16 {
		return nil, fmt.Errorf("%w: NumPartitions %d not in 1..65536", ErrInvalidConfig, cfg.NumPartitions)
	}
	ix := &Index{
		views:          slices.Clone(cfg.Views),
		byName:         make(map[string]int, len(cfg.Views)),
		signature:      cfg.Signature,
		checkpointDocs: checkpointDocs,
	}
	for i, v := range ix.views {
		if v.Name == "" {
			return nil, fmt.Errorf("%w: empty view name", ErrInvalidConfig)
		}
		if _, dup := ix.byName[v.Name]; dup {
			return nil, fmt.Errorf("%w: view %q listed twice", ErrInvalidConfig, v.Name)
		}
		ix.byName[v.Name] = i
	}
	snap := newSnapshot(len(ix.views), cfg.NumPartitions)
	ix.mu.back = make(map[string][]byte)
	if cfg.Path != "" {
		db, err := openBolt(cfg.Path, cfg.NoSync)
		if err != nil {
			return nil, err
		}
		ix.db = db
		ix.mm = newMapRelease(db, minMapRelease)
		if cfg.Cache != nil {
			ix.leafRows = cmp.Or(cfg.leafRows, pagedLeafItems)
			// The pages read through the map stay within about the
			// cache's budget, and at most maxMapRead (see mapRelease).
			ix.mm.limit = max(min(cfg.Cache.budget, maxMapRead), minMapRelease)
			ix.ps = &pager{db: db, cache: cfg.Cache, owner: cfg.Cache.newOwner(), readers: make(map[uint64]int), mm: ix.mm}
		}
		err = prepareStore(db, &cfg)
		switch {
		case err != nil:
		case ix.ps != nil:
			if err = ix.loadPaged(snap); err == nil {
				err = ix.replayPaged(ctx, snap)
			}
		default:
			err = ix.loadStore(ctx, snap)
		}
		if err != nil {
			if ix.ps != nil {
				ix.ps.addDirty(-ix.ps.dirty.bytes) // of a replay
			}
			db.Close()
			return nil, fmt.Errorf("index: load %s: %w", cfg.Path, err)
		}
		ix.mm.release() // the load read the file (in memory: all of it)
	}
	ix.snap.Store(snap)
	return ix, nil
}

// Close closes the index file, first writing a checkpoint (a paged index:
// writing back its dirty pages) if the log holds at least as many documents
// as would trigger one in Apply's minimum, so that the next Open has little
// to replay. Later calls fail with ErrClosed; Close itself
// may be called again and then does nothing.
func (ix *Index) Close() error {
	ix.mu.Lock()
	if ix.closed.Swap(true) || ix.db == nil {
		ix.mu.Unlock()
		return nil
	}
	// No Apply can start now; wait for a background checkpoint to end.
	ix.mu.Unlock()
	ix.ckptDone.Wait()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var err error
	if ix.ps != nil {
		if ix.mu.logDocs >= ix.checkpointDocs {
			err = func() (err error) {
				defer recoverPage(&err)
				return ix.writeBackLocked()
			}()
			if err != nil {
				err = fmt.Errorf("%w: %w", ErrCheckpoint, err)
			}
		}
		ix.ps.addDirty(-ix.ps.dirty.bytes) // in the log, for the next Open
		ix.ps.cache.dropOwner(ix.ps.owner)
	} else if ix.mu.logDocs >= ix.checkpointDocs {
		if err = ix.checkpointLocked(ix.snap.Load()); err != nil {
			err = fmt.Errorf("%w: %w", ErrCheckpoint, err)
		}
	}
	if cerr := ix.db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("index: close: %w", cerr)
	}
	return err
}

// Seqs returns a copy of the sequence vector: for each partition, the highest
// sequence number applied so far (0 for none).
func (ix *Index) Seqs() []uint64 {
	return slices.Clone(ix.snap.Load().seqs)
}

// AppendSeqs appends Seqs to dst and returns the extended slice, for a
// caller that reuses its buffer.
func (ix *Index) AppendSeqs(dst []uint64) []uint64 {
	return append(dst, ix.snap.Load().seqs...)
}

// TotalRows returns the number of rows of view, as total_rows reports it.
// An answer that also reads rows reads both from one Reader.
func (ix *Index) TotalRows(view string) (int, error) {
	rd, err := ix.Reader()
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	return rd.TotalRows(view)
}

// LiveRows returns the number of rows of view whose document has not expired
// at now (Unix seconds), from the index's latest snapshot (see
// Reader.LiveRows).
func (ix *Index) LiveRows(ctx context.Context, view string, now int64) (int, error) {
	rd, err := ix.Reader()
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	return rd.LiveRows(ctx, view, now)
}

// LiveRows returns the number of rows of view whose document has not expired
// at now (Unix seconds): total_rows of a query that excludes expired rows.
// It is counted from node counts: the view's rows less those of its expiry
// tree (the rows that never expire), plus the expiry tree's rows that expire
// after now, in O(log n) whatever has expired (see live.go).
func (rdr *Reader) LiveRows(ctx context.Context, view string, now int64) (n int, err error) {
	s, vi, err := rdr.view(view)
	if err != nil {
		return 0, err
	}
	defer recoverPage(&err)
	if n, ok := liveRows(s.roots[vi], s.expRoots[vi], now); ok {
		return n, nil
	}
	rd := reduction{ctx: ctx, now: now, live: true}
	lc, err := rd.liveOf(s.roots[vi])
	return lc.count, err
}
