package changes

import (
	"context"
	"net/url"
	"testing"
)

// Bug (review of the change feed): a document lock (the KV port's
// GET_LOCKED, an SDK's getAndLock) takes a CAS from the bucket's counter
// without a write, and StableCAS, every last_seq's top, counts it. The CAS
// is not stored, so after a clean restart (same history) a reader resuming
// from that last_seq is refused with a rollback ("past the bucket's last
// change") until a write moves the counter past it: every replicator that
// reconnects to a restarted quiet bucket starts again from since=0. The
// README: a since is refused only for another history or a purged
// deletion; a clean restart keeps the history.
func TestReviewSinceAfterLockAndRestart(t *testing.T) {
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
