package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/mayflydb/mayfly/engine"
)

// A document with a relative expiry disappears when the clock passes it, and
// the expiry pager's batch purges what is left.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "mayfly-example")
	defer os.RemoveAll(dir)
	clock := engine.NewFakeClock(1_700_000_000)
	eng, _ := engine.Open(dir, &engine.Options{Clock: clock})
	defer eng.Close()
	b, _ := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	c := b.DefaultCollection()

	d, _ := c.Upsert(ctx, "session", []byte(`{"user":"ann"}`), &engine.WriteOptions{Expiry: 60})
	fmt.Println("expires at", d.Expiration)

	clock.Advance(60)
	_, err := c.Peek("session")
	fmt.Println("expired:", errors.Is(err, engine.ErrNotFound), "still counted:", b.Stats().CurrItems)

	n, _, _ := b.ExpireBatch(ctx, 100)
	b.Sync(ctx) // the purges are visible once on disk
	fmt.Println("purged:", n, "counted:", b.Stats().CurrItems)
	// Output:
	// expires at 1700000060
	// expired: true still counted: 1
	// purged: 1 counted: 0
}
