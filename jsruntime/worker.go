package jsruntime

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// worker is one slot of the pool: the runtimes it owns, and the machinery
// that interrupts the one running. Only the goroutine that borrowed the
// worker uses its runtimes; interrupt may be called from any goroutine.
type worker struct {
	pool *Pool

	mu struct {
		sync.Mutex
		running   *goja.Runtime   // the runtime executing a call; nil when idle
		done      <-chan struct{} // the Done channel of the running call's context
		cause     error           // why running was interrupted; nil if it was not
		started   time.Time       // when the call running began
		abandoned bool            // stuck is closed
	}

	timer      *time.Timer   // runs onTimeout; armed only during a call
	fired      chan struct{} // onTimeout is done (needed when Stop comes too late)
	stuckTimer *time.Timer   // runs onStuck; armed only during a call
	// stuck is closed when a call has run past its time limit plus the
	// grace (see graceFor) without returning, which happens when it is
	// inside a built-in (a sort, a string operation) that goja cannot
	// interrupt. The goroutine waiting for the call then gives the worker
	// up (Pool.replace) and returns; the runtime is never used again.
	stuck chan struct{}

	// Guarded by the pool's memWatch.mu.
	memCharged uint64        // bytes charged to the call running
	memTimed   bool          // the call is charged only while its thread runs (see memWatch)
	memClock   int32         // the CPU clock of a timed call's thread
	memCPU     time.Duration // memClock's reading at the last sample

	// Owned by the borrowing goroutine.
	runtimes []*vmState // most recently used first
	timed    bool       // the next call is charged only while its thread runs (see callRetrying)
	clock    int32      // the CPU clock of the borrowing goroutine's thread, when timed
}

func newWorker(p *Pool) *worker {
	w := &worker{pool: p, fired: make(chan struct{}, 1), stuck: make(chan struct{})}
	w.timer = time.AfterFunc(time.Hour, w.onTimeout)
	w.timer.Stop()
	w.stuckTimer = time.AfterFunc(time.Hour, w.onStuck)
	w.stuckTimer.Stop()
	return w
}

// graceFor is how long past its time limit a call may take to notice the
// interrupt before its worker is abandoned: a quarter of the limit, at
// least 250ms (a busy machine may not schedule the call's goroutine at
// once) and at most a second.
func graceFor(timeout time.Duration) time.Duration {
	return min(max(timeout/4, 250*time.Millisecond), time.Second)
}

// onStuck abandons w if the call running has outlived its time limit plus
// the grace. (A late run of the timer, left from an earlier call, finds a
// younger call and does nothing.)
func (w *worker) onStuck() {
	limit := w.pool.opts.Timeout + graceFor(w.pool.opts.Timeout)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.running != nil && !w.mu.abandoned && time.Since(w.mu.started) >= limit-time.Millisecond {
		w.mu.abandoned = true
		if w.mu.cause == nil {
			w.mu.cause = ErrTimeout
			w.mu.running.Interrupt(ErrTimeout)
		}
		close(w.stuck)
	}
}

func (w *worker) onTimeout() {
	w.interrupt(ErrTimeout)
	w.fired <- struct{}{}
}

// interrupt stops the call running on w, if any, with cause. Safe from any
// goroutine; a no-op when w is idle or already interrupted.
func (w *worker) interrupt(cause error) {
	w.mu.Lock()
	if w.mu.running != nil && w.mu.cause == nil {
		w.mu.cause = cause
		w.mu.running.Interrupt(cause)
	}
	w.mu.Unlock()
}

// interruptFor stops the call running on w with ctx's error, but only if
// that call runs under ctx. A caller registers it with context.AfterFunc
// for as long as it uses w; the function may still run just after the
// caller is done and w serves another caller's call, which an interruption
// meant for the first must not stop (it would fail that call's views as if
// their functions had failed).
func (w *worker) interruptFor(ctx context.Context) {
	w.mu.Lock()
	if w.mu.running != nil && w.mu.cause == nil && w.mu.done == ctx.Done() {
		w.mu.cause = ctx.Err()
		w.mu.running.Interrupt(w.mu.cause)
	}
	w.mu.Unlock()
}

// begin arms the time limit and makes rt interruptible for a call. With
// force false it refuses (returning ctx's error) when ctx is done; with
// force true it arms anyway and interrupts at once if ctx is done, for code
// that will run no matter what (see vmState.batch).
func (w *worker) begin(ctx context.Context, rt *vmState, force bool) error {
	w.mu.Lock()
	err := ctx.Err()
	if err != nil && !force {
		w.mu.Unlock()
		return err
	}
	w.mu.running = rt.vm
	w.mu.done = ctx.Done()
	w.mu.cause = nil
	w.mu.started = time.Now() // wall clock: the call's running time, for the watchdogs
	if err != nil {
		w.mu.cause = err
		rt.vm.Interrupt(err)
	}
	w.mu.Unlock()
	rt.abortErr = nil
	w.timer.Reset(w.pool.opts.Timeout)
	w.stuckTimer.Reset(w.pool.opts.Timeout + graceFor(w.pool.opts.Timeout))
	w.pool.mem.add(w, w.clock, w.timed)
	return nil
}

// end disarms what begin armed and returns the cause of an interruption
// (nil if there was none). The runtime is left uninterrupted: no interrupt
// can reach it after end, and any that arrived is cleared.
func (w *worker) end(rt *vmState) error {
	w.pool.mem.remove(w)
	w.stuckTimer.Stop()
	if !w.timer.Stop() {
		<-w.fired // onTimeout ran or is running: wait for it
	}
	w.mu.Lock()
	cause := w.mu.cause
	w.mu.running = nil
	w.mu.done = nil
	w.mu.cause = nil
	w.mu.Unlock()
	rt.vm.ClearInterrupt()
	return cause
}

// call runs fn on rt under the pool's time limit, with ctx able to
// interrupt it (the caller registers w.interruptFor with context.AfterFunc).
// An interruption by the timer, the context or Close comes back as that
// cause (ErrTimeout, ctx's error, ErrClosed); an abort by a helper as the
// helper's error; a JavaScript exception as *goja.Exception. A Go panic
// escaping goja marks rt broken and comes back as an error. However the
// call ends, the runtime is left uninterrupted and reusable.
func (w *worker) call(ctx context.Context, rt *vmState, fn goja.Callable, args ...goja.Value) (v goja.Value, err error) {
	if err := w.begin(ctx, rt, false); err != nil {
		return nil, err
	}
	defer func() {
		cause := w.end(rt)
		if x := recover(); x != nil {
			rt.broken = true
			v, err = nil, fmt.Errorf("jsruntime: internal error: %v", x)
			return
		}
		if rt.abortErr != nil {
			v, err = nil, rt.abortErr
			rt.abortErr = nil
			return
		}
		var ie *goja.InterruptedError
		if errors.As(err, &ie) && cause != nil {
			err = cause
		}
	}()
	return fn(goja.Undefined(), args...)
}

// memRetries is how many times a call interrupted by the memory watchdog
// is run again before its ErrMemoryLimit stands.
const memRetries = 1

// callRetrying is call, except that a call interrupted for memory
// (ErrMemoryLimit) is run again, up to memRetries times, timed: locked to
// its OS thread and charged only for the allocation sampled while that
// thread runs (see memWatch). The watchdog charges a call what the whole
// process allocates while it runs, so a legitimate call that waits for a
// CPU while the server allocates can be interrupted though it allocated
// nothing; the run again, charged only while it runs, passes, while a bomb
// fails each time. A call is a pure function of its arguments (the
// runtime is frozen, see the package documentation), so running it again
// is safe; again is called before each run again to forget what the
// interrupted run left on the Go side (emits, a reduction's output) and to
// build the arguments afresh (the interrupted run may have changed them);
// should it fail, the ErrMemoryLimit stands. Each run again counts in
// Pool.MemoryRetries. Being the same function of the same arguments, a
// run again repeats the interrupted run's log(...) calls first; those are
// not written twice.
func (w *worker) callRetrying(ctx context.Context, rt *vmState, again func() ([]goja.Value, error), fn goja.Callable, args ...goja.Value) (goja.Value, error) {
	rt.logCalls, rt.logSkip = 0, 0
	defer func() { rt.logCalls, rt.logSkip = 0, 0 }()
	v, err := w.call(ctx, rt, fn, args...)
	for range memRetries {
		if !errors.Is(err, ErrMemoryLimit) || ctx.Err() != nil || rt.broken {
			break
		}
		fresh, aerr := again()
		if aerr != nil {
			break
		}
		w.pool.memRetries.Add(1)
		rt.prog.memRetries.Add(1)
		rt.logSkip, rt.logCalls = rt.logCalls, 0
		v, err = w.callTimed(ctx, rt, fn, fresh...)
		if errors.Is(err, ErrMemoryLimit) {
			err = errMemoryLimitAgain
		}
	}
	return v, err
}

// errMemoryLimitAgain is the error of a call that ran past the memory limit
// in its run again too (see callRetrying).
var errMemoryLimitAgain = fmt.Errorf("%w, also when run again", ErrMemoryLimit)

// callTimed is call, locked to the OS thread and charged by the memory
// watchdog only while that thread runs (plain call where the thread's CPU
// time cannot be read).
func (w *worker) callTimed(ctx context.Context, rt *vmState, fn goja.Callable, args ...goja.Value) (goja.Value, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	w.clock, w.timed = threadClock()
	defer func() { w.clock, w.timed = 0, false }()
	return w.call(ctx, rt, fn, args...)
}

// runtimeFor returns w's runtime for pr, instantiating it on first use and
// evicting the least recently used one beyond Options.CachedPrograms.
// Runtimes of closed programs are dropped on the way.
func (w *worker) runtimeFor(pr *Program) (*vmState, error) {
	for i, rt := range w.runtimes {
		if rt.prog == pr && !rt.broken {
			if i > 0 {
				copy(w.runtimes[1:i+1], w.runtimes[:i])
				w.runtimes[0] = rt
			}
			return rt, nil
		}
	}
	kept := w.runtimes[:0]
	for _, rt := range w.runtimes {
		if !rt.prog.closed.Load() && !rt.broken {
			kept = append(kept, rt)
		}
	}
	clear(w.runtimes[len(kept):])
	w.runtimes = kept
	rt, err := newVMState(w.pool, pr)
	if err != nil {
		return nil, err
	}
	if len(w.runtimes) >= w.pool.opts.CachedPrograms {
		w.runtimes[len(w.runtimes)-1] = nil
		w.runtimes = w.runtimes[:len(w.runtimes)-1]
	}
	w.runtimes = append(w.runtimes, nil)
	copy(w.runtimes[1:], w.runtimes)
	w.runtimes[0] = rt
	return rt, nil
}

// shutdown releases w's runtimes; w is not used again.
func (w *worker) shutdown() {
	w.timer.Stop()
	w.stuckTimer.Stop()
	clear(w.runtimes)
	w.runtimes = nil
}
