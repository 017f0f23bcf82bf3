package memcache

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// warmupStats returns the lines of "stats warmup" as a map (a value may
// hold spaces: "loading k/v pairs").
func (c *client) warmupStats() map[string]string {
	c.t.Helper()
	c.send("stats warmup\r\n")
	m := map[string]string{}
	for l := c.line(); l != "END\r\n"; l = c.line() {
		f := strings.SplitN(strings.TrimSuffix(l, "\r\n"), " ", 3)
		if len(f) != 3 || f[0] != "STAT" {
			c.t.Fatalf("bad stats warmup line %q", l)
		}
		m[f[1]] = f[2]
	}
	return m
}

// TestStatsWarmup serves a bucket restarted with its warm-up held: "stats
// warmup" shows it running (Couchbase's names and states), a get of a
// stored key not loaded yet answers its value, and once the warm-up is let
// go the group shows it complete with every key counted.
func TestStatsWarmup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng, err := engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprintf("k%02d", i), []byte(fmt.Sprint("v", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	gate, held := make(chan struct{}), make(chan struct{})
	var hold, release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	eng, err = engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8, NoSync: true, BackgroundWarmup: true,
		WarmupHook: func(string, int64) { hold.Do(func() { close(held); <-gate }) }})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = eng.Bucket("default")
	srv, addr, done := serve(t, b, nil)
	t.Cleanup(func() {
		open()
		srv.Close()
		<-done
		eng.Close()
	})
	c := dialAddr(t, addr)
	<-held
	st := c.warmupStats()
	if st["ep_warmup_thread"] != "running" || st["ep_warmup_state"] != "loading k/v pairs" || st["ep_warmup_key_count"] != "1" ||
		(st["ep_warmup_estimated_key_count"] != fmt.Sprint(n) && st["ep_warmup_estimated_key_count"] != "unknown") || st["ep_warmup"] != "enabled" {
		t.Fatalf("stats warmup during the warm-up: %v", st)
	}
	c.do("get k42\r\n", "VALUE k42 0 3\r\nv42\r\nEND\r\n")
	open()
	if err := b.WaitWarm(ctx); err != nil {
		t.Fatal(err)
	}
	st = c.warmupStats()
	if st["ep_warmup_thread"] != "complete" || st["ep_warmup_state"] != "done" || st["ep_warmup_key_count"] != fmt.Sprint(n) || st["ep_warmup_value_count"] != fmt.Sprint(n) {
		t.Fatalf("stats warmup after the warm-up: %v", st)
	}
	if got := c.stats()["ep_warmup_thread"]; got != "complete" {
		t.Fatalf("stats: ep_warmup_thread %q, want complete", got)
	}
}
