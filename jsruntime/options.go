package jsruntime

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"
)

// Couchbase's limits on what map and reduce functions produce.
const (
	// MaxKeySize is the size in bytes of JSON an emitted key must stay
	// under: a key of MaxKeySize bytes or more fails the view for that
	// document with ErrKeyTooLong.
	MaxKeySize = 4096
	// MaxEmitSize is the most JSON, keys plus values, one document may emit
	// into one view (Couchbase's max_kv_size_per_doc); more fails the view
	// for that document with ErrEmitTooLarge.
	MaxEmitSize = 1 << 20
	// MaxEmitsPerDoc is the most rows one document may emit into one view
	// (Couchbase's limit); more fails the view for that document with
	// ErrTooManyEmits.
	MaxEmitsPerDoc = 65535
	// MaxReductionSize is the largest reduction, in bytes of JSON, that a
	// reduce or rereduce may return; more is ErrReductionTooLarge.
	MaxReductionSize = 65535
)

// Defaults applied by Options.EnsureDefaults.
const (
	// DefaultTimeout is the default time limit of one JavaScript call.
	DefaultTimeout = 5 * time.Second
	// DefaultMaxCallStackSize is the default call-depth limit of a runtime.
	DefaultMaxCallStackSize = 10000
	// DefaultMaxMemory is the default memory budget of one JavaScript call.
	DefaultMaxMemory = 64 << 20
	// DefaultCachedPrograms is the default number of design documents a
	// worker keeps instantiated.
	DefaultCachedPrograms = 32
)

// Options configure a Pool. The zero value, or nil, means defaults.
type Options struct {
	// Workers is the number of JavaScript workers, that is the number of
	// map or reduce calls that run at the same time. Each worker owns its
	// runtimes and runs on the goroutine that borrowed it. The default
	// value is runtime.NumCPU().
	Workers int
	// Timeout is the time limit of one JavaScript call: one map function
	// over one document, or one reduce. The default value is 5s
	// (DefaultTimeout), as sg-bucket's map timeout.
	Timeout time.Duration
	// MaxCallStackSize bounds the call depth inside a runtime, so that
	// runaway recursion fails with ErrStackOverflow instead of exhausting
	// memory. The default value is 10000 (DefaultMaxCallStackSize) frames.
	MaxCallStackSize int
	// MaxWorkersPerProgram is the most workers one design document
	// (Program) may hold at once, so that a slow or hostile design
	// document, whose calls may each hold a worker up to Timeout, leaves
	// workers to the others. The default value is half the workers,
	// rounded up, and at least one.
	MaxWorkersPerProgram int
	// MaxMemory is the memory budget of one call, in bytes: a call that
	// allocates more (as the pool's watchdog estimates it, see memWatch) is
	// interrupted and fails with ErrMemoryLimit. The default value is 64
	// MiB (DefaultMaxMemory); a negative value turns the watchdog off.
	MaxMemory int64
	// CachedPrograms is how many design documents (Programs) each worker
	// keeps instantiated, least recently used first out. Each one costs a
	// goja runtime per worker. The default value is 32
	// (DefaultCachedPrograms).
	CachedPrograms int
	// Logger receives the output of the JavaScript log(...) helper, at
	// level Info with the view name. Nil discards.
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields with their defaults and returns o. A nil
// receiver returns a new Options holding the defaults.
func (o *Options) EnsureDefaults() *Options {
	if o == nil {
		o = &Options{}
	}
	if o.Workers <= 0 {
		o.Workers = runtime.NumCPU()
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxCallStackSize <= 0 {
		o.MaxCallStackSize = DefaultMaxCallStackSize
	}
	if o.MaxWorkersPerProgram <= 0 {
		o.MaxWorkersPerProgram = max(1, (o.Workers+1)/2)
	}
	if o.MaxMemory == 0 {
		o.MaxMemory = DefaultMaxMemory
	}
	if o.CachedPrograms <= 0 {
		o.CachedPrograms = DefaultCachedPrograms
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports options that cannot work: negative sizes or durations.
// Zero values are valid and mean defaults.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	switch {
	case o.Workers < 0:
		return fmt.Errorf("jsruntime: Options.Workers is negative (%d)", o.Workers)
	case o.Timeout < 0:
		return fmt.Errorf("jsruntime: Options.Timeout is negative (%s)", o.Timeout)
	case o.MaxCallStackSize < 0:
		return fmt.Errorf("jsruntime: Options.MaxCallStackSize is negative (%d)", o.MaxCallStackSize)
	case o.CachedPrograms < 0:
		return fmt.Errorf("jsruntime: Options.CachedPrograms is negative (%d)", o.CachedPrograms)
	}
	return nil
}
