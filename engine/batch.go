package engine

import (
	"context"
	"fmt"
	"sync"
)

// OpKind names the write an Op makes.
type OpKind string

// The writes an Op can make, named as the bulk API names them.
const (
	OpUpsert  OpKind = "upsert"
	OpInsert  OpKind = "insert"
	OpReplace OpKind = "replace"
	OpDelete  OpKind = "delete"
	OpTouch   OpKind = "touch"
)

// Op is one write of a batch: the same write as the Collection method of its
// kind, with the same rules (CAS, expiry, maxTTL, key and value limits).
type Op struct {
	// Kind is the write: upsert, insert, replace, delete or touch.
	Kind OpKind
	// Key is the document ID.
	Key string
	// Value is the new body (upsert, insert, replace); nil is refused for
	// those kinds.
	Value []byte
	// Opts are the write's options. For a touch only Opts.Expiry and
	// Opts.Durability count.
	Opts WriteOptions
}

// Apply makes one write, as the Collection method of op.Kind would, and
// returns the version it made.
func (c *Collection) Apply(ctx context.Context, op *Op) (*Document, error) {
	if err := validateKey(op.Key); err != nil {
		return nil, err
	}
	switch op.Kind {
	case OpUpsert, OpInsert, OpReplace:
		if op.Value == nil {
			return nil, fmt.Errorf("%w: %s needs a value", ErrInvalidOp, op.Kind)
		}
	}
	switch op.Kind {
	case OpUpsert:
		return c.Upsert(ctx, op.Key, op.Value, &op.Opts)
	case OpInsert:
		return c.Insert(ctx, op.Key, op.Value, &op.Opts)
	case OpReplace:
		return c.Replace(ctx, op.Key, op.Value, &op.Opts)
	case OpDelete:
		return c.Delete(ctx, op.Key, &op.Opts)
	case OpTouch:
		return c.TouchWith(ctx, op.Key, &op.Opts)
	case "":
		return nil, fmt.Errorf("%w: an operation is required: upsert, insert, replace, delete or touch", ErrInvalidOp)
	default:
		return nil, fmt.Errorf("%w: the operation must be upsert, insert, replace, delete or touch, got %q", ErrInvalidOp, op.Kind)
	}
}

// Result is what one write of a batch made: the new version, or the error.
type Result struct {
	Doc *Document
	Err error
}

// ApplyAll makes the writes of ops in c as one batch through a Pipeline: they
// run concurrently and share group commits, writes to one key in the order
// given. Result i is that of ops[i]. A failed write fails only itself.
func (c *Collection) ApplyAll(ctx context.Context, ops []Op) []Result {
	out := make([]Result, len(ops))
	p := NewPipeline(ctx, nil)
	for i := range ops {
		p.Go(ops[i].Key, len(ops[i].Value), func(ctx context.Context) {
			out[i].Doc, out[i].Err = c.Apply(ctx, &ops[i])
		})
	}
	p.Wait()
	return out
}

// PipelineOptions bound a Pipeline's work in flight.
type PipelineOptions struct {
	// Window is the most tasks in flight (submitted, not finished), and so
	// the most goroutines running them; 0 means DefaultPipelineWindow.
	Window int
	// MaxBytes bounds the sizes, as given to Go, of the tasks in flight; a
	// task always runs when nothing else is in flight, whatever its size.
	// 0 means DefaultPipelineMaxBytes.
	MaxBytes int
}

// DefaultPipelineWindow is the default number of tasks a Pipeline keeps in
// flight. With 2,048, the next group commit fills while one is on its way
// to disk: 300,000 small documents bulk-loaded into a started server at
// 137,000-158,000 docs/s, against 132,000-137,000 with 1,024 and
// 129,000-136,000 with 4,096 (BENCHMARKS.md, "Bulk writes").
const DefaultPipelineWindow = 2048

// DefaultPipelineMaxBytes is the default bound on the bytes held by a
// Pipeline's tasks in flight.
const DefaultPipelineMaxBytes = 64 << 20

// A Pipeline runs the writes of one client's stream — a bulk request, a
// connection's pipelined commands — concurrently, so that they share group
// commits instead of waiting for the disk one by one, while keeping the
// order that client relies on: tasks on the same chain key (a document) run
// one after the other in the order they were submitted, and each Task's
// Done tells when its own write is finished, so answers can be given in
// submission order. Go blocks while the window or the byte budget is full.
//
// A Pipeline is used by one submitting goroutine; Wait ends it.
type Pipeline struct {
	ctx context.Context

	budget byteBudget
	jobs   chan *Task
	wg     sync.WaitGroup
	// workers counts the goroutines started; they live until Wait, so that
	// their stacks (grown by the write path) are reused.
	workers int

	chainMu sync.Mutex
	chain   map[string]*Task // the last task in flight on each chain key
}

// Task is one write submitted to a Pipeline.
type Task struct {
	p    *Pipeline
	fn   func(ctx context.Context)
	key  string
	size int
	prev *Task // the task before it on the same key, if in flight
	done chan struct{}
}

// Done is closed when the task's function has returned.
func (t *Task) Done() <-chan struct{} { return t.done }

// NewPipeline returns a Pipeline whose tasks run under ctx; nil opts means
// the defaults.
func NewPipeline(ctx context.Context, opts *PipelineOptions) *Pipeline {
	var o PipelineOptions
	if opts != nil {
		o = *opts
	}
	if o.Window <= 0 {
		o.Window = DefaultPipelineWindow
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultPipelineMaxBytes
	}
	p := &Pipeline{ctx: ctx, jobs: make(chan *Task), chain: make(map[string]*Task)}
	p.budget.init(o.MaxBytes, o.Window)
	return p
}

// Go submits fn, a write on the document named by key (any string that
// names it uniquely in the stream, such as collection and key) holding size
// bytes of input. fn runs after every earlier task on the same key has
// finished, on one of the Pipeline's goroutines. Go waits while the window
// or the byte budget is full.
func (p *Pipeline) Go(key string, size int, fn func(ctx context.Context)) *Task {
	t := &Task{p: p, fn: fn, key: key, size: size, done: make(chan struct{})}
	p.budget.acquire(size)
	p.chainMu.Lock()
	t.prev = p.chain[key]
	p.chain[key] = t
	p.chainMu.Unlock()
	select {
	case p.jobs <- t: // an idle worker took it
		return t
	default:
	}
	if p.workers < p.budget.window { // set once, by init
		p.workers++
		p.wg.Go(func() {
			for t := range p.jobs {
				t.run()
			}
		})
	}
	p.jobs <- t
	return t
}

// run runs t after the task before it on its key, then releases what it
// held.
func (t *Task) run() {
	if t.prev != nil {
		<-t.prev.done
		t.prev = nil
	}
	t.fn(t.p.ctx)
	t.fn = nil
	p := t.p
	p.chainMu.Lock()
	if p.chain[t.key] == t {
		delete(p.chain, t.key)
	}
	p.chainMu.Unlock()
	p.budget.release(t.size)
	close(t.done)
}

// InFlight returns the number of tasks submitted and not yet finished.
func (p *Pipeline) InFlight() int {
	p.budget.mu.Lock()
	defer p.budget.mu.Unlock()
	return p.budget.inFlight
}

// Drain waits until every task submitted so far has finished; the Pipeline
// stays usable. A client stream calls it before a command that must see its
// earlier writes (a read).
func (p *Pipeline) Drain() {
	b := &p.budget
	b.mu.Lock()
	for b.inFlight > 0 {
		b.cond.Wait()
	}
	b.mu.Unlock()
}

// Wait waits for every task submitted to finish and stops the Pipeline's
// goroutines. Go must not be called after it.
func (p *Pipeline) Wait() {
	close(p.jobs)
	p.wg.Wait()
}

// byteBudget bounds the tasks in flight and the bytes they hold.
type byteBudget struct {
	mu       sync.Mutex
	cond     sync.Cond
	used     int
	max      int
	inFlight int
	window   int
}

func (b *byteBudget) init(max, window int) {
	b.max, b.window = max, window
	b.cond.L = &b.mu
}

// acquire waits until one more task of n bytes fits; with nothing in flight
// anything fits.
func (b *byteBudget) acquire(n int) {
	b.mu.Lock()
	for b.inFlight > 0 && (b.used+n > b.max || b.inFlight >= b.window) {
		b.cond.Wait()
	}
	b.used += n
	b.inFlight++
	b.mu.Unlock()
}

func (b *byteBudget) release(n int) {
	b.mu.Lock()
	b.used -= n
	b.inFlight--
	b.mu.Unlock()
	b.cond.Broadcast()
}
