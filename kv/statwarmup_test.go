package kv_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// STAT warmup tells the bucket's warm-up as it is, as the memcached port's
// "stats warmup" does: a bucket is served while it warms up (a read of a
// key not loaded yet reads the store), and the group answered "done" and
// "complete" whatever the warm-up's state, so a tool waiting on cbstats
// warmup went ahead before the bucket was loaded.
func TestStatWarmupDuringWarmup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng, err := engine.Open(dir, &engine.Options{NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings(bucketName))
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := range n {
		if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprintf("k%03d", i), []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	gate, held := make(chan struct{}), make(chan struct{})
	var hold, release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	eng, err = engine.Open(dir, &engine.Options{NumPartitions: 8, NoSync: true, BackgroundWarmup: true,
		WarmupHook: func(string, int64) { hold.Do(func() { close(held); <-gate }) }})
	if err != nil {
		t.Fatal(err)
	}
	f := serveEngine(t, eng, open)
	c := f.dial(t)
	c.login(adminUser, adminPass)

	<-held // the warm-up holds: one document loaded of n
	w, _ := c.stats("warmup")
	if w["ep_warmup_thread"] != "running" || w["ep_warmup_state"] == engine.WarmupDone {
		t.Errorf("STAT warmup while the warm-up holds: %v, want ep_warmup_thread running and a state before done", w)
	}
	open()
	nb, err := eng.Bucket(bucketName)
	if err != nil {
		t.Fatal(err)
	}
	if err := nb.WaitWarm(ctx); err != nil {
		t.Fatal(err)
	}
	w, _ = c.stats("warmup")
	if w["ep_warmup_thread"] != "complete" || w["ep_warmup_state"] != engine.WarmupDone || w["ep_warmup_key_count"] != fmt.Sprint(n) {
		t.Errorf("STAT warmup once warm: %v, want complete, done and %d keys", w, n)
	}
}
