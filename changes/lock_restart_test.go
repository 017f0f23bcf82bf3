package changes

import (
	"context"
	"net/url"
	"testing"
)

// A last_seq stays a since the bucket serves across a clean restart (same
// history), also when its top is a document lock's CAS: a lock (the KV
// port's GET_LOCKED, an SDK's getAndLock) takes a CAS without a write and
// StableCAS counts it, and a clean close records the highest CAS handed
// out, so the bucket opens above it. A review found such a last_seq refused
// with a rollback ("past the bucket's last change") until a write moved
// the counter past it, so every replicator reconnecting to a restarted
// quiet bucket started again from since=0.
func TestSinceAfterLockAndRestart(t *testing.T) {
	dir := t.TempDir()
	eng, b, _ := newBucket(t, dir)
	c := b.DefaultCollection()
	upsert(t, c, "a", `{}`, 0)
	if _, err := c.GetLocked(context.Background(), "a", 15); err != nil {
		t.Fatal(err)
	}
	last := feed(t, b, "").LastSeq
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	_, b, _ = newBucket(t, dir)
	if _, err := run(context.Background(), b, "since="+url.QueryEscape(last)); err != nil {
		t.Fatalf("since the last_seq from before a clean restart: %v", err)
	}
}
