package jsruntime

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
	"github.com/mayflydb/mayfly/internal/ratelimit"
)

// Pool is a fixed set of JavaScript workers shared by every design document
// of a server (sg-bucket's JSServer pattern: single-goroutine VMs behind a
// thread-safe front). A call borrows a worker, runs on the caller's
// goroutine (or on goroutines the call starts, for Program.Map), and
// returns it; at most Options.Workers calls run JavaScript at once, and
// further callers wait, honouring their context.
//
// Each worker keeps one goja runtime per design document it has run
// recently (Options.CachedPrograms, least recently used out), frozen before
// its first call so that no call leaves state behind (see the package
// documentation). Workers are shared fairly between design documents (see
// borrow), and a call stuck in a built-in past its time limit is abandoned
// with its worker, which a fresh one replaces (see replace).
//
// A Pool is safe for concurrent use. Close it when done.
type Pool struct {
	opts    Options
	helpers *goja.Program    // defines sum and dateToArray
	wrapRed *goja.Program    // wraps a reduce so its result is encoded inside the call
	tame    *goja.Program    // readies a runtime for its freeze, listing the roots
	done    chan struct{}    // closed by Close
	mem     *memWatch        // the memory budget of calls
	now     func() time.Time // the clock of the log(...) rate limit

	mu struct {
		sync.Mutex
		workers []*worker // all workers, for Close; abandoned ones are replaced
	}

	// sched hands workers out fairly among programs (see borrow).
	sched struct {
		sync.Mutex
		idle    []*worker  // workers not borrowed
		waiters []*waiter  // borrowers waiting, oldest first
		back    *sync.Cond // signalled when a worker comes back after Close
		perProg int        // the most workers one program may hold
	}

	closeOnce  sync.Once
	abandoned  atomic.Int64
	memRetries atomic.Int64
}

// NewPool returns a pool with opts (nil means defaults; the pool keeps its
// own copy with defaults filled in). Runtimes are created lazily, on a
// worker's first call for a design document.
func NewPool(opts *Options) *Pool {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	p := &Pool{
		opts:    o,
		helpers: goja.MustCompile("helpers.js", helpersSource, false),
		wrapRed: goja.MustCompile("reduce.js", reduceWrapperSource, false),
		tame:    goja.MustCompile("tame.js", tameSource, false),
		done:    make(chan struct{}),
		now:     time.Now, // wall clock: a rate limit on log lines
	}
	p.mem = newMemWatch(uint64(max(o.MaxMemory, 0)), p.done)
	p.sched.back = sync.NewCond(&p.sched.Mutex)
	p.sched.perProg = o.MaxWorkersPerProgram
	for i := 0; i < o.Workers; i++ {
		w := newWorker(p)
		p.mu.workers = append(p.mu.workers, w)
		p.sched.idle = append(p.sched.idle, w)
	}
	return p
}

// replace gives up w, a borrowed worker whose call is stuck in a built-in
// past its time limit (w.stuck is closed), and returns a fresh worker, also
// borrowed, to use (and release) instead. The goroutine running w's call
// is left to finish on its own: it was interrupted, so it stops as soon as
// the built-in returns, and nothing uses w or its runtimes afterwards.
func (p *Pool) replace(w *worker) *worker {
	nw := newWorker(p)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.mu.workers {
		if x == w {
			p.mu.workers[i] = nw
		}
	}
	p.abandoned.Add(1)
	return nw
}

// Abandoned counts the calls given up because they ran inside a built-in
// past their time limit plus a grace (their runtimes were replaced).
func (p *Pool) Abandoned() int64 { return p.abandoned.Load() }

// MemoryRetries counts the map and reduce calls run again after the memory
// watchdog interrupted them with ErrMemoryLimit (each run again counts):
// most are calls charged the rest of the process's allocation while they
// waited for a CPU, which pass when run again; a call that fails every time
// fails with ErrMemoryLimit.
func (p *Pool) MemoryRetries() int64 { return p.memRetries.Load() }

// Close interrupts the JavaScript calls running in the pool (they fail with
// ErrClosed), waits until every worker is back, and releases the runtimes.
// Later calls fail with ErrClosed. Close is idempotent and returns nil.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() {
		close(p.done)
		p.mu.Lock()
		n := len(p.mu.workers)
		for _, w := range p.mu.workers {
			w.interrupt(ErrClosed)
		}
		p.mu.Unlock()
		p.sched.Lock()
		for len(p.sched.idle) < n {
			p.sched.back.Wait()
		}
		for _, w := range p.sched.idle {
			w.shutdown()
		}
		p.sched.Unlock()
	})
	return nil
}

func (p *Pool) closed() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Load compiles the functions of a design document (as Compile does) and
// returns the Program that runs them. Nothing runs yet: each worker
// instantiates the program in its own runtime on first use.
func (p *Pool) Load(views []ViewSource) (*Program, error) {
	if p.closed() {
		return nil, ErrClosed
	}
	cvs, err := compileViews(views)
	if err != nil {
		return nil, err
	}
	pr := &Program{pool: p, views: cvs, byName: make(map[string]int, len(cvs)),
		logLimit: ratelimit.New(LogRate, LogBurst, p.now)}
	for i, v := range cvs {
		pr.byName[v.name] = i
		pr.needDoc = pr.needDoc || v.usesDoc
		pr.needMeta = pr.needMeta || v.usesMeta
	}
	return pr, nil
}

// waiter is a borrower waiting for a worker.
type waiter struct {
	pr *Program
	ch chan *worker // receives the worker handed over; capacity 1
}

// borrow takes an idle worker for pr, waiting until one is free, ctx is
// done, the pool closes, or stop (which may be nil) is closed; in that
// last case it returns nil, nil.
//
// Workers are shared fairly among programs (design documents): a program
// holds at most Options.MaxWorkersPerProgram workers at once, so that a
// slow or hostile design document, whose calls each hold a worker up to
// the time limit, leaves workers to the others; and a worker coming back
// goes to the waiting program that holds the fewest, the longest waiting
// first among equals, so that a program with many waiting goroutines does
// not starve one with few.
func (p *Pool) borrow(ctx context.Context, pr *Program, stop <-chan struct{}) (*worker, error) {
	p.sched.Lock()
	if p.closed() {
		p.sched.Unlock()
		return nil, ErrClosed
	}
	if n := len(p.sched.idle); n > 0 && pr.held < p.sched.perProg {
		w := p.sched.idle[n-1]
		p.sched.idle = p.sched.idle[:n-1]
		pr.held++
		p.sched.Unlock()
		return w, nil
	}
	wt := &waiter{pr: pr, ch: make(chan *worker, 1)}
	p.sched.waiters = append(p.sched.waiters, wt)
	p.sched.Unlock()
	var err error
	select {
	case w := <-wt.ch:
		if p.closed() {
			p.release(w, pr)
			return nil, ErrClosed
		}
		return w, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-p.done:
		err = ErrClosed
	case <-stop:
	}
	p.sched.Lock()
	for i, x := range p.sched.waiters {
		if x == wt {
			p.sched.waiters = append(p.sched.waiters[:i], p.sched.waiters[i+1:]...)
			p.sched.Unlock()
			return nil, err
		}
	}
	p.sched.Unlock()
	// Handed a worker meanwhile: give it back.
	p.release(<-wt.ch, pr)
	return nil, err
}

// release gives back a worker pr borrowed.
func (p *Pool) release(w *worker, pr *Program) {
	p.sched.Lock()
	defer p.sched.Unlock()
	pr.held--
	best := -1
	for i, wt := range p.sched.waiters {
		if wt.pr.held < p.sched.perProg && (best < 0 || wt.pr.held < p.sched.waiters[best].pr.held) {
			best = i
		}
	}
	if best >= 0 {
		wt := p.sched.waiters[best]
		p.sched.waiters = append(p.sched.waiters[:best], p.sched.waiters[best+1:]...)
		wt.pr.held++
		wt.ch <- w
		return
	}
	p.sched.idle = append(p.sched.idle, w)
	p.sched.back.Broadcast()
}

// helpersSource defines the JavaScript helpers Couchbase gives map and
// reduce functions besides the native emit, decodeBase64 and log: sum adds
// the elements of an array with +; dateToArray turns a Date, or anything new
// Date accepts (an ISO string, milliseconds), into [year, month, day, hour,
// minute, second] in UTC, or null for an invalid date. It also returns the
// meta builder and the batch driver, which scripts cannot reach.
const helpersSource = `(function () {
	function sum(values) {
		var total = 0;
		for (var i = 0; i < values.length; i++) {
			total += values[i];
		}
		return total;
	}
	function dateToArray(date) {
		var d = date.getUTCDate ? date : new Date(date);
		if (!isFinite(d.valueOf())) {
			return null;
		}
		return [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(),
			d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()];
	}
	// Not a helper for scripts: builds a map function's meta argument
	// (an object literal costs less than defining properties from Go).
	function makeMeta(id, rev, seq, vb, expiration, flags, type, ts, created) {
		return {id: id, rev: rev, seq: seq, vb: vb, expiration: expiration, flags: flags, type: type, ts: ts, created: created};
	}
	// Not for scripts either: the outer call of a batch (vmState.batch).
	function drive(f) {
		f();
	}
	return [sum, dateToArray, makeMeta, drive];
})()`

// reduceWrapperSource makes, from a reduce function and a native output
// function, a function that passes the reduction to the output inside the
// same call, so that encoding it (which may run toJSON methods and getters)
// is under the call's time limit and its errors are exceptions.
const reduceWrapperSource = `(function (reduce, output) {
	return function (keys, values, rereduce) {
		output(reduce(keys, values, rereduce));
	};
})`

// tameSource returns a function that readies a runtime for its freeze
// (freezer) and returns the roots to freeze from, as an array: the global
// object, the values it is given (the map and reduce functions, the
// helpers), the values the taming below replaced, and the prototypes of
// iterators, generators and the like that no global names. Frozen from
// there (the built-in constructors and their prototypes, the helpers, and
// whatever hangs off them, through own properties, accessors and
// prototypes, recursively), a function can neither add a global nor change
// a built-in, so no document sees what another left behind (state would
// otherwise leak from one document to the next and make the index depend
// on indexing order). In non-strict code, which map functions are, a write
// to a frozen property silently does nothing; in strict code it throws.
const tameSource = `(function () {
	var getDesc = Object.getOwnPropertyDescriptor, getProto = Object.getPrototypeOf,
		defProp = Object.defineProperty;
	return function (extra) {
		var roots = [globalThis];
		function add(v) {
			if (v !== null && (typeof v === "object" || typeof v === "function")) roots.push(v);
		}
		for (var i = 0; i < extra.length; i++) add(extra[i]);
		// The override mistake: once Object.prototype is frozen, o.toString
		// = f on an ordinary object would silently fail, as would e.name =
		// "MyError" on an error, or F.prototype.toString = f. The usual
		// victims become accessors whose setter defines the property on the
		// object assigned to (and ignores assignments to the prototype
		// itself), as SES does.
		function tame(proto, names) {
			for (var i = 0; i < names.length; i++) {
				var k = names[i], d = getDesc(proto, k);
				if (!d || !("value" in d) || !d.configurable) continue;
				add(d.value);
				(function (k, v) {
					defProp(proto, k, {
						get: function () { return v; },
						set: function (nv) {
							if (this === proto) return;
							defProp(this, k, {value: nv, writable: true, enumerable: true, configurable: true});
						},
						enumerable: d.enumerable, configurable: false
					});
				})(k, d.value);
			}
		}
		tame(Object.prototype, ["toString", "valueOf", "toLocaleString", "constructor"]);
		tame(Function.prototype, ["toString", "constructor"]);
		[Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError].forEach(function (E) {
			tame(E.prototype, ["name", "message", "toString", "constructor"]);
		});
		// Prototypes no global names.
		try { add(getProto([][Symbol.iterator]())); } catch (e) {}
		try { add(getProto(new Map()[Symbol.iterator]())); } catch (e) {}
		try { add(getProto(new Set()[Symbol.iterator]())); } catch (e) {}
		try { add(getProto(""[Symbol.iterator]())); } catch (e) {}
		try { add(getProto(/x/[Symbol.matchAll](""))); } catch (e) {}
		try { add(getProto(function* () {})); } catch (e) {}
		try { add(getProto(function* () {}())); } catch (e) {}
		try { add(getProto(async function () {})); } catch (e) {}
		try { add(getProto(Int8Array)); } catch (e) {}
		try { add((function () { return arguments; })()); } catch (e) {}
		return roots;
	};
})()`
