package memtune

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestGCPercent(t *testing.T) {
	const MiB = 1 << 20
	for _, c := range []struct {
		name     string
		h        Heap
		ratio    float64
		headroom uint64
		want     int
	}{
		{"empty heap", Heap{}, 1.3, 8 * MiB, MaxPercent},
		{"small heap keeps Go's default", Heap{Live: 4 * MiB}, 1.3, 8 * MiB, MaxPercent},
		// 15 MiB live: 4.5 + 8 = 12.5 MiB of growth over 16 MiB scanned.
		{"memcached benchmark's heap", Heap{Live: 15 * MiB, Stacks: MiB / 2, Globals: MiB / 2}, 1.3, 8 * MiB, 78},
		// 800 MiB live: (240 + 8) / 800 → 31 %: the goal is 1,048 MiB, not 1,600.
		{"1M documents and a view", Heap{Live: 800 * MiB}, 1.3, 8 * MiB, 31},
		{"huge heap tends to ratio-1", Heap{Live: 100_000 * MiB}, 1.3, 8 * MiB, 30},
		{"ratio 2 is Go's default", Heap{Live: 800 * MiB}, 2, 0, MaxPercent},
		{"tight ratio floors at MinPercent", Heap{Live: 800 * MiB}, 1.01, 0, MinPercent},
	} {
		if got := GCPercent(c.h, c.ratio, c.headroom); got != c.want {
			t.Errorf("%s: GCPercent(%+v, %v, %d) = %d, want %d", c.name, c.h, c.ratio, c.headroom, got, c.want)
		}
	}
}

// TestGCPercentKeepsGoal: the goal Go computes from the percent stays
// within the policy's bound for heaps where the percent is not clamped.
func TestGCPercentKeepsGoal(t *testing.T) {
	for live := uint64(40 << 20); live < 64<<30; live = live*3/2 + 12345 {
		h := Heap{Live: live, Stacks: 1 << 20, Globals: 300 << 10}
		p := GCPercent(h, 1.3, 8<<20)
		if p == MinPercent || p == MaxPercent {
			continue
		}
		goal := float64(h.Live) + float64(h.Live+h.Stacks+h.Globals)*float64(p)/100
		if bound := 1.3*float64(live) + 8<<20; goal > bound {
			t.Fatalf("live %d: percent %d makes a goal of %.0f, over %.0f", live, p, goal, bound)
		}
	}
}

// fakeRuntime records the percents a Tuner sets and serves the heap figures
// it reads.
type fakeRuntime struct {
	mu   sync.Mutex
	heap Heap
	cur  int
	sets []int
}

func (f *fakeRuntime) set(p int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.cur
	f.cur = p
	f.sets = append(f.sets, p)
	return prev
}

func (f *fakeRuntime) read() Heap {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heap
}

func (f *fakeRuntime) setHeap(h Heap) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heap = h
}

func (f *fakeRuntime) current() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}

// waitFor runs collections until cond holds (a generous deadline catches a
// hang: the tuner runs after a collection, on the runtime's cleanup
// goroutine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute", what)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// TestTunerFollowsCollections: the tuner sets the policy's percent at
// start, again after a collection that changed the live heap, and puts the
// old percent back when its context ends.
func TestTunerFollowsCollections(t *testing.T) {
	f := &fakeRuntime{cur: 100, heap: Heap{Live: 15 << 20, Stacks: 1 << 19, Globals: 1 << 19}}
	ctx, cancel := context.WithCancel(context.Background())
	tu := start(ctx, Policy{Ratio: 1.3, Headroom: 8 << 20}, f.set, f.read)
	if got := f.current(); got != 78 {
		t.Fatalf("percent at start %d, want 78", got)
	}
	f.setHeap(Heap{Live: 800 << 20})
	waitFor(t, "percent for the grown heap", func() bool { return f.current() == 31 })
	if tu.Percent() != 31 || tu.Runs() < 1 {
		t.Fatalf("tuner reports percent %d after %d collections", tu.Percent(), tu.Runs())
	}
	cancel()
	waitFor(t, "percent restored", func() bool { return f.current() == 100 })
	n := len(f.sets)
	f.setHeap(Heap{Live: 15 << 20})
	for range 3 {
		runtime.GC()
	}
	time.Sleep(10 * time.Millisecond)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sets) != n {
		t.Fatalf("a stopped tuner set the percent again: %v", f.sets)
	}
}
