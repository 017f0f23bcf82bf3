package pager_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/pager"
)

const day = 86400

// TestMetadataPurge: tombstones (from deletes and from the pager) survive
// until the bucket's purgeInterval has passed on the clock, then go at the
// next purge pass; the pager's schedule does not matter.
func TestMetadataPurge(t *testing.T) {
	for _, typ := range []engine.BucketType{engine.Couchbase, engine.Ephemeral} {
		t.Run(string(typ), func(t *testing.T) {
			ctx := context.Background()
			eng, clk := newEngine(t, "")
			b := newBucket(t, eng, "b", typ, func(s *engine.BucketSettings) { s.ExpPagerStime = 0 }) // pager disabled
			c := b.DefaultCollection()
			for i := range 5 {
				put(t, c, fmt.Sprint("k", i), 0)
			}
			for i := range 3 {
				if _, err := c.Delete(ctx, fmt.Sprint("k", i), nil); err != nil {
					t.Fatal(err)
				}
			}
			var passes []int
			m := newManager(t, eng, &pager.Options{Events: &pager.Events{
				MetadataPurged: func(_ string, n int) { passes = append(passes, n) },
			}})
			wantTombs := func(n int64) {
				t.Helper()
				if st := b.Stats(); st.Tombstones != n {
					t.Fatalf("at t0+%d: %d tombstones, want %d (%+v)", clk.Now()-t0, st.Tombstones, n, st)
				}
			}

			tick(t, m) // first pass at once: nothing old enough
			wantTombs(3)
			clk.Set(t0 + 3*day - 1)
			tick(t, m) // a pass, one second too early
			wantTombs(3)
			clk.Set(t0 + 3*day + 3598)
			tick(t, m) // old enough, but the next pass is due an hour after the last
			wantTombs(3)
			clk.Set(t0 + 3*day + 3599)
			tick(t, m)
			wantTombs(0)
			if st := b.Stats(); st.MetaDataPurged != 3 || st.CurrItems != 2 {
				t.Fatalf("stats: %+v", st)
			}
			if fmt.Sprint(passes) != "[0 0 3]" {
				t.Fatalf("passes: %v", passes)
			}
		})
	}
}

// TestMetadataPurge_ExpiredAndConsumers: a tombstone left by the pager is
// purged after purgeInterval (here 0.04 days, 3456 s) — but only once every
// change-feed consumer (view index) has consumed it.
func TestMetadataPurge_ExpiredAndConsumers(t *testing.T) {
	ctx := context.Background()
	eng, clk := newEngine(t, "")
	b := newBucket(t, eng, "b", engine.Couchbase, func(s *engine.BucketSettings) {
		s.PurgeInterval = 0.04
		s.ExpPagerStime = 10
	})
	if err := b.AckChanges("view", make([]uint64, b.NumPartitions())); err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	for i := range 4 {
		put(t, c, fmt.Sprint("k", i), 5)
	}
	m := newManager(t, eng, &pager.Options{MetadataPurgePeriod: 60})
	clk.Set(t0 + 10)
	tick(t, m) // the pager expires the four
	if st := b.Stats(); st.ExpiredPager != 4 || st.Tombstones != 4 {
		t.Fatalf("after run: %+v", st)
	}
	clk.Set(t0 + 10 + 3456 + 60)
	tick(t, m)
	if st := b.Stats(); st.Tombstones != 4 {
		t.Fatalf("purged before the consumer saw them: %+v", st)
	}
	if err := b.AckChanges("view", b.HighSeqnos()); err != nil {
		t.Fatal(err)
	}
	n, err := m.PurgeMetadata(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); n != 4 || st.Tombstones != 0 || st.MetaDataPurged != 4 {
		t.Fatalf("PurgeMetadata = %d: %+v", n, st)
	}
}
