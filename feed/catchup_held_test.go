package feed_test

import (
	"context"
	"iter"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/feed"
)

// quietSink is a memSink whose Quiet (feed.Quieter) blocks until released,
// as a paged view index's write-back after a build takes its time with the
// right to change the sink held.
type quietSink struct {
	*memSink
	quieting chan struct{} // receives once a Quiet has started
	release  chan struct{} // closed to let the Quiets return
}

func newQuietSink(n int) *quietSink {
	return &quietSink{memSink: newMemSink(n), quieting: make(chan struct{}, 1), release: make(chan struct{})}
}

func (s *quietSink) Quiet(ctx context.Context) error {
	select {
	case s.quieting <- struct{}{}:
	default:
	}
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startSink starts a consumer of b over s (without Options.Auto, its
// follower catches up only when asked), stopped when the test ends.
func startSink(t *testing.T, b *engine.Bucket, s feed.Sink[memBatch], opts feed.Options) *feed.Consumer[memBatch] {
	t.Helper()
	c, err := feed.Start(context.Background(), b.Consumer("test"), s, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// catchUpAsync runs c.CatchUp(ctx, target) on its own goroutine and returns
// the channel its error comes on.
func catchUpAsync(c *feed.Consumer[memBatch], target []uint64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- c.CatchUp(context.Background(), target) }()
	return done
}

// await waits for ch (a hang after hang), reporting what as not done.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hang):
		t.Fatalf("%s: not done after %v", what, hang)
		var zero T
		return zero
	}
}

// blockedInQuiet starts a build's catch-up of c (over s, whose documents
// keys were written before target) and returns once it holds the right to
// change the sink in a Quiet that blocks until s.release is closed, with
// target applied. It returns the build's result channel.
func blockedInQuiet(t *testing.T, c *feed.Consumer[memBatch], s *quietSink, target []uint64, keys []string) <-chan error {
	t.Helper()
	build := catchUpAsync(c, target)
	await(t, s.quieting, "the build's Quiet")
	if got := s.keys(); !slices.Equal(got, keys) {
		t.Fatalf("the build applied %v, want %v", got, keys)
	}
	return build
}

// withWaits returns opts with a wait hook (feed.WithWaitHook) and the
// channel it reports on: each time a catch-up to a target is about to wait
// for the right to change the sink while another holds it, whether the
// sink then held the target.
func withWaits(opts feed.Options) (feed.Options, <-chan bool) {
	waits := make(chan bool, 64)
	return feed.WithWaitHook(opts, func(held bool) {
		select {
		case waits <- held:
		default:
		}
	}), waits
}

// drain empties ch.
func drain[T any](ch <-chan T) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// waitsForQuiet runs a catch-up of c to target that must wait for the
// Quiet s holds (it reaches the wait, waits reporting on c's wait hook,
// and has not returned), then lets the Quiet end and waits for the build
// and for that catch-up; what names the catch-up.
func waitsForQuiet(t *testing.T, c *feed.Consumer[memBatch], s *quietSink, waits <-chan bool, build <-chan error, target []uint64, what string) {
	t.Helper()
	drain(waits)
	waiting := catchUpAsync(c, target)
	await(t, waits, what+" waiting for the right to change the sink")
	select {
	case err := <-waiting:
		t.Fatalf("%s returned (%v) while the Quiet held the sink", what, err)
	default:
	}
	close(s.release)
	if err := await(t, build, "the build"); err != nil {
		t.Fatal(err)
	}
	if err := await(t, waiting, what+", after the Quiet"); err != nil {
		t.Fatal(err)
	}
}

// A catch-up to a target the sink already holds returns while a Quiet
// (the write-back that ends a build, with the right to change the sink
// held) is still running, and the sink then holds every change up to the
// target; one whose target the sink lacks waits for the Quiet and then
// applies what it lacks.
func TestCatchUpHeldTargetDoesNotWaitForQuiet(t *testing.T) {
	b, _ := newBucket(t)
	s := newQuietSink(b.NumPartitions())
	opts, waits := withWaits(feed.Options{BuildQuietDocs: 1})
	c := startSink(t, b, s, opts) // every catch-up that applies a document ends with Quiet
	first := keys("a", 30)
	put(t, b, first...)
	target := b.HighSeqnos()
	build := blockedInQuiet(t, c, s, target, first)

	if err := await(t, catchUpAsync(c, target), "a catch-up to a target the sink holds, during a Quiet"); err != nil {
		t.Fatal(err)
	}
	if err := await(t, catchUpAsync(c, b.HighSeqnos()), "a catch-up to now (nothing written since), during a Quiet"); err != nil {
		t.Fatal(err)
	}
	if got := s.keys(); !slices.Equal(got, first) {
		t.Fatalf("after the catch-ups the sink holds %v, want %v", got, first)
	}

	// A change the sink lacks: that catch-up waits for the Quiet, then
	// applies it.
	put(t, b, "late")
	waitsForQuiet(t, c, s, waits, build, b.HighSeqnos(), "a catch-up to a target the sink lacks")
	if got, want := s.keys(), append(slices.Clone(first), "late"); !slices.Equal(got, want) {
		t.Fatalf("after a catch-up to a target the sink lacked it holds %v, want %v", got, want)
	}
}

// gateSink is a memSink whose second Apply waits at a gate before it
// applies, as a slow batch of a catch-up in progress.
type gateSink struct {
	*memSink
	applies atomic.Int32  // Applies started
	gated   chan struct{} // receives once the second Apply waits
	gate    chan struct{} // closed to let it go on
}

func (s *gateSink) Apply(ctx context.Context, batch memBatch, next []uint64, durable func()) error {
	if s.applies.Add(1) == 2 {
		s.gated <- struct{}{}
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.memSink.Apply(ctx, batch, next, durable)
}

// A catch-up to a target the sink holds returns while another catch-up is
// in progress (holding the right to change the sink, in the middle of its
// batches), and the sink then holds every document up to that target.
func TestCatchUpHeldTargetDuringCatchUp(t *testing.T) {
	b, _ := newBucket(t)
	s := &gateSink{memSink: newMemSink(b.NumPartitions()), gated: make(chan struct{}, 1), gate: make(chan struct{})}
	c := startSink(t, b, s, feed.Options{BatchSize: 5})
	all := keys("k", 40)
	put(t, b, all...)
	running := catchUpAsync(c, b.HighSeqnos())
	await(t, s.gated, "the second batch's Apply")
	_, first := s.Position() // where the first batch took the sink
	held := s.keys()
	if len(held) == 0 {
		t.Fatal("the first batch applied nothing")
	}
	if err := await(t, catchUpAsync(c, first), "a catch-up to the first batch's position, the second one being applied"); err != nil {
		t.Fatal(err)
	}
	if got := s.keys(); !slices.Equal(got, held) {
		t.Fatalf("the sink holds %v, want the first batch's %v", got, held)
	}
	close(s.gate)
	if err := await(t, running, "the catch-up to the end"); err != nil {
		t.Fatal(err)
	}
	if got := s.keys(); !slices.Equal(got, all) {
		t.Fatalf("the sink holds %v, want %v", got, all)
	}
}

// A catch-up whose target the sink's position seems to reach, but in a
// history the bucket has left (a partition's copy dropped), does not
// return without the right to change the sink: it waits for the Quiet
// that holds it, then brings the sink into the bucket's history (the
// dropped partition's documents leave it) before it returns.
func TestCatchUpOtherHistoryWaits(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t)
	s := newQuietSink(b.NumPartitions())
	opts, waits := withWaits(feed.Options{BuildQuietDocs: 1})
	c := startSink(t, b, s, opts)
	all := keys("k", 60)
	for range 4 { // many changes in every partition: a high seqno
		put(t, b, all...)
	}
	build := blockedInQuiet(t, c, s, b.HighSeqnos(), all)
	const part = 3
	var kept []string
	for _, k := range all {
		if b.PartitionOf(k) != part {
			kept = append(kept, k)
		}
	}
	if len(kept) == len(all) {
		t.Fatal("no key in the partition")
	}
	if err := b.DropPartition(ctx, part); err != nil {
		t.Fatal(err)
	}
	target := b.HighSeqnos()
	if uuid, seqs := s.Position(); uuid == b.UUID() || !feed.Reached(seqs, target) {
		t.Fatalf("the sink at %v in history %d: want the bucket's target %v apparently reached in another history than %d", seqs, uuid, target, b.UUID())
	}
	waitsForQuiet(t, c, s, waits, build, target, "a catch-up from a position of a history the bucket left")
	if got := s.keys(); !slices.Equal(got, kept) {
		t.Errorf("after the catch-up the sink holds %d documents, want the %d of the other partitions", len(got), len(kept))
	}
	if uuid, _ := s.Position(); uuid != b.UUID() {
		t.Errorf("the sink follows history %d, the bucket's is %d", uuid, b.UUID())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rewound) != 1 || !slices.Equal(s.rewound[0], []int{part}) {
		t.Errorf("rewinds %v; want partition %d rewound", s.rewound, part)
	}
}

// dueSink is a quietSink with work to do before a catch-up
// (feed.BeforeCatchUp) while due is set.
type dueSink struct {
	*quietSink
	due    atomic.Bool
	before atomic.Int32 // BeforeCatchUp calls
}

func (s *dueSink) BeforeCatchUpDue() bool { return s.due.Load() }

func (s *dueSink) BeforeCatchUp(ctx context.Context, ack func([]uint64) error) error {
	s.before.Add(1)
	s.due.Store(false)
	return nil
}

// A catch-up to a target the sink holds returns during a Quiet only when
// the sink has nothing to do before a catch-up (feed.BeforeCatchUp); when
// it has, the catch-up waits for the right to change the sink and does it.
func TestCatchUpHeldTargetBeforeCatchUpDue(t *testing.T) {
	b, _ := newBucket(t)
	s := &dueSink{quietSink: newQuietSink(b.NumPartitions())}
	opts, waits := withWaits(feed.Options{BuildQuietDocs: 1})
	c := startSink(t, b, s, opts)
	put(t, b, keys("k", 20)...)
	target := b.HighSeqnos()
	build := blockedInQuiet(t, c, s.quietSink, target, keys("k", 20))
	if n := s.before.Load(); n != 1 {
		t.Fatalf("%d BeforeCatchUp calls by the build, want 1", n)
	}
	if err := await(t, catchUpAsync(c, target), "a catch-up to a target the sink holds, nothing due"); err != nil {
		t.Fatal(err)
	}
	s.due.Store(true)
	waitsForQuiet(t, c, s.quietSink, waits, build, target, "a catch-up with work due before it")
	if n := s.before.Load(); n != 2 || s.due.Load() {
		t.Fatalf("%d BeforeCatchUp calls (due %v), want 2: the build's and the one due", n, s.due.Load())
	}
}

// pausedSink is a quietSink whose first Applies each wait at a gate before
// they apply, and whose Position reports its calls, once it has read the
// position, while watched.
type pausedSink struct {
	*quietSink
	applies   atomic.Int32
	applying  chan []uint64   // receives the position of each gated Apply's batch as it waits
	gates     []chan struct{} // the i-th Apply waits until gates[i] is closed
	watch     atomic.Bool     // Position reports to positions while set
	positions chan struct{}
}

func newPausedSink(n, gated int) *pausedSink {
	s := &pausedSink{quietSink: newQuietSink(n), applying: make(chan []uint64, gated), positions: make(chan struct{}, 1)}
	for range gated {
		s.gates = append(s.gates, make(chan struct{}))
	}
	return s
}

func (s *pausedSink) Position() (uint64, []uint64) {
	uuid, seqs := s.memSink.Position()
	if s.watch.Load() { // reported once read: the look has seen this position
		select {
		case s.positions <- struct{}{}:
		default:
		}
	}
	return uuid, seqs
}

func (s *pausedSink) Apply(ctx context.Context, batch memBatch, next []uint64, durable func()) error {
	if i := int(s.applies.Add(1)) - 1; i < len(s.gates) {
		s.applying <- slices.Clone(next)
		select {
		case <-s.gates[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.memSink.Apply(ctx, batch, next, durable)
}

// waiterOnFirstBatch starts a catch-up of c to the end of the feed (40
// documents, in batches of 5) over s, and a second catch-up to the first
// batch's position once the first batch's Apply waits at its gate, the
// second one having looked at the sink's position (it lacks its target:
// it waits). It returns both catch-ups' result channels.
func waiterOnFirstBatch(t *testing.T, b *engine.Bucket, c *feed.Consumer[memBatch], s *pausedSink) (running, waiter <-chan error) {
	t.Helper()
	put(t, b, keys("k", 40)...)
	running = catchUpAsync(c, b.HighSeqnos())
	first := await(t, s.applying, "the first batch's Apply")
	s.watch.Store(true)
	waiter = catchUpAsync(c, first)
	await(t, s.positions, "the second catch-up's look at the sink")
	return running, waiter
}

// A catch-up whose target the sink lacks, while another catch-up runs,
// returns once that catch-up has applied a batch that takes the sink to
// the target, without waiting for it to end (a stale=false query under a
// steady stream of writes, the follower's catch-up never finding the feed
// empty), and the sink then holds every document of that batch.
func TestCatchUpWaiterReturnsOnceABatchHoldsItsTarget(t *testing.T) {
	b, _ := newBucket(t)
	s := newPausedSink(b.NumPartitions(), 2)
	c := startSink(t, b, s, feed.Options{BatchSize: 5})
	running, waiter := waiterOnFirstBatch(t, b, c, s)
	close(s.gates[0])
	await(t, s.applying, "the second batch's Apply")
	if err := await(t, waiter, "a catch-up to the first batch's position, the second batch's Apply waiting"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-running:
		t.Fatalf("the catch-up to the end returned (%v) with its second batch waiting", err)
	default:
	}
	if n := len(s.keys()); n != 5 {
		t.Fatalf("the sink holds %d documents when the waiter returns, want the first batch's 5", n)
	}
	close(s.gates[1])
	if err := await(t, running, "the catch-up to the end"); err != nil {
		t.Fatal(err)
	}
	if got, want := s.keys(), keys("k", 40); !slices.Equal(got, want) {
		t.Fatalf("the sink holds %v, want %v", got, want)
	}
}

// A catch-up that waits on a build (one that has applied
// Options.BuildQuietDocs documents, and ends with the sink's Quiet) does
// not return when a batch takes the sink to its target: it waits for the
// build's Quiet, as the requests right after a build want the build's
// write-back done.
func TestCatchUpWaiterWaitsForABuildsQuiet(t *testing.T) {
	b, _ := newBucket(t)
	s := newPausedSink(b.NumPartitions(), 2)
	opts, waits := withWaits(feed.Options{BatchSize: 5, BuildQuietDocs: 5})
	c := startSink(t, b, s, opts) // the first batch makes it a build
	running, waiter := waiterOnFirstBatch(t, b, c, s)
	close(s.gates[0])
	await(t, s.applying, "the second batch's Apply")
	// The waiter sees the first batch hold its target, and waits on.
	for !await(t, waits, "the waiter waiting on with its target held") {
	}
	close(s.gates[1])
	await(t, s.quieting, "the build's Quiet")
	select {
	case err := <-waiter:
		t.Fatalf("a catch-up to the first batch's position returned (%v) before the build's Quiet ended", err)
	default:
	}
	close(s.release)
	if err := await(t, running, "the build"); err != nil {
		t.Fatal(err)
	}
	if err := await(t, waiter, "a catch-up to the first batch's position, after the build"); err != nil {
		t.Fatal(err)
	}
	if got, want := s.keys(), keys("k", 40); !slices.Equal(got, want) {
		t.Fatalf("the sink holds %v, want %v", got, want)
	}
}

// prepGatedSink is a pausedSink (no Apply gated) whose second Prepare
// waits at a gate before it reads its changes (the feed as it stands when
// the gate opens).
type prepGatedSink struct {
	*pausedSink
	prepares atomic.Int32
	waiting  chan struct{} // receives once the second Prepare waits
	gate     chan struct{} // closed to let it read
}

func (s *prepGatedSink) Prepare(ctx context.Context, changes iter.Seq[*engine.Document], p *feed.Progress) (memBatch, int, error) {
	if s.prepares.Add(1) == 2 {
		s.waiting <- struct{}{}
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	return s.memSink.Prepare(ctx, changes, p)
}

// A catch-up that started with a backlog under Options.BuildQuietDocs
// changes is no build, however many documents writes made meanwhile take
// it through (a follower's catch-up under a steady stream of writes): a
// catch-up waiting on it returns once a batch holds its target, before the
// Quiet the long catch-up ends with.
func TestCatchUpWaiterOnALongCatchUpThatStartedSmall(t *testing.T) {
	b, _ := newBucket(t)
	s := &prepGatedSink{pausedSink: newPausedSink(b.NumPartitions(), 0), waiting: make(chan struct{}, 1), gate: make(chan struct{})}
	c := startSink(t, b, s, feed.Options{BatchSize: 5, BuildQuietDocs: 10})
	put(t, b, keys("a", 5)...) // a backlog of 5 changes
	running := catchUpAsync(c, nil)
	await(t, s.waiting, "the second batch's Prepare")
	put(t, b, keys("b", 35)...) // the feed grows under the catch-up: 40 documents, past BuildQuietDocs
	target := b.HighSeqnos()
	s.watch.Store(true)
	waiter := catchUpAsync(c, target)
	await(t, s.positions, "the waiting catch-up's look at the sink") // it lacks its target: it waits
	close(s.gate)
	await(t, s.quieting, "the long catch-up's Quiet") // it applied its 40 documents
	if err := await(t, waiter, "a catch-up to the feed's end, the long catch-up in its Quiet"); err != nil {
		t.Fatal(err)
	}
	if got, want := len(s.keys()), 40; got != want {
		t.Fatalf("the sink holds %d documents when the waiter returns, want %d", got, want)
	}
	close(s.release)
	if err := await(t, running, "the long catch-up"); err != nil {
		t.Fatal(err)
	}
}
