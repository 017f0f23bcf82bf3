// Package memtune keeps the Go collector's heap goal close to the live heap.
//
// Go's default (GOGC=100) lets the heap grow to twice what the last
// collection found live before the next one starts, and a server that holds
// hundreds of megabytes of documents and view rows then holds as much again
// of garbage: resident memory runs at twice the live heap. A Policy instead
// sets the collector's percent after every collection so that the next
// heap goal is at most Ratio times the live heap plus a fixed Headroom
// (the headroom keeps a small heap from being collected without end).
// Collections come more often as the heap grows; each costs what marking
// the live heap costs (BENCHMARKS.md, "Resident memory against the live
// heap").
package memtune

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Defaults of a Policy (mayfly serve's --heap-ratio and --heap-headroom-mb).
const (
	DefaultRatio    = 1.3
	DefaultHeadroom = 8 << 20

	// MaxPercent is the largest percent a Policy sets: Go's default,
	// which a small heap keeps.
	MaxPercent = 100
	// MinPercent is the smallest: below it the collector would run all
	// the time for a few bytes of garbage.
	MinPercent = 10
)

// Heap is what a collection left: the figures Go's heap goal is made of.
type Heap struct {
	Live    uint64 // bytes of heap objects marked live (/gc/heap/live)
	Stacks  uint64 // bytes of goroutine stacks scanned (/gc/scan/stack)
	Globals uint64 // bytes of global variables scanned (/gc/scan/globals)
}

// GCPercent returns the collector percent (GOGC) under which the next heap
// goal of h stays within ratio×Live + headroom, clamped to
// [MinPercent, MaxPercent]. Go's goal is Live + (Live+Stacks+Globals) ×
// percent/100, so the percent is the wanted growth over what the collector
// scans. A ratio of 2 or more, or an empty heap, gives MaxPercent.
func GCPercent(h Heap, ratio float64, headroom uint64) int {
	scanned := h.Live + h.Stacks + h.Globals
	if scanned == 0 || ratio >= 2 {
		return MaxPercent
	}
	growth := (ratio-1)*float64(h.Live) + float64(headroom)
	p := math.Floor(100 * growth / float64(scanned))
	return int(min(max(p, MinPercent), MaxPercent))
}

// Policy is a heap goal: Ratio times the live heap plus Headroom bytes.
type Policy struct {
	Ratio    float64
	Headroom uint64
}

// heapSamples are the runtime/metrics names Heap is read from, in its
// fields' order.
var heapSamples = [...]string{"/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes"}

// ReadHeap returns what the last collection left.
func ReadHeap() Heap {
	var s [len(heapSamples)]metrics.Sample
	for i, n := range heapSamples {
		s[i].Name = n
	}
	metrics.Read(s[:])
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return Heap{Live: v(0), Stacks: v(1), Globals: v(2)}
}

// Tuner applies a Policy after every collection until it is stopped.
type Tuner struct {
	p    Policy
	set  func(int) int // debug.SetGCPercent
	read func() Heap

	mu      sync.Mutex
	stopped bool
	percent int // last set
	prev    int // the percent before the tuner started
	runs    int // collections seen
}

// Start sets the collector's percent for p now and again after every
// collection, until ctx ends or Stop is called; the percent then goes back
// to what it was.
func Start(ctx context.Context, p Policy) *Tuner {
	return start(ctx, p, debug.SetGCPercent, ReadHeap)
}

func start(ctx context.Context, p Policy, set func(int) int, read func() Heap) *Tuner {
	t := &Tuner{p: p, set: set, read: read}
	t.percent = GCPercent(read(), p.Ratio, p.Headroom)
	t.prev = set(t.percent)
	t.arm()
	context.AfterFunc(ctx, t.Stop)
	return t
}

// sentinel is what a collection frees to tell the tuner it ran: an object
// of its own size class (tiny allocations share a block and may never be
// freed alone).
type sentinel struct{ _ [32]byte }

// arm leaves an unreachable object whose cleanup, run after the next
// collection, applies the policy and arms again.
func (t *Tuner) arm() {
	runtime.AddCleanup(new(sentinel), func(t *Tuner) {
		if t.apply() {
			t.arm()
		}
	}, t)
}

// apply sets the percent the last collection's figures call for, and
// reports whether the tuner still runs.
func (t *Tuner) apply() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	t.runs++
	if p := GCPercent(t.read(), t.p.Ratio, t.p.Headroom); p != t.percent {
		t.percent = p
		t.set(p)
	}
	return true
}

// Runs returns how many collections the tuner has seen.
func (t *Tuner) Runs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runs
}

// Percent returns the percent the tuner set last.
func (t *Tuner) Percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.percent
}

// Stop ends the tuner and puts back the percent it found.
func (t *Tuner) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	t.set(t.prev)
}
