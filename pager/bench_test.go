package pager_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/pager"
)

// benchDocs is the bucket size of BenchmarkPagerRun.
const benchDocs = 1_000_000

// runFixture is a bucket of benchDocs documents, every one with an expiry,
// most of them 30 days away, so the expiry index holds them all.
type runFixture struct {
	eng *engine.Engine
	clk *engine.FakeClock
	b   *engine.Bucket
	m   *pager.Manager
}

// openFixture opens (or, with fill, creates and fills) the bench bucket in dir.
func openFixture(tb testing.TB, dir string, typ engine.BucketType, noSync, fill bool, clk *engine.FakeClock) *runFixture {
	tb.Helper()
	ctx := context.Background()
	eng, err := engine.Open(dir, &engine.Options{Clock: clk, NoSync: noSync})
	if err != nil {
		tb.Fatal(err)
	}
	f := &runFixture{eng: eng, clk: clk}
	if fill {
		s := engine.DefaultBucketSettings("bench")
		s.Type = typ
		if f.b, err = eng.CreateBucket(ctx, s); err != nil {
			tb.Fatal(err)
		}
		if err := f.upsert(0, benchDocs, engine.MaxRelativeExpiry); err != nil {
			tb.Fatal(err)
		}
	} else if f.b, err = eng.Bucket("bench"); err != nil {
		tb.Fatal(err)
	}
	if st := f.b.Stats(); st.CurrItems+st.Tombstones != benchDocs {
		tb.Fatalf("%d documents and %d tombstones, want %d in all", st.CurrItems, st.Tombstones, benchDocs)
	}
	f.m = pager.New(eng, nil) // BatchSize 1000
	return f
}

func (f *runFixture) close(tb testing.TB) {
	if err := f.m.Close(context.Background()); err != nil {
		tb.Error(err)
	}
	if err := f.eng.Close(); err != nil {
		tb.Error(err)
	}
}

// upsert writes keys [from, to) with the given expiry, from enough
// goroutines for group commit to batch them.
func (f *runFixture) upsert(from, to int, expiry int64) error {
	ctx := context.Background()
	c := f.b.DefaultCollection()
	value := []byte(`{"type":"session","user":"someone","score":1234,"level":7}`)
	workers := 2
	if f.b.Settings().Type == engine.Couchbase {
		workers = 512
	}
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(to) || failed.Load() != nil {
					return
				}
				if _, err := c.Upsert(ctx, fmt.Sprint("doc", i), value, &engine.WriteOptions{Expiry: expiry}); err != nil {
					failed.Store(&err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	return nil
}

// run measures pager runs that each find `expired` expired documents among
// benchDocs: before each (untimed), that many documents get a 1 s expiry and
// the clock moves 2 s.
func (f *runFixture) run(b *testing.B, expired int) {
	ctx := context.Background()
	purged := 0
	for b.Loop() {
		b.StopTimer()
		if err := f.upsert(0, expired, 1); err != nil {
			b.Fatal(err)
		}
		f.clk.Advance(2)
		before := f.b.Stats().CurrItems
		b.StartTimer()
		r, err := f.m.RunNow(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if after := f.b.Stats().CurrItems; r.Purged != expired || after != before-int64(expired) {
			b.Fatalf("purged %d, CurrItems %d → %d; want %d purged", r.Purged, before, after, expired)
		}
		purged += r.Purged
		b.StartTimer()
	}
	b.ReportMetric(float64(purged)/b.Elapsed().Seconds(), "docs/s")
}

// BenchmarkPagerRun: one expiry pager run over a bucket of 1,000,000
// documents of which none, 10,000 or 100,000 have expired. The run's cost
// should follow the expired count (about 10× between the last two, and next
// to nothing for the first), not the bucket size.
// Each bucket is built once: the ephemeral one in memory; the couchbase one
// on disk without fsync, then reopened with fsync for the persisted figure.
func BenchmarkPagerRun(b *testing.B) {
	if testing.Short() {
		b.Skip("builds 1,000,000-document buckets")
	}
	sizes := []int{0, 10_000, 100_000} // 0: what a run costs when nothing has expired
	runSizes := func(b *testing.B, f *runFixture) {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("expired=%d", n), func(b *testing.B) { f.run(b, n) })
		}
	}
	b.Run("ephemeral", func(b *testing.B) {
		f := openFixture(b, b.TempDir(), engine.Ephemeral, true, true, engine.NewFakeClock(t0))
		defer f.close(b)
		runSizes(b, f)
	})
	b.Run("couchbase", func(b *testing.B) {
		dir, clk := b.TempDir(), engine.NewFakeClock(t0)
		f := openFixture(b, dir, engine.Couchbase, true, true, clk)
		b.Run("nosync", func(b *testing.B) { runSizes(b, f) })
		f.close(b)
		f = openFixture(b, dir, engine.Couchbase, false, false, clk)
		defer f.close(b)
		b.Run("fsync", func(b *testing.B) { runSizes(b, f) })
	})
}
