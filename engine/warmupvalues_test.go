package engine_test

import (
	"context"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestWarmupValueCountOfEjectingBucket: a valueOnly bucket whose documents
// pass its low-water mark warms up with the values it has room for and the
// others left on disk, and ep_warmup_value_count says how many values it
// loaded (Couchbase's "values loaded"), not how many keys: every value
// counted is one in memory once the warm-up is done.
func TestWarmupValueCountOfEjectingBucket(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eng, err := engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase, RAMQuotaMB: ejectQuota})
	if err != nil {
		t.Fatal(err)
	}
	fillEjecting(t, b)
	closeChecked(t, eng)

	eng, err = engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, eng)
	if b, err = eng.Bucket("b"); err != nil {
		t.Fatal(err)
	}
	st := b.Stats()
	ws := st.Warmup
	resident := st.CurrItems - st.NonResident
	if ws.KeyCount != ejectDocs || st.NonResident == 0 || ws.ValueCount != resident {
		t.Fatalf("after a warm-up of %d documents of 4 KiB into %d MiB: ep_warmup_key_count %d, ep_warmup_value_count %d; want %d keys and %d values (the resident ones: %d non-resident)",
			ejectDocs, ejectQuota, ws.KeyCount, ws.ValueCount, ejectDocs, resident, st.NonResident)
	}
}
