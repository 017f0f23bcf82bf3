package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A lock holder's write acknowledged from memory ends the lock; when its
// commit then fails (and the write is lost), the lock must not come back.
func TestReviewLockNotResurrectedByLostAckedWrite(t *testing.T) {
	ctx := context.Background()
	b, f := faultyNoneBucket(ctx, t, Options{FlushInterval: time.Hour})
	c := b.DefaultCollection()
	if _, err := c.Upsert(ctx, "k", []byte(`{"v":1}`), nil); err != nil {
		t.Fatal(err)
	}
	d, err := c.GetLocked(ctx, "k", 30)
	if err != nil {
		t.Fatal(err)
	}
	f.setErr(errors.New("disk gone"))
	if _, err := c.Upsert(ctx, "k", []byte(`{"v":2}`), &WriteOptions{CAS: d.CAS, Durability: DurabilityNone}); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); !errors.Is(err, ErrStorage) {
		t.Fatalf("Sync: %v", err)
	}
	f.setErr(nil)
	for b.store.failure() != nil {
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Upsert(ctx, "k", []byte(`{"v":3}`), nil); err != nil {
		t.Fatalf("write after the holder's write ended the lock (and was lost): %v", err)
	}
}
