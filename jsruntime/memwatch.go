package jsruntime

import (
	"runtime/metrics"
	"sync"
	"time"
)

// memSampleEvery is how often the memory watchdog samples allocation while
// calls run.
const memSampleEvery = time.Millisecond

// memWatch bounds the memory a JavaScript call allocates (Options.MaxMemory).
// Go cannot tell which goroutine allocated what, so it approximates: while
// calls run, a goroutine samples the process's cumulative heap allocation
// (runtime/metrics /gc/heap/allocs:bytes) every millisecond and charges
// what was allocated since the last sample to the calls running, in equal
// shares; a call charged more than the limit is interrupted with
// ErrMemoryLimit. A call alone is charged what the whole process allocates
// meanwhile (the server's own work included), so the limit is generous for
// what legitimate map functions allocate (kilobytes); a bomb that doubles a
// string or piles up arrays is stopped within a sample or two of passing
// it. Allocation made in one step by a single built-in ("x".repeat(1e9)) is
// seen only once it is made.
//
// A call whose goroutine waits for a CPU (a busy machine, more runnable
// goroutines than Ps) while the rest of the process allocates is charged
// that allocation too, and may be interrupted though it allocates nothing.
// So a call interrupted for memory is run again (see worker.callRetrying),
// and the run again is timed: its goroutine is locked to its OS thread, and
// each sample charges it the part of the allocation that its thread's share
// of the process's CPU time over the sample stands for (allocation taken to
// follow CPU work). A call descheduled, or waiting for a CPU, uses no CPU
// and is charged nothing meanwhile, whatever the server allocates; a bomb,
// which does most of the process's work while it runs (the garbage
// collector's workers and the server's own work aside), is charged most of
// what it allocates and stopped a little later than a first run would be
// (at most one more doubling of a string).
type memWatch struct {
	limit uint64 // 0: no watchdog
	wake  chan struct{}
	done  <-chan struct{}

	mu      sync.Mutex
	running map[*worker]struct{}
}

func newMemWatch(limit uint64, done <-chan struct{}) *memWatch {
	m := &memWatch{limit: limit, wake: make(chan struct{}, 1), done: done, running: map[*worker]struct{}{}}
	if limit > 0 {
		go m.loop()
	}
	return m
}

// add starts charging w's call. A timed call (clock is its thread's CPU
// clock, see threadClock) is charged only while its thread runs.
func (m *memWatch) add(w *worker, clock int32, timed bool) {
	if m.limit == 0 {
		return
	}
	var cpu time.Duration
	if timed {
		cpu, timed = threadCPU(clock)
	}
	m.mu.Lock()
	w.memCharged = 0
	w.memTimed, w.memClock, w.memCPU = timed, clock, cpu
	m.running[w] = struct{}{}
	first := len(m.running) == 1
	m.mu.Unlock()
	if first {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
}

// remove stops charging w.
func (m *memWatch) remove(w *worker) {
	if m.limit == 0 {
		return
	}
	m.mu.Lock()
	delete(m.running, w)
	m.mu.Unlock()
}

func readAllocs(s []metrics.Sample) uint64 {
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func (m *memWatch) loop() {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	tick := time.NewTicker(memSampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-m.wake:
		case <-m.done:
			return
		}
		last := readAllocs(s)
		lastCPU, _ := processCPU()
		tick.Reset(memSampleEvery)
		for busy := true; busy; {
			select {
			case <-tick.C:
			case <-m.done:
				return
			}
			now := readAllocs(s)
			nowCPU, _ := processCPU()
			delta, cpu := now-last, nowCPU-lastCPU
			last, lastCPU = now, nowCPU
			m.mu.Lock()
			if n := uint64(len(m.running)); n == 0 {
				busy = false
			} else {
				share := delta / n
				for w := range m.running {
					w.memCharged += w.charge(share, delta, cpu)
					if w.memCharged > m.limit {
						w.interrupt(ErrMemoryLimit)
					}
				}
			}
			m.mu.Unlock()
		}
		tick.Stop()
	}
}

// charge is what w's call is charged of delta, allocated while the process
// used cpu of CPU time: share (delta over the calls running), or for a
// timed call delta in proportion to the CPU time its thread used meanwhile.
// Called with memWatch.mu held.
func (w *worker) charge(share, delta uint64, cpu time.Duration) uint64 {
	if !w.memTimed {
		return share
	}
	now, ok := threadCPU(w.memClock)
	if !ok || cpu <= 0 {
		return share
	}
	used := now - w.memCPU
	w.memCPU = now
	if used >= cpu {
		return delta
	}
	if used <= 0 {
		return 0
	}
	return uint64(float64(delta) * float64(used) / float64(cpu))
}
