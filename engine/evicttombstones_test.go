package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// A memcached bucket frees a deleted item's memory before it evicts any
// live item, as memcached frees it at once: the tombstones of deletes and
// of a flush go first, without counting as evictions, so the items kept
// and the new ones that fit beside them all stay. A review found that a
// delete gave its tombstone a second chance (it marked the key recently
// used), so the next eviction pass took the oldest live items, and the
// new ones, first, and counted the tombstones in evictions.
func TestMemcachedBucketFreesTombstonesFirst(t *testing.T) {
	ctx := context.Background()
	b := memBucket(t, engine.Memcached, 1, "")
	c := b.DefaultCollection()
	quota := int64(1 << 20)
	n := 0
	put := func(prefix string) string {
		t.Helper()
		k := fmt.Sprintf("%s%05d", prefix, n)
		n++
		if _, err := c.Upsert(ctx, k, memValue(n), nil); err != nil {
			t.Fatalf("upsert %s: %v", k, err)
		}
		return k
	}
	var keep, gone []string
	for b.Stats().MemUsed < quota*30/100 {
		keep = append(keep, put("keep"))
	}
	for b.Stats().MemUsed < quota*80/100 {
		gone = append(gone, put("gone"))
	}
	if ev := b.Stats().Evictions; ev != 0 {
		t.Fatalf("%d evictions below the high-water mark", ev)
	}
	for _, k := range gone {
		if _, err := c.Delete(ctx, k, nil); err != nil {
			t.Fatalf("delete %s: %v", k, err)
		}
	}
	// New items take about what the deleted ones held, less a fifth: with
	// the items kept, under the low-water mark once the tombstones are
	// gone, well past the high-water mark with them.
	var fresh []string
	for range len(gone) * 4 / 5 {
		fresh = append(fresh, put("new"))
	}
	st := b.Stats()
	if st.Evictions != 0 {
		t.Errorf("evictions %d after deleting %d items and storing %d (kept %d): want 0, the tombstones freed first (mem_used %d)",
			st.Evictions, len(gone), len(fresh), len(keep), st.MemUsed)
	}
	missing := 0
	for _, k := range append(keep, fresh...) {
		if _, err := c.Get(ctx, k); err != nil {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d live items gone (%d kept, %d new) after deleting %d: want none evicted while tombstones held memory",
			missing, len(keep)+len(fresh), len(keep), len(fresh), len(gone))
	}

	// A flush leaves tombstones too: new items then have the whole quota.
	if _, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.FlushEnabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	fresh = fresh[:0]
	for range (len(keep) + len(gone)) * 2 / 3 {
		fresh = append(fresh, put("flushed"))
	}
	missing = 0
	for _, k := range fresh {
		if _, err := c.Get(ctx, k); err != nil {
			missing++
		}
	}
	if st2 := b.Stats(); missing > 0 || st2.Evictions != st.Evictions {
		t.Errorf("after a flush and %d new items: %d gone, evictions %d -> %d; want every new item kept, no eviction",
			len(fresh), missing, st.Evictions, st2.Evictions)
	}
}
