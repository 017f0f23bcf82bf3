package engine

import (
	"context"
	"fmt"
	"testing"
)

// TestEvictionQueueStaysBounded: rewriting a few keys again and again does
// not grow the eviction queue without bound — replaced versions are dropped
// once they outnumber the current ones — and the queue length mem_used
// reads stays the queue's own.
func TestEvictionQueueStaysBounded(t *testing.T) {
	ctx := context.Background()
	eng, err := Open(t.TempDir(), &Options{NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	s := DefaultBucketSettings("m")
	s.Type = Memcached
	s.EvictionPolicy = ""
	b, err := eng.CreateBucket(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	maxQueued := 0
	for i := range 50_000 {
		if _, err := c.Upsert(ctx, fmt.Sprint("k", i%10), []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
		b.mem.lru.Lock()
		n := len(b.mem.lru.q) - b.mem.lru.head
		b.mem.lru.Unlock()
		if got := b.mem.queued.Load(); got != int64(n) {
			t.Fatalf("after write %d: queued %d, queue holds %d", i, got, n)
		}
		maxQueued = max(maxQueued, n)
	}
	if maxQueued > 1024 {
		t.Fatalf("the queue reached %d versions for 10 keys", maxQueued)
	}
}
