package feed_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/feed"
)

// hang is how long a test waits for something that must happen before it
// calls it a hang: generous, for a busy machine; never a speed limit.
const hang = 2 * time.Minute

const t0 = 1_700_000_000

// newBucket returns a persistent bucket of a fresh engine with a fake clock.
func newBucket(t *testing.T) (*engine.Bucket, *engine.FakeClock) {
	t.Helper()
	_, b, clk := newEngine(t)
	return b, clk
}

// newEngine returns a fresh engine with a fake clock and its one bucket.
func newEngine(t *testing.T) (*engine.Engine, *engine.Bucket, *engine.FakeClock) {
	t.Helper()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(t.TempDir(), &engine.Options{Clock: clk, NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := eng.Close(); err != nil {
			t.Error(err)
		}
	})
	b, err := eng.CreateBucket(context.Background(), engine.BucketSettings{Name: "b", Type: engine.Couchbase})
	if err != nil {
		t.Fatal(err)
	}
	return eng, b, clk
}

func put(t *testing.T, b *engine.Bucket, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, err := b.DefaultCollection().Upsert(context.Background(), k, []byte(`{"k":"`+k+`"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// memSink keeps the live documents it was given, by key, and records what
// the consumer asked of it.
type memSink struct {
	mu      sync.Mutex
	uuid    uint64
	seqs    []uint64
	docs    map[string]string
	parts   map[string]int // the partition of each of docs
	resets  int
	rewound [][]int // the partitions of each Rewind
	// prepareHook and applyHook, when set, run at the start of each
	// Prepare and Apply.
	prepareHook func(ctx context.Context) error
	applyHook   func(ctx context.Context, next []uint64, durable func()) (handled bool, err error)
}

func newMemSink(n int) *memSink {
	return &memSink{seqs: make([]uint64, n), docs: map[string]string{}, parts: map[string]int{}}
}

func (s *memSink) Position() (uint64, []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uuid, slices.Clone(s.seqs)
}

func (s *memSink) Reset(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seqs = make([]uint64, len(s.seqs))
	s.docs = map[string]string{}
	s.parts = map[string]int{}
	s.resets++
	return nil
}

func (s *memSink) Rewind(ctx context.Context, parts []int, durable func()) error {
	s.mu.Lock()
	defer durable()
	defer s.mu.Unlock()
	for k, p := range s.parts {
		if slices.Contains(parts, p) {
			delete(s.docs, k)
			delete(s.parts, k)
		}
	}
	for _, p := range parts {
		s.seqs[p] = 0
	}
	s.rewound = append(s.rewound, slices.Clone(parts))
	return nil
}

func (s *memSink) Follow(uuid uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uuid = uuid
	return nil
}

type memBatch map[string]*memDoc

type memDoc struct {
	value string
	part  int
}

func (s *memSink) Prepare(ctx context.Context, changes iter.Seq[*engine.Document], p *feed.Progress) (memBatch, int, error) {
	if s.prepareHook != nil {
		if err := s.prepareHook(ctx); err != nil {
			return nil, 0, err
		}
	}
	out := memBatch{}
	for d := range changes {
		if d.Deleted {
			out[d.Key] = nil
			continue
		}
		out[d.Key] = &memDoc{string(d.Value), int(d.Partition)}
	}
	return out, len(out), nil
}

func (s *memSink) Apply(ctx context.Context, batch memBatch, next []uint64, durable func()) error {
	s.mu.Lock()
	for k, v := range batch {
		if v == nil {
			delete(s.docs, k)
			delete(s.parts, k)
		} else {
			s.docs[k], s.parts[k] = v.value, v.part
		}
	}
	s.seqs = slices.Clone(next)
	s.mu.Unlock()
	if s.applyHook != nil {
		if handled, err := s.applyHook(ctx, next, durable); handled || err != nil {
			return err
		}
	}
	durable()
	return nil
}

func (s *memSink) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.docs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func start(t *testing.T, b *engine.Bucket, s *memSink, opts feed.Options) *feed.Consumer[memBatch] {
	t.Helper()
	c, err := feed.Start(context.Background(), b.Consumer("test"), feed.Sink[memBatch](s), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	slices.Sort(out)
	return out
}

// A catch-up to a target brings the sink to at least that position, in
// batches, and the sink then holds every document written before it.
func TestCatchUpToTarget(t *testing.T) {
	b, _ := newBucket(t)
	s := newMemSink(b.NumPartitions())
	c := start(t, b, s, feed.Options{BatchSize: 7})
	first := keys("a", 50)
	put(t, b, first...)
	target := b.HighSeqnos()
	put(t, b, keys("b", 20)...) // after the target: may or may not be seen
	if err := c.CatchUp(context.Background(), target); err != nil {
		t.Fatal(err)
	}
	if _, seqs := s.Position(); !feed.Reached(seqs, target) {
		t.Fatalf("position %v short of target %v", seqs, target)
	}
	got := s.keys()
	for _, k := range first {
		if !slices.Contains(got, k) {
			t.Fatalf("document %s written before the target is missing", k)
		}
	}
	// Caught up to now: everything, and nothing pending.
	if err := c.CatchUpNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(first), keys("b", 20)...); !slices.Equal(s.keys(), want) {
		t.Fatalf("sink holds %v, want %v", s.keys(), want)
	}
	if p := c.Pending(); p != 0 {
		t.Fatalf("%d changes pending after a catch-up to now", p)
	}
	// A deletion leaves the sink.
	if _, err := b.DefaultCollection().Delete(context.Background(), first[0], nil); err != nil {
		t.Fatal(err)
	}
	if err := c.CatchUpNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(s.keys(), first[0]) {
		t.Fatal("a deleted document stayed in the sink")
	}
	if bi := c.BuildInfo(); bi.Building || bi.ToIndex != 0 {
		t.Fatalf("build info after catching up: %+v", bi)
	}
}

// A sink whose position the bucket no longer holds is reset and rebuilt
// from the start of the feed.
func TestRollbackResetsAndRebuilds(t *testing.T) {
	b, _ := newBucket(t)
	put(t, b, keys("k", 30)...)
	s := newMemSink(b.NumPartitions())
	s.uuid = 12345 // a history the bucket never had
	for i := range s.seqs {
		s.seqs[i] = 1_000_000
	}
	s.docs["ghost"] = "from another history"
	c := start(t, b, s, feed.Options{})
	if !c.RolledBack() || s.resets != 1 {
		t.Fatalf("rolled back %v, %d resets; want a reset", c.RolledBack(), s.resets)
	}
	if uuid, _ := s.Position(); uuid != b.UUID() {
		t.Fatalf("sink follows history %d, the bucket's is %d", uuid, b.UUID())
	}
	if err := c.CatchUpNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.keys(); !slices.Equal(got, keys("k", 30)) {
		t.Fatalf("after the rebuild the sink holds %v", got)
	}

	// A sink at a position the bucket holds is kept as it is.
	s2 := newMemSink(b.NumPartitions())
	s2.uuid, s2.seqs = b.UUID(), b.HighSeqnos()
	c2, err := feed.Start(context.Background(), b.Consumer("kept"), feed.Sink[memBatch](s2), feed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	if c2.RolledBack() || s2.resets != 0 {
		t.Fatalf("a held position was reset")
	}
}

// The bucket learns only positions the sink holds durably: a tombstone the
// sink has applied but not yet made durable is not purged; once durable,
// it is.
func TestAckOnlyDurablePositions(t *testing.T) {
	b, clk := newBucket(t)
	put(t, b, "keep", "gone")
	s := newMemSink(b.NumPartitions())
	var mu sync.Mutex
	var held []func()
	s.applyHook = func(ctx context.Context, next []uint64, durable func()) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, durable) // durable later, as a sink writing in the background
		return true, nil
	}
	c := start(t, b, s, feed.Options{})
	if _, err := b.DefaultCollection().Delete(context.Background(), "gone", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.CatchUpNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(s.keys(), "gone") {
		t.Fatal("the sink did not apply the deletion")
	}
	clk.Advance(30 * 86400)
	purge := func() int {
		n, _, err := b.PurgeTombstones(context.Background(), clk.Now(), 100)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := purge(); n != 0 {
		t.Fatalf("purged %d tombstones the sink has applied but not made durable", n)
	}
	mu.Lock()
	for _, d := range held {
		d()
	}
	mu.Unlock()
	if n := purge(); n != 1 {
		t.Fatalf("purged %d tombstones once the position is durable, want 1", n)
	}
}

// A paused consumer (being replaced) acknowledges nothing, so the purge waits.
func TestPausedAcks(t *testing.T) {
	b, clk := newBucket(t)
	put(t, b, "gone")
	s := newMemSink(b.NumPartitions())
	c := start(t, b, s, feed.Options{})
	c.PauseAcks(true)
	if _, err := b.DefaultCollection().Delete(context.Background(), "gone", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.CatchUpNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * 86400)
	if n, _, err := b.PurgeTombstones(context.Background(), clk.Now(), 100); err != nil || n != 0 {
		t.Fatalf("purged %d (%v) while the consumer's acknowledgements were paused", n, err)
	}
}

// Stopping a consumer in the middle of a build returns, and ends the
// catch-ups callers started, however much is left to do.
func TestStopWhileBuilding(t *testing.T) {
	b, _ := newBucket(t)
	put(t, b, keys("k", 200)...)
	s := newMemSink(b.NumPartitions())
	preparing := make(chan struct{}, 1)
	s.prepareHook = func(ctx context.Context) error {
		select {
		case preparing <- struct{}{}:
		default:
		}
		<-ctx.Done() // a slow batch: runs until told to stop
		return ctx.Err()
	}
	c, err := feed.Start(context.Background(), b.Consumer("test"), feed.Sink[memBatch](s), feed.Options{Auto: true, BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	caller := make(chan error, 1)
	go func() { caller <- c.CatchUpNow(context.Background()) }()
	select {
	case <-preparing:
	case <-time.After(hang):
		t.Fatal("no batch was prepared")
	}
	stopped := make(chan struct{})
	go func() { c.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(hang):
		t.Fatal("Stop hung while a build ran")
	}
	select {
	case err := <-caller:
		if !errors.Is(err, feed.ErrStopped) {
			t.Fatalf("a caller's catch-up ended with %v, want ErrStopped", err)
		}
	case <-time.After(hang):
		t.Fatal("a caller's catch-up did not end with the consumer")
	}
	if err := c.CatchUpNow(context.Background()); !errors.Is(err, feed.ErrStopped) {
		t.Fatalf("catch-up after Stop: %v, want ErrStopped", err)
	}
}

// The next batch is prepared while the previous one is being applied.
func TestPrepareOverlapsApply(t *testing.T) {
	b, _ := newBucket(t)
	put(t, b, keys("k", 40)...)
	s := newMemSink(b.NumPartitions())
	var mu sync.Mutex
	prepares := 0
	secondPrepared := make(chan struct{})
	s.prepareHook = func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		prepares++
		if prepares == 2 {
			close(secondPrepared)
		}
		return nil
	}
	applies := 0
	s.applyHook = func(ctx context.Context, next []uint64, durable func()) (bool, error) {
		applies++
		if applies == 1 { // the first apply waits for the second prepare
			select {
			case <-secondPrepared:
			case <-time.After(hang):
				return true, errors.New("the second batch was not prepared while the first was applied")
			}
		}
		return false, nil
	}
	c := start(t, b, s, feed.Options{BatchSize: 5})
	if err := c.CatchUpNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.keys(); len(got) != 40 {
		t.Fatalf("sink holds %d documents, want 40", len(got))
	}
}

// A follower catches up on its own as documents are written.
func TestFollow(t *testing.T) {
	b, _ := newBucket(t)
	s := newMemSink(b.NumPartitions())
	start(t, b, s, feed.Options{Auto: true})
	put(t, b, keys("k", 25)...)
	deadline := time.Now().Add(hang)
	for len(s.keys()) != 25 {
		if time.Now().After(deadline) {
			t.Fatalf("the follower holds %d of 25 documents", len(s.keys()))
		}
		time.Sleep(time.Millisecond)
	}
}

// A failed catch-up is reported and retried by the follower.
func TestFollowRetries(t *testing.T) {
	b, _ := newBucket(t)
	s := newMemSink(b.NumPartitions())
	var mu sync.Mutex
	failures := 0
	s.prepareHook = func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if failures < 2 {
			failures++
			return errors.New("disk hiccup")
		}
		return nil
	}
	var reported []error
	var rmu sync.Mutex
	put(t, b, keys("k", 5)...)
	start(t, b, s, feed.Options{Auto: true, RetryDelay: time.Millisecond, OnError: func(err error) {
		rmu.Lock()
		reported = append(reported, err)
		rmu.Unlock()
	}})
	deadline := time.Now().Add(hang)
	for len(s.keys()) != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the follower holds %d of 5 documents after failures", len(s.keys()))
		}
		time.Sleep(time.Millisecond)
	}
	rmu.Lock()
	defer rmu.Unlock()
	if len(reported) != 2 {
		t.Fatalf("%d failures reported, want 2", len(reported))
	}
}

// A running follower whose bucket drops a partition's copy forgets that
// partition's documents without being asked (the drop wakes it), keeps the
// others', and follows the copy when it joins again from sequence number 0:
// it then holds exactly the partition's new documents, though their
// sequence numbers are below where it was in the partition before.
func TestFollowDroppedPartition(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t)
	s := newMemSink(b.NumPartitions())
	c := start(t, b, s, feed.Options{Auto: true})
	all := keys("k", 60)
	put(t, b, all...)
	for range 3 { // many changes in every partition: a high seqno
		put(t, b, all...)
	}
	if err := c.CatchUpNow(ctx); err != nil {
		t.Fatal(err)
	}
	const part = 3
	var kept, dropped []string
	for _, k := range all {
		if b.PartitionOf(k) == part {
			dropped = append(dropped, k)
		} else {
			kept = append(kept, k)
		}
	}
	if len(dropped) == 0 {
		t.Fatal("no key in the partition")
	}
	if err := b.DropPartition(ctx, part); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(hang)
	for !slices.Equal(s.keys(), kept) {
		if time.Now().After(deadline) {
			t.Fatalf("after the drop the follower holds %d documents, want the %d of the other partitions", len(s.keys()), len(kept))
		}
		time.Sleep(time.Millisecond)
	}
	if uuid, seqs := s.Position(); uuid != b.UUID() || seqs[part] != 0 {
		t.Errorf("after the drop: history %d, partition at %d; want %d, 0", uuid, seqs[part], b.UUID())
	}
	// The copy joins again: two documents, at sequence numbers 1 and 2.
	back := dropped[:2]
	put(t, b, back...)
	if err := c.CatchUpNow(ctx); err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(append(slices.Clone(kept), back...)))
	if got := s.keys(); !slices.Equal(got, want) {
		t.Errorf("after the copy joined again the sink holds %v, want %v", got, want)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resets != 0 || len(s.rewound) != 1 || !slices.Equal(s.rewound[0], []int{part}) {
		t.Errorf("%d resets, rewinds %v; want only partition %d rewound", s.resets, s.rewound, part)
	}
}

// A running consumer whose history the bucket no longer knows at all
// rewinds every partition it saw and reads the feed again.
func TestFollowUnknownHistory(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t)
	s := newMemSink(b.NumPartitions())
	c := start(t, b, s, feed.Options{})
	put(t, b, keys("k", 20)...)
	if err := c.CatchUpNow(ctx); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.uuid = 12345 // a history the bucket never had
	s.docs["ghost"], s.parts["ghost"] = "from another history", b.PartitionOf("ghost")
	s.mu.Unlock()
	if err := c.CatchUpNow(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.keys(); !slices.Equal(got, keys("k", 20)) {
		t.Errorf("the sink holds %v", got)
	}
	if uuid, _ := s.Position(); uuid != b.UUID() {
		t.Errorf("the sink follows history %d, the bucket's is %d", uuid, b.UUID())
	}
}
