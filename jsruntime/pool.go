package jsruntime

import (
	"context"
	"sync"

	"github.com/dop251/goja"
)

// Pool is a fixed set of JavaScript workers shared by every design document
// of a server (sg-bucket's JSServer pattern: single-goroutine VMs behind a
// thread-safe front). A call borrows a worker, runs on the caller's
// goroutine (or on goroutines the call starts, for Program.Map), and
// returns it; at most Options.Workers calls run JavaScript at once, and
// further callers wait, honouring their context.
//
// Each worker keeps one goja runtime per design document it has run
// recently (Options.CachedPrograms, least recently used out), so that
// global state a function leaves behind is seen only by functions of the
// same design document, as with Couchbase's one V8 context per design
// document.
//
// A Pool is safe for concurrent use. Close it when done.
type Pool struct {
	opts    Options
	helpers *goja.Program // defines sum and dateToArray
	wrapRed *goja.Program // wraps a reduce so its result is encoded inside the call
	freeze  *goja.Program // freezes everything a runtime's scripts can reach
	idle    chan *worker  // workers not borrowed; capacity len(workers)
	workers []*worker     // all workers, for Close
	done    chan struct{} // closed by Close

	closeOnce sync.Once
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
		freeze:  goja.MustCompile("freeze.js", freezeSource, false),
		idle:    make(chan *worker, o.Workers),
		done:    make(chan struct{}),
	}
	for i := 0; i < o.Workers; i++ {
		w := newWorker(p)
		p.workers = append(p.workers, w)
		p.idle <- w
	}
	return p
}

// Close interrupts the JavaScript calls running in the pool (they fail with
// ErrClosed), waits until every worker is back, and releases the runtimes.
// Later calls fail with ErrClosed. Close is idempotent and returns nil.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() {
		close(p.done)
		for _, w := range p.workers {
			w.interrupt(ErrClosed)
		}
		for range p.workers {
			w := <-p.idle
			w.shutdown()
		}
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
	pr := &Program{pool: p, views: cvs, byName: make(map[string]int, len(cvs))}
	for i, v := range cvs {
		pr.byName[v.name] = i
		pr.needDoc = pr.needDoc || v.usesDoc
		pr.needMeta = pr.needMeta || v.usesMeta
	}
	return pr, nil
}

// borrow takes an idle worker, waiting until one is free, ctx is done, the
// pool closes, or stop (which may be nil) is closed; in that last case it
// returns nil, nil.
func (p *Pool) borrow(ctx context.Context, stop <-chan struct{}) (*worker, error) {
	if p.closed() {
		return nil, ErrClosed
	}
	select {
	case w := <-p.idle:
		if p.closed() {
			p.idle <- w
			return nil, ErrClosed
		}
		return w, nil
	default:
	}
	select {
	case w := <-p.idle:
		if p.closed() {
			p.idle <- w
			return nil, ErrClosed
		}
		return w, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.done:
		return nil, ErrClosed
	case <-stop:
		return nil, nil
	}
}

// release gives a borrowed worker back.
func (p *Pool) release(w *worker) {
	p.idle <- w
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
	function makeMeta(id, rev, seq, vb, expiration, flags, type) {
		return {id: id, rev: rev, seq: seq, vb: vb, expiration: expiration, flags: flags, type: type};
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

// freezeSource returns a function that freezes every object reachable from
// the global object and from the values it is given (the map and reduce
// functions): the global object itself, the built-in constructors and
// their prototypes, the helpers, and whatever hangs off them (through own
// properties, accessors and prototypes, recursively), plus the prototypes
// of iterators, generators and the like that no global names. After it, a
// function can neither add a global nor change a built-in, so no document
// sees what another left behind (state would otherwise leak from one
// document to the next and make the index depend on indexing order). In
// non-strict code, which map functions are, a write to a frozen property
// silently does nothing; in strict code it throws.
const freezeSource = `(function () {
	var getOwn = Object.getOwnPropertyNames, getSyms = Object.getOwnPropertySymbols,
		getDesc = Object.getOwnPropertyDescriptor, getProto = Object.getPrototypeOf,
		freeze = Object.freeze, isFrozen = Object.isFrozen;
	return function (extra) {
		var todo = [globalThis], seen = new Set();
		function add(v) {
			if (v !== null && (typeof v === "object" || typeof v === "function") && !seen.has(v)) {
				seen.add(v);
				todo.push(v);
			}
		}
		for (var i = 0; i < extra.length; i++) add(extra[i]);
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
		while (todo.length > 0) {
			var o = todo.pop();
			add(getProto(o));
			var keys = getOwn(o).concat(getSyms(o));
			for (var k = 0; k < keys.length; k++) {
				var d = getDesc(o, keys[k]);
				if (!d) continue;
				add(d.value);
				add(d.get);
				add(d.set);
			}
			if (!isFrozen(o)) freeze(o);
		}
	};
})()`
