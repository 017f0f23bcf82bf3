package engine_test

import (
	"bytes"
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

// TestWarmupKeysPastQuotaLoadsNoValues: a valueOnly bucket whose keys and
// metadata alone pass its low-water mark warms up without loading values
// it would eject at once: Couchbase loads the keys first and loads values
// only while under the low-water mark. Before, the warm-up loaded values up
// to the low-water mark as it went, then ejected every one of them once
// the keys loaded after had passed the high-water mark.
func TestWarmupKeysPastQuotaLoadsNoValues(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *engine.Engine {
		eng, err := engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	eng := open()
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase, RAMQuotaMB: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	value := []byte(`{"pad":"` + string(bytes.Repeat([]byte("v"), 200)) + `"}`)
	n := 0
	for ; ; n++ {
		if _, err := c.Upsert(ctx, memKey(n), value, nil); err != nil {
			t.Fatal(err)
		}
		// Written until the keys and metadata alone (mem_used with every
		// value ejected) pass the low-water mark by a margin.
		if st := b.Stats(); st.MemUsed-int64(st.CurrItems-st.NonResident)*int64(len(value)) > st.MemLowWat*11/10 {
			break
		}
		if n > 200000 {
			t.Fatal("200000 keys fit the low-water mark of 1 MiB")
		}
	}
	n++
	closeChecked(t, eng)

	eng = open()
	defer closeChecked(t, eng)
	if b, err = eng.Bucket("b"); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitWarm(ctx); err != nil {
		t.Fatal(err)
	}
	c = b.DefaultCollection()
	st := b.Stats()
	ws := st.Warmup
	t.Logf("%d keys: mem_used %d, low-water mark %d, values loaded %d, ejected %d, non-resident %d", n, st.MemUsed, st.MemLowWat, ws.ValueCount, st.NumValueEjects, st.NonResident)
	if ws.KeyCount != int64(n) || st.CurrItems != int64(n) {
		t.Fatalf("warm-up of %d keys: ep_warmup_key_count %d, curr_items %d", n, ws.KeyCount, st.CurrItems)
	}
	// A few values may load before the warm-up knows how much its keys
	// need; not the low-water mark's worth it ejected before.
	if st.NumValueEjects > int64(n)/100 || ws.ValueCount != st.CurrItems-st.NonResident {
		t.Errorf("warm-up of %d keys whose metadata passes the low-water mark: %d values loaded, %d ejected, %d resident; want next to none loaded and ejected",
			n, ws.ValueCount, st.NumValueEjects, st.CurrItems-st.NonResident)
	}
	// Every value is still read back from disk.
	for _, i := range []int{0, n / 2, n - 1} {
		if d, err := c.Get(ctx, memKey(i)); err != nil || !bytes.Equal(d.Value, value) {
			t.Errorf("get %s after the warm-up: %v", memKey(i), err)
		}
	}
}
