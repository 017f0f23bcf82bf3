package cbstats_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/cbstats"
	"github.com/mayflydb/mayfly/pager"
)

// A bucket's statistics carry the engine's counters and the settings under
// cbstats names; the pager's only when it knows the bucket; every memory
// group name is among them.
func TestBucket(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	set := engine.DefaultBucketSettings("b")
	set.MaxTTL = 600
	b, err := eng.CreateBucket(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.DefaultCollection().Upsert(ctx, "k", []byte(`{}`), &engine.WriteOptions{Expiry: 60}); err != nil {
		t.Fatal(err)
	}
	st := cbstats.Bucket(b, nil)
	if st["curr_items"] != 1 || st["ep_items_with_expiry"] != 1 || st["ep_max_ttl"] != 600 || st["ep_max_size"] != set.RAMQuotaMB<<20 {
		t.Fatalf("stats %v", st)
	}
	if _, ok := st["ep_expiry_pager_next_run"]; ok {
		t.Fatal("pager statistics without a pager")
	}
	for _, n := range cbstats.Memory {
		if _, ok := st[n]; !ok {
			t.Errorf("memory statistic %s missing", n)
		}
	}
	st = cbstats.Bucket(b, func(string) (pager.Stats, error) { return pager.Stats{LastRunDurationMS: 3, NextRun: 99}, nil })
	if st["ep_pager_last_run_duration_ms"] != 3 || st["ep_expiry_pager_next_run"] != 99 {
		t.Fatalf("pager statistics %v", st)
	}
	st = cbstats.Bucket(b, func(string) (pager.Stats, error) { return pager.Stats{}, errors.New("unknown bucket") })
	if _, ok := st["ep_expiry_pager_next_run"]; ok {
		t.Fatal("pager statistics from a pager that does not know the bucket")
	}
}
