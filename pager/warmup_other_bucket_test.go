package pager_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// TestWarmingBucketDoesNotHoldOtherBucketsPagers: each bucket's expiry pager
// runs on its own schedule while another bucket is still warming up (a big
// bucket after a restart, or one whose load keeps failing and retrying). The
// warming bucket's own run and metadata purge wait for its warm-up, as the
// README says; the pager passes over it until it is warm, so the other
// buckets' runs (here "b"'s, which sorts after the held "a") keep their
// schedule, where a review found a tick waited for each bucket in turn.
func TestWarmingBucketDoesNotHoldOtherBucketsPagers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NumPartitions: 16, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	short := func(s *engine.BucketSettings) { s.ExpPagerStime = 10 }
	a := newBucket(t, eng, "a", engine.Couchbase, short)
	b := newBucket(t, eng, "b", engine.Couchbase, short)
	for i := range 10 {
		put(t, a.DefaultCollection(), "a"+string(rune('0'+i)), 0)
	}
	put(t, b.DefaultCollection(), "gone", 5)
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart as mayfly serve does, with "a"'s warm-up held at its first
	// document until the test ends.
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	eng, err = engine.Open(dir, &engine.Options{
		Clock: clk, NumPartitions: 16, NoSync: true, BackgroundWarmup: true,
		WarmupHook: func(bucket string, _ int64) {
			if bucket == "a" {
				<-release
			}
		},
	})
	if err != nil {
		free()
		t.Fatal(err)
	}
	t.Cleanup(func() { free(); eng.Close() })
	b, err = eng.Bucket("b")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WaitWarm(ctx); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, eng, nil)
	t.Cleanup(free) // runs before the manager's Close: the held tick can end
	m.Start()
	clk.Advance(11) // "b"'s document has expired and its first run is due

	deadline := time.Now().Add(15 * time.Second) // generous: a busy machine
	for b.Stats().PagerRuns == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	st := b.Stats()
	if st.PagerRuns == 0 || st.ExpiredPager != 1 || st.CurrItems != 0 {
		t.Fatalf("bucket b, warm, while bucket a warms up: ep_num_expiry_pager_runs %d, ep_expired_pager %d, curr_items %d; want its due run done: 1+, 1, 0",
			st.PagerRuns, st.ExpiredPager, st.CurrItems)
	}
}
