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

// add starts charging w's call.
func (m *memWatch) add(w *worker) {
	if m.limit == 0 {
		return
	}
	m.mu.Lock()
	w.memCharged = 0
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
		tick.Reset(memSampleEvery)
		for busy := true; busy; {
			select {
			case <-tick.C:
			case <-m.done:
				return
			}
			now := readAllocs(s)
			delta := now - last
			last = now
			m.mu.Lock()
			if n := uint64(len(m.running)); n == 0 {
				busy = false
			} else {
				share := delta / n
				for w := range m.running {
					w.memCharged += share
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
