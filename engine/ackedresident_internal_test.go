package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestAckedBoundResidentRefuses: a write at none from a caller that must
// not wait (WriteOptions.Resident) is refused with ErrWouldBlock, having
// changed nothing, where the bound on writes acknowledged from memory
// (MaxAckedBytes) would make it wait for its commit; the same write without
// Resident waits for the commit and is done. Before, the Resident write
// waited for the disk in its caller (an event loop serving many
// connections).
func TestAckedBoundResidentRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // catches a hang only
	defer cancel()
	eng, err := Open(t.TempDir(), &Options{NumPartitions: 16, NoSync: true, FlushInterval: time.Hour, MaxAckedBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, BucketSettings{Name: "b", Type: Couchbase, DurabilityMinLevel: DurabilityNone})
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	resident := &WriteOptions{Resident: true}
	refused := -1
	for i := range 100 {
		_, err := c.Upsert(ctx, fmt.Sprintf("k%d", i), []byte("v"), resident)
		if errors.Is(err, ErrWouldBlock) {
			refused = i
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if refused < 0 {
		t.Fatal("100 Resident writes at none under a 4 KiB bound: none refused")
	}
	key := fmt.Sprintf("k%d", refused)
	if _, err := c.Get(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refused write is readable: %v", err)
	}
	// The acknowledged writes count in curr_items as they are readable;
	// the refused one does not.
	if st := b.Stats(); st.QueueSize != int64(refused) || st.CurrItems != int64(refused) {
		t.Fatalf("after %d writes acknowledged and one refused: ep_queue_size %d, curr_items %d; want %d, %d", refused, st.QueueSize, st.CurrItems, refused, refused)
	}
	// Where it may wait, the same write waits for its commit and is done.
	if _, err := c.Upsert(ctx, key, []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.QueueSize != 0 || st.CurrItems != int64(refused+1) {
		t.Fatalf("after the write that waited: ep_queue_size %d, curr_items %d; want 0, %d", st.QueueSize, st.CurrItems, refused+1)
	}
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
}
