package main

import (
	"context"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/cbstats"
)

// `mayfly stats warmup` prints the warmup group as cbstats warmup, the
// memcached port's "stats warmup" and GET .../stats/warmup give it: a
// bucket whose store count is not estimated (a memcached bucket: no store
// to count) shows "unknown" for both
// estimates, never the numeric statistics' -1 placeholder. The command
// takes the group's names from the words endpoint but their values from the
// numeric statistics first, so a review found it printed
// ep_warmup_estimated_key_count -1 beside ep_warmup_estimated_value_count
// unknown.
func TestStatsWarmupGroupAsCbstats(t *testing.T) {
	f := cliServer(t)
	set := engine.DefaultBucketSettings("cache")
	set.Type = engine.Memcached
	cache, err := f.eng.CreateBucket(context.Background(), set)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, l := range cbstats.Warmup(cache.WarmupStats()) {
		want[l[0]] = l[1]
	}
	if want["ep_warmup_estimated_key_count"] != "unknown" {
		t.Skipf("the fixture's bucket has an estimate (%q): nothing to compare", want["ep_warmup_estimated_key_count"])
	}
	r := f.mf("", "stats", "warmup", "-b", "cache")
	if r.code != 0 {
		t.Fatalf("stats warmup: %v", r)
	}
	for _, line := range strings.Split(strings.TrimSpace(r.out), "\n") {
		name, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			t.Fatalf("stats warmup line %q", line)
		}
		val = strings.TrimSpace(val)
		if w, ok := want[name]; ok && w != val && name != "ep_warmup_time" {
			t.Errorf("stats warmup: %s %q, want %q as cbstats warmup (and the memcached port's stats warmup) say", name, val, w)
		}
	}
}
