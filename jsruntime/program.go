package jsruntime

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dop251/goja"
	"github.com/mayflydb/mayfly/internal/ratelimit"
)

// Document types, the values of Meta.Type.
const (
	// TypeJSON marks a document whose value is JSON: map functions get it
	// parsed.
	TypeJSON = "json"
	// TypeBase64 marks a binary document: map functions get its value as a
	// base64 string.
	TypeBase64 = "base64"
)

// Meta is a document's metadata as map functions see it in their meta
// argument: {id, rev, seq, vb, expiration, flags, type, ts, created}, where seq and vb
// are JSON strings ("42", "513"), as Couchbase builds them.
type Meta struct {
	ID         string // the document's key
	Rev        string // "<revSeqno>-<hex of cas, expiration, flags>"
	Seq        uint64 // sequence number of the mutation; a string in JavaScript
	VB         uint16 // vBucket; a string in JavaScript
	Expiration int64  // absolute Unix seconds; 0 = none
	Flags      uint32 // client flags
	Type       string // TypeJSON (or "") or TypeBase64
	TS         int64  // Unix seconds of the last write of the value (meta.ts)
	Created    int64  // Unix seconds of the write that made the document live (meta.created)
}

// Doc is one document to map: its value as stored and its metadata.
type Doc struct {
	// Value is JSON text when Meta.Type is TypeJSON (or ""), any bytes
	// when it is TypeBase64. Map does not keep it.
	Value []byte
	// Meta is the metadata given to map functions as their meta argument.
	Meta Meta
}

// Emit is one row emitted by a map function: its key and value as JSON
// text. emit(k) and emit(k, undefined) give the value null; an undefined
// key is null. The slices belong to the caller and do not alias one
// another.
type Emit struct {
	Key   []byte // the emitted key as JSON
	Value []byte // the emitted value as JSON
}

// ViewResult is what one view's map function made of one document.
type ViewResult struct {
	// Emits are the rows, in emit order; nil when there are none or when
	// Err is set (a failed call leaves no rows behind).
	Emits []Emit
	// Err is the failure of this view for this document only: a
	// *ScriptError (a throw, ErrTimeout, ErrStackOverflow, ErrKeyTooLong,
	// ErrEmitTooLarge), or an error wrapping ErrInvalidJSON when the
	// document is not JSON.
	Err error
}

// Program is the compiled functions of one design document, made by
// Pool.Load. Compilation happens once; each worker instantiates the program
// in a runtime of its own on first use and keeps it. A Program is safe for
// concurrent use; Close it when the design document changes or goes away so
// that workers free its runtimes.
type Program struct {
	pool     *Pool
	views    []compiledView
	byName   map[string]int
	needDoc  bool // some map function reads doc
	needMeta bool // some map function reads meta
	closed   atomic.Bool
	held     int // workers borrowed; guarded by pool.sched

	logLimit   *ratelimit.Bucket // rate of log(...) lines
	logDropped atomic.Int64      // log(...) lines dropped over the rate
	memRetries atomic.Int64      // calls run again after ErrMemoryLimit
}

// MemoryRetries counts the program's map and reduce calls run again after
// the memory watchdog interrupted them (see Pool.MemoryRetries).
func (pr *Program) MemoryRetries() int64 { return pr.memRetries.Load() }

// Views returns the names of the program's views, in Load order: the order
// of each document's results from Map.
func (pr *Program) Views() []string {
	names := make([]string, len(pr.views))
	for i, v := range pr.views {
		names[i] = v.name
	}
	return names
}

// Close marks the program unusable (calls then fail with ErrClosed); the
// workers drop its runtimes as they come across them. Idempotent; returns
// nil.
func (pr *Program) Close() error {
	pr.closed.Store(true)
	return nil
}

func (pr *Program) check() error {
	if pr.closed.Load() || pr.pool.closed() {
		return ErrClosed
	}
	return nil
}

// Map runs every view's map function over each document: one pass per
// document, in which the document is converted once and handed to the map
// function of each view in turn (they share the doc and meta objects, as in
// Couchbase). Documents are spread over the pool's workers, which run in
// parallel. result[i][j] is document i in view j (the order given to Load).
//
// A map function that throws, runs past Options.Timeout or emits too much
// fails for that view and document only, in result[i][j].Err; Map goes on.
// Map itself fails only when ctx is done (it interrupts the running
// functions and returns ctx.Err()) or the pool or program is closed
// (ErrClosed); it then returns no results.
func (pr *Program) Map(ctx context.Context, docs []Doc) ([][]ViewResult, error) {
	return pr.MapEach(ctx, docs, nil)
}

// MapEach is Map, calling done(i, result[i]) as soon as document i's results
// are final, so that a caller can count failures and progress while a long
// Map runs (a map function timing out on every document takes
// Options.Timeout each). done runs on the workers' goroutines, concurrently,
// and must not block long nor keep res past its return; it is not called
// for the documents a failed Map did not finish. A nil done is Map.
func (pr *Program) MapEach(ctx context.Context, docs []Doc, done func(i int, res []ViewResult)) ([][]ViewResult, error) {
	if err := pr.check(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nv := len(pr.views)
	flat := make([]ViewResult, len(docs)*nv)
	results := make([][]ViewResult, len(docs))
	for i := range results {
		results[i] = flat[i*nv : (i+1)*nv : (i+1)*nv]
	}
	if len(docs) == 0 || nv == 0 {
		return results, nil
	}

	workers := pr.pool.opts.Workers
	job := &mapJob{
		pr: pr, ctx: ctx, docs: docs, results: results, done: done,
		chunk:     max(1, min(64, len(docs)/(4*workers))),
		exhausted: make(chan struct{}),
	}
	par := min(workers, (len(docs)+job.chunk-1)/job.chunk)
	var err error
	if par <= 1 {
		err = job.run()
	} else {
		errs := make([]error, par)
		var wg sync.WaitGroup
		for g := 1; g < par; g++ {
			wg.Go(func() { errs[g] = job.run() })
		}
		errs[0] = job.run()
		wg.Wait()
		err = errors.Join(errs...)
	}
	if err != nil {
		// One cause is enough: prefer the context's, then ErrClosed.
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, ErrClosed):
			return nil, ErrClosed
		}
		return nil, err
	}
	return results, nil
}

// mapJob is one Map call: its documents, their results, and the cursor
// through which its goroutines claim chunks of documents.
type mapJob struct {
	pr        *Program
	ctx       context.Context
	docs      []Doc
	results   [][]ViewResult
	done      func(i int, res []ViewResult) // nil: none (see MapEach)
	chunk     int
	next      atomic.Int64  // start of the next chunk to claim
	exhausted chan struct{} // closed once every chunk is claimed
	exhaust   sync.Once
}

// claim takes the next chunk of documents, docs[start:end]; ok is false
// when none is left.
func (j *mapJob) claim() (start, end int, ok bool) {
	start = int(j.next.Add(int64(j.chunk))) - j.chunk
	if start+j.chunk >= len(j.docs) {
		// Goroutines still waiting for a worker need not wait any more.
		j.exhaust.Do(func() { close(j.exhausted) })
	}
	if start >= len(j.docs) {
		return 0, 0, false
	}
	return start, min(start+j.chunk, len(j.docs)), true
}

// run is one goroutine of the job: it borrows a worker and maps chunks until
// none is left. It returns an error only for what ends the whole Map.
//
// The mapping runs on a goroutine of its own (runOn), so that run can give
// up a worker whose call is stuck in a built-in past its time limit (the
// worker's stuck channel): the document being mapped then fails with
// ErrTimeout, the worker is replaced by a fresh one, and the rest of the
// claimed documents are mapped on it. The abandoned goroutine, which may
// still be running, writes nothing the job reads any more.
func (j *mapJob) run() error {
	w, err := j.pr.pool.borrow(j.ctx, j.pr, j.exhausted)
	if w == nil {
		return err // nil when there was nothing left to do
	}
	st := &runState{current: -1}
	for {
		st.mu.Lock()
		st.owner = w
		st.mu.Unlock()
		done := make(chan error, 1)
		go func(w *worker) { done <- j.runOn(w, st) }(w)
		select {
		case err := <-done:
			j.pr.pool.release(w, j.pr)
			return err
		case <-w.stuck:
		}
		st.mu.Lock()
		st.owner = nil
		failed := st.current
		if cur := st.current; cur >= 0 {
			for v := range j.results[cur] {
				j.results[cur][v] = ViewResult{Err: &ScriptError{
					View: j.pr.views[v].name, Func: funcMap,
					Msg: "timeout (stuck in a built-in function; runtime abandoned)", Err: ErrTimeout,
				}}
			}
			st.current = -1
		}
		st.mu.Unlock()
		if failed >= 0 && j.done != nil {
			j.done(failed, j.results[failed])
		}
		w = j.pr.pool.replace(w)
		if err := j.pr.check(); err != nil {
			j.pr.pool.release(w, j.pr)
			return err
		}
		if err := j.ctx.Err(); err != nil {
			j.pr.pool.release(w, j.pr)
			return err
		}
	}
}

// runState is the progress of one goroutine of a Map job, shared by the
// successive goroutines (runOn) that map its documents when workers are
// abandoned. Only the owner may claim and write results.
type runState struct {
	mu       sync.Mutex
	owner    *worker // the worker whose goroutine may go on; nil: none
	cur, end int     // claimed documents not mapped yet: docs[cur:end]
	current  int     // document being mapped, -1 if none
}

// next returns the next document for w to map, claiming a chunk when
// needed; ok is false when none is left or w is no longer the owner.
func (j *mapJob) nextDoc(st *runState, w *worker) (i int, ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.owner != w {
		return 0, false
	}
	if st.cur == st.end {
		if st.cur, st.end, ok = j.claim(); !ok {
			return 0, false
		}
	}
	st.current = st.cur
	st.cur++
	return st.current, true
}

// commit stores the results of document i, mapped by w, unless w was
// abandoned meanwhile.
func (j *mapJob) commit(st *runState, w *worker, i int, out []ViewResult) {
	st.mu.Lock()
	if st.owner != w {
		st.mu.Unlock()
		return
	}
	copy(j.results[i], out)
	st.current = -1
	st.mu.Unlock()
	if j.done != nil {
		j.done(i, j.results[i])
	}
}

// runOn maps documents on w until none is left, an error ends the Map, or
// w is abandoned.
func (j *mapJob) runOn(w *worker, st *runState) error {
	stop := context.AfterFunc(j.ctx, func() { w.interruptFor(j.ctx) })
	defer stop()
	var arena emitArena
	out := make([]ViewResult, len(j.pr.views))
	for {
		rt, err := w.runtimeFor(j.pr)
		if err != nil {
			return err
		}
		var loopErr error
		finished := false
		current := -1
		// One batch per runtime: normally the whole run, unless the runtime
		// breaks and a new one takes over.
		perr := rt.batch(j.ctx, w, func() {
			for {
				i, ok := j.nextDoc(st, w)
				if !ok {
					finished = true
					return
				}
				if loopErr = j.pr.check(); loopErr != nil {
					return
				}
				current = i
				clear(out)
				loopErr = rt.mapDoc(j.ctx, w, &j.docs[i], out, &arena)
				if loopErr != nil {
					return
				}
				if rt.broken {
					return
				}
				j.commit(st, w, i, out)
				current = -1
			}
		})
		switch {
		case loopErr != nil:
			return loopErr
		case current >= 0 && perr == nil:
			// The runtime broke in a call (mapDoc failed the views it
			// could not run): keep the results and go on with a new one.
			j.commit(st, w, current, out)
		case current >= 0:
			// Our bug, on this document: fail it and go on with the rest.
			for v := range out {
				if out[v].Err == nil {
					out[v] = ViewResult{Err: perr}
				}
			}
			j.commit(st, w, current, out)
		case perr != nil:
			return perr
		case finished:
			return nil
		}
	}
}

// mapDoc runs every view over one document, filling out. It returns an
// error only for conditions that end the whole Map (context, Close).
func (rt *vmState) mapDoc(ctx context.Context, w *worker, doc *Doc, out []ViewResult, arena *emitArena) error {
	pr := rt.prog
	rt.docID = doc.Meta.ID
	docVal, metaVal, err := rt.mapArgs(doc)
	if err != nil {
		for j := range out {
			out[j].Err = err
		}
		return nil
	}
	rt.out = arena
	defer func() { rt.out = nil }()
	for j, fn := range rt.maps {
		cv := &pr.views[j]
		if rt.broken {
			out[j].Err = &ScriptError{View: cv.name, Func: funcMap, Msg: "runtime lost to an earlier internal error"}
			continue
		}
		rt.view = cv.name
		rt.emitBytes, rt.emitCount = 0, 0
		arena.begin()
		_, err := w.callRetrying(ctx, rt, func() ([]goja.Value, error) {
			arena.discard()
			rt.emitBytes, rt.emitCount = 0, 0
			d, m, err := rt.mapArgs(doc)
			return []goja.Value{d, m}, err
		}, fn, docVal, metaVal)
		if err == nil && rt.emitCount > MaxEmitsPerDoc {
			arena.discard()
			out[j].Err = &ScriptError{View: cv.name, Func: funcMap, Err: ErrTooManyEmits,
				Msg: fmt.Sprintf("Too many (%d) keys emitted for document `%s` (maximum allowed is %d", rt.emitCount, doc.Meta.ID, MaxEmitsPerDoc)}
			continue
		}
		if err != nil {
			arena.discard()
			if errors.Is(err, ErrClosed) || (ctx.Err() != nil && errors.Is(err, ctx.Err())) {
				return err
			}
			out[j].Err = scriptError(cv.name, funcMap, err)
			continue
		}
		out[j].Emits = arena.take()
	}
	return nil
}

// mapArgs converts doc into the arguments of map functions, doc and meta
// (undefined when no map function of the program reads them). Its error
// is the document's for every view.
func (rt *vmState) mapArgs(doc *Doc) (docVal, metaVal goja.Value, err error) {
	pr := rt.prog
	docVal, metaVal = goja.Undefined(), goja.Undefined()
	if pr.needDoc {
		switch doc.Meta.Type {
		case TypeJSON, "":
			v, err := rt.dec.decode(doc.Value)
			if err != nil {
				return nil, nil, fmt.Errorf("document %q: %w", doc.Meta.ID, err)
			}
			docVal = v
		case TypeBase64:
			docVal = rt.vm.ToValue(base64.StdEncoding.EncodeToString(doc.Value))
		default:
			return nil, nil, fmt.Errorf("%w: document %q has unknown type %q", ErrInvalidJSON, doc.Meta.ID, doc.Meta.Type)
		}
	}
	if pr.needMeta {
		v, err := rt.newMeta(&doc.Meta)
		if err != nil {
			// Our own code, which cannot throw; should it, say so per view.
			return nil, nil, fmt.Errorf("jsruntime: document %q: building meta: %w", doc.Meta.ID, err)
		}
		metaVal = v
	}
	return docVal, metaVal, nil
}

// scriptError turns the error of a call into a *ScriptError for view.
func scriptError(view, which string, err error) error {
	se := &ScriptError{View: view, Func: which, Msg: err.Error()}
	var ex *goja.Exception
	var so *goja.StackOverflowError
	switch {
	case errors.Is(err, ErrTimeout):
		se.Msg, se.Err = "timeout", ErrTimeout
	case errors.Is(err, errMemoryLimitAgain):
		se.Msg, se.Err = "memory limit exceeded, also when run again", ErrMemoryLimit
	case errors.Is(err, ErrMemoryLimit):
		se.Msg, se.Err = "memory limit exceeded", ErrMemoryLimit
	case errors.As(err, &so):
		se.Msg, se.Err = "RangeError: Maximum call stack size exceeded", ErrStackOverflow
	case errors.Is(err, ErrKeyTooLong), errors.Is(err, ErrEmitTooLarge), errors.Is(err, ErrReductionTooLarge):
		se.Err = err
	case errors.As(err, &ex):
		se.Msg = exceptionMessage(ex)
	}
	return se
}

// exceptionMessage is what a thrown value says: "TypeError: ..." for an
// Error, the string itself for a thrown string.
func exceptionMessage(ex *goja.Exception) string {
	v := ex.Value()
	if v == nil {
		return ex.Error()
	}
	return v.String()
}

// emitArena holds the emits of a run of map calls in shared, growing
// chunks, so that rows cost no allocation of their own. Chunks are never
// written again once handed out in a result.
type emitArena struct {
	buf   []byte // current byte chunk; keys and values are sub-slices
	emits []Emit // current Emit chunk
	start int    // first emit of the call in progress, in emits
}

// Chunk sizes double from the minimum to the maximum, so that mapping one
// document costs little and mapping many costs few allocations.
const (
	minArenaBytes = 1 << 10
	maxArenaBytes = 64 << 10
	minArenaEmits = 16
	maxArenaEmits = 1024
	minReserve    = 512 // free bytes wanted before encoding an emit
)

func (a *emitArena) begin() { a.start = len(a.emits) }

// reserve makes sure the current chunk has room for a typical emit, starting
// a new chunk rather than growing (and copying) the old one.
func (a *emitArena) reserve() {
	if cap(a.buf)-len(a.buf) < minReserve {
		a.buf = make([]byte, 0, min(max(2*cap(a.buf), minArenaBytes), maxArenaBytes))
	}
}

func (a *emitArena) add(e Emit) {
	if len(a.emits) == cap(a.emits) {
		pending := a.emits[a.start:]
		size := min(max(2*cap(a.emits), minArenaEmits), maxArenaEmits)
		n := make([]Emit, len(pending), max(size, 2*len(pending)))
		copy(n, pending)
		a.emits, a.start = n, 0
	}
	a.emits = append(a.emits, e)
}

// take returns the emits of the call in progress.
func (a *emitArena) take() []Emit {
	if len(a.emits) == a.start {
		return nil
	}
	return a.emits[a.start:len(a.emits):len(a.emits)]
}

// discard forgets the emits of the call in progress.
func (a *emitArena) discard() {
	clear(a.emits[a.start:])
	a.emits = a.emits[:a.start]
}
