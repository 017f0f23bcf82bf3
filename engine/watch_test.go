package engine_test

import (
	"context"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestWatchSettings: a watcher is told of every settings change, in order,
// with the settings before and after; a refused change tells nothing; after
// stop, nothing more.
func TestWatchSettings(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, engine.Couchbase)
	var got [][2]int64
	stop := b.WatchSettings(func(old, updated engine.BucketSettings) {
		got = append(got, [2]int64{old.ExpPagerStime, updated.ExpPagerStime})
	})
	set := func(stime int64) error {
		_, _, err := b.UpdateSettings(ctx, func(s *engine.BucketSettings) error { s.ExpPagerStime = stime; return nil })
		return err
	}
	if err := set(10); err != nil {
		t.Fatal(err)
	}
	if err := set(20); err != nil {
		t.Fatal(err)
	}
	if err := set(-5); err == nil {
		t.Fatal("exp_pager_stime -5 accepted")
	}
	stop()
	if err := set(30); err != nil {
		t.Fatal(err)
	}
	want := [][2]int64{{3600, 10}, {10, 20}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("watcher told %v, want %v", got, want)
	}
}
