package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// An ephemeral noEviction bucket must not let touches (and writes of the
// same size that add an expiry) take mem_used past its quota, as a review
// found they did. The README: "a write that would take mem_used past the quota fails with a
// temporary error"; mem_used counts each expiry-index entry (96 bytes), and
// checkQuota measured a write's growth by the document's footprint alone,
// so a bucket filled to its 1 MiB quota with 200-byte documents ended a
// third past it once each was touched with an expiry.
func TestEphemeralNoEvictionTouchHoldsTheQuota(t *testing.T) {
	ctx := context.Background()
	b := memBucket(t, engine.Ephemeral, 1, "")
	c := b.DefaultCollection()
	n := 0
	for ; n < 100000; n++ {
		if _, err := c.Upsert(ctx, memKey(n), memValue(n), nil); err != nil {
			if !errors.Is(err, engine.ErrTempOOM) {
				t.Fatal(err)
			}
			break
		}
	}
	quota := int64(1 << 20)
	refused := 0
	for i := range n {
		if _, err := c.Touch(ctx, memKey(i), 1000); errors.Is(err, engine.ErrTempOOM) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if st := b.Stats(); st.MemUsed > quota {
		t.Errorf("after touching the %d documents of a full 1 MiB noEviction bucket (%d touches refused): mem_used %d, %d%% of the quota", n, refused, st.MemUsed, st.MemUsed*100/quota)
	}
	for i := range n {
		if _, err := c.Get(ctx, memKey(i)); err != nil {
			t.Fatalf("a document was lost: %s: %v", memKey(i), err)
		}
	}
}
