package feed_test

import (
	"context"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/feed"
)

// countingSink is a memSink that records how many changes each Prepare
// read and how many times each key was applied.
type countingSink struct {
	*memSink
	mu      sync.Mutex
	batches []int          // changes read by each Prepare, in order
	applied map[string]int // times each key was applied
}

func newCountingSink(n int) *countingSink {
	return &countingSink{memSink: newMemSink(n), applied: map[string]int{}}
}

func (s *countingSink) Prepare(ctx context.Context, changes iter.Seq[*engine.Document], p *feed.Progress) (memBatch, int, error) {
	n := 0
	counted := func(yield func(*engine.Document) bool) {
		for d := range changes {
			n++
			if !yield(d) {
				return
			}
		}
	}
	b, docs, err := s.memSink.Prepare(ctx, counted, p)
	s.mu.Lock()
	s.batches = append(s.batches, n)
	s.mu.Unlock()
	return b, docs, err
}

func (s *countingSink) Apply(ctx context.Context, batch memBatch, next []uint64, durable func()) error {
	s.mu.Lock()
	for k := range batch {
		s.applied[k]++
	}
	s.mu.Unlock()
	return s.memSink.Apply(ctx, batch, next, durable)
}

// take returns the sizes of the non-empty batches prepared since the last
// call (the feed's end is found by an empty one).
func (s *countingSink) take() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, n := range s.batches {
		if n > 0 {
			out = append(out, n)
		}
	}
	s.batches = nil
	return out
}

// While the process's memory is near its limit a catch-up reads a quarter
// of its batch size at a time, and full batches again once it is not,
// looking before each batch; every change is applied once either way, and
// the catch-up reaches its target.
func TestBatchesShrinkUnderMemoryPressure(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t)
	s := newCountingSink(b.NumPartitions())
	var pressureFor atomic.Int64 // the probe reports pressure for this many more looks
	probe := func() bool { return pressureFor.Add(-1) >= 0 }
	c, err := feed.Start(ctx, b.Consumer("test"), feed.Sink[memBatch](s),
		feed.WithMemoryPressure(feed.Options{BatchSize: 40}, probe))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)

	check := func(phase string, want []string, target []uint64, sizes []int) {
		t.Helper()
		if got := s.take(); !slices.Equal(got, sizes) {
			t.Errorf("%s: batches of %v changes, want %v", phase, got, sizes)
		}
		if got := s.keys(); !slices.Equal(got, want) {
			t.Fatalf("%s: the sink holds %d documents, want %d", phase, len(got), len(want))
		}
		s.mu.Lock()
		for k, n := range s.applied {
			if n != 1 {
				t.Errorf("%s: %s applied %d times", phase, k, n)
			}
		}
		s.mu.Unlock()
		if _, seqs := s.Position(); !feed.Reached(seqs, target) {
			t.Errorf("%s: position %v short of the target %v", phase, seqs, target)
		}
		if p := c.Pending(); p != 0 {
			t.Errorf("%s: %d changes pending", phase, p)
		}
	}

	// Under pressure throughout: batches of 10.
	pressureFor.Store(1 << 30)
	a := keys("a", 100)
	put(t, b, a...)
	target := b.HighSeqnos()
	if err := c.CatchUp(ctx, target); err != nil {
		t.Fatal(err)
	}
	check("under pressure", a, target, []int{10, 10, 10, 10, 10, 10, 10, 10, 10, 10})
	if n := c.BuildInfo().SmallBatches; n != 10 {
		t.Errorf("under pressure: the build info counts %d small batches, want 10", n)
	}

	// Pressure for the first three looks only (one a batch): full batches
	// after them.
	pressureFor.Store(3)
	bk := keys("b", 200)
	put(t, b, bk...)
	target = b.HighSeqnos()
	if err := c.CatchUp(ctx, target); err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(a), bk...)
	check("pressure gone", all, target, []int{10, 10, 10, 40, 40, 40, 40, 10})
	if n := c.BuildInfo().SmallBatches; n != 3 {
		t.Errorf("pressure gone: the build info counts %d small batches, want 3 (the last, of 10, was read at the full size)", n)
	}
}

// A batch size under 4 still reads at least one change a batch under
// pressure.
func TestBatchUnderPressureAtLeastOne(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t)
	s := newCountingSink(b.NumPartitions())
	c, err := feed.Start(ctx, b.Consumer("test"), feed.Sink[memBatch](s),
		feed.WithMemoryPressure(feed.Options{BatchSize: 3}, func() bool { return true }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	put(t, b, keys("k", 5)...)
	if err := c.CatchUpNow(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.take(); !slices.Equal(got, []int{1, 1, 1, 1, 1}) {
		t.Errorf("batches of %v changes, want five of 1", got)
	}
	if got := s.keys(); !slices.Equal(got, keys("k", 5)) {
		t.Errorf("the sink holds %v", got)
	}
}
