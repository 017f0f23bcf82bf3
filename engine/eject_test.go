package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// Value eviction (couchbase buckets, evictionPolicy valueOnly): with a tiny
// quota, values leave memory and every read path gets them back intact.

const (
	ejectDocs  = 1000 // 1000 documents of 4 KiB: about 4 MiB of values
	ejectQuota = 1    // MiB
)

// ejectValue is a 4 KiB JSON value that names its key and version.
func ejectValue(i, version int) []byte {
	head := fmt.Sprintf(`{"k":%d,"v":%d,"pad":"`, i, version)
	return append([]byte(head), append(bytes.Repeat([]byte("x"), 4096-len(head)-2), `"}`...)...)
}

// fillEjecting writes ejectDocs documents into a couchbase bucket with a
// 1 MiB quota, checking after each write that mem_used stays under the
// quota (a generous bound: eviction starts at 85% and stops at 75%).
func fillEjecting(t *testing.T, b *engine.Bucket) {
	t.Helper()
	ctx := context.Background()
	c := b.DefaultCollection()
	for i := range ejectDocs {
		if _, err := c.Upsert(ctx, memKey(i), ejectValue(i, 0), nil); err != nil {
			t.Fatalf("upsert %d: %v", i, err)
		}
		if st := b.Stats(); st.MemUsed > ejectQuota<<20 {
			t.Fatalf("after %d writes of 4 KiB: mem_used %d past the %d MiB quota (ep_kv_size %d, ejects %d)", i+1, st.MemUsed, ejectQuota, st.KVSize, st.NumValueEjects)
		}
	}
	st := b.Stats()
	if st.NumValueEjects == 0 || st.NonResident == 0 || st.ResidentPct >= 100 || st.CurrItems != ejectDocs {
		t.Fatalf("after %d writes of 4 KiB into %d MiB: ep_num_value_ejects %d, non-resident %d, resident %d%%, curr_items %d",
			ejectDocs, ejectQuota, st.NumValueEjects, st.NonResident, st.ResidentPct, st.CurrItems)
	}
	if st.Evictions != 0 {
		t.Errorf("a couchbase bucket evicted %d whole items: it ejects values only", st.Evictions)
	}
}

func ejectBucket(t *testing.T) *engine.Bucket {
	t.Helper()
	return memBucket(t, engine.Couchbase, ejectQuota, "")
}

// wantValue fails unless d is document i at version v, value intact.
func wantValue(t *testing.T, how string, d *engine.Document, i, v int) {
	t.Helper()
	if d == nil {
		t.Fatalf("%s %s: no document", how, memKey(i))
	}
	if !bytes.Equal(d.Value, ejectValue(i, v)) {
		t.Fatalf("%s %s: value of %d bytes %.40q, want version %d intact", how, memKey(i), len(d.Value), d.Value, v)
	}
}

func TestValueEvictionReadsBackEveryPath(t *testing.T) {
	ctx := context.Background()
	b := ejectBucket(t)
	c := b.DefaultCollection()
	fillEjecting(t, b)
	before := b.Stats().BgFetched

	for i := range ejectDocs {
		d, err := c.Get(ctx, memKey(i))
		if err != nil {
			t.Fatal(err)
		}
		wantValue(t, "Get", d, i, 0)
		p, err := c.Peek(memKey(i))
		if err != nil {
			t.Fatal(err)
		}
		wantValue(t, "Peek", p, i, 0)
	}
	if st := b.Stats(); st.BgFetched <= before {
		t.Errorf("ep_bg_fetched %d after reading every document back (was %d)", st.BgFetched, before)
	}

	docs, total, err := c.Keys(ctx, "", "", 0, 0)
	if err != nil || total != ejectDocs || len(docs) != ejectDocs {
		t.Fatalf("Keys: %d of %d, %v", len(docs), total, err)
	}
	for i, d := range docs {
		wantValue(t, "Keys", d, i, 0)
	}

	from := memKey(100)
	var listed []string
	for d, err := range c.List(ctx, engine.ListOptions{Start: &from, Descending: true, Skip: 10, Limit: 50}) {
		if err != nil {
			t.Fatal(err)
		}
		var i int
		fmt.Sscanf(d.Key, "k%d", &i)
		wantValue(t, "List", d, i, 0)
		listed = append(listed, d.Key)
	}
	if len(listed) != 50 || listed[0] != memKey(90) || listed[49] != memKey(41) {
		t.Errorf("List from %s down, skip 10, limit 50: %d documents, %v … %v", from, len(listed), listed[:min(1, len(listed))], listed[max(0, len(listed)-1):])
	}

	changes, _, err := b.Changes(nil, 0)
	if err != nil || len(changes) != ejectDocs {
		t.Fatalf("Changes: %d documents, %v", len(changes), err)
	}
	for _, d := range changes {
		var i int
		fmt.Sscanf(d.Key, "k%d", &i)
		wantValue(t, "Changes", d, i, 0)
	}

	cur, err := b.Consumer("test").Changes(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for d := range cur.Next(0) {
		var i int
		fmt.Sscanf(d.Key, "k%d", &i)
		wantValue(t, "Cursor", d, i, 0)
		n++
	}
	if n != ejectDocs || cur.Err() != nil {
		t.Fatalf("cursor: %d documents, %v", n, cur.Err())
	}

	scanned := 0
	for part := range b.NumPartitions() {
		s := engine.ChangeScan{Part: part, Hi: b.MaxCAS(), Limit: 1 << 20}
		b.ScanChanges(&s)
		if s.Err != nil {
			t.Fatal(s.Err)
		}
		for _, d := range s.Docs {
			var i int
			fmt.Sscanf(d.Key, "k%d", &i)
			wantValue(t, "ScanChanges", d, i, 0)
			scanned++
		}
	}
	if scanned != ejectDocs {
		t.Errorf("ScanChanges: %d documents, want %d", scanned, ejectDocs)
	}
}

// Writes that build on an ejected version: a touch keeps the value; a
// replace with the read CAS, a delete and an expiration work on metadata.
func TestValueEvictionMutationsOfEjectedDocuments(t *testing.T) {
	ctx := context.Background()
	b := ejectBucket(t)
	clk := b.Clock().(*engine.FakeClock)
	c := b.DefaultCollection()
	fillEjecting(t, b)
	for i := range ejectDocs {
		switch i % 4 {
		case 0:
			d, err := c.Touch(ctx, memKey(i), 100)
			if err != nil {
				t.Fatal(err)
			}
			wantValue(t, "Touch", d, i, 0)
		case 1:
			cas := mustGet(t, c, i).CAS
			if _, err := c.Replace(ctx, memKey(i), ejectValue(i, 1), &engine.WriteOptions{CAS: cas}); err != nil {
				t.Fatalf("replace %d with its CAS: %v", i, err)
			}
		case 2:
			if _, err := c.Delete(ctx, memKey(i), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range ejectDocs {
		d, err := c.Get(ctx, memKey(i))
		switch i % 4 {
		case 2:
			if !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("deleted %s: %v", memKey(i), err)
			}
		case 1:
			wantValue(t, "Get after Replace", d, i, 1)
		default:
			wantValue(t, "Get", d, i, 0)
		}
	}
	clk.Advance(200) // the touched documents expire
	purged, _, err := b.ExpireBatch(ctx, ejectDocs)
	if err != nil || purged != ejectDocs/4 {
		t.Fatalf("pager: purged %d, want %d: %v", purged, ejectDocs/4, err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.CurrItems != ejectDocs/2 {
		t.Errorf("curr_items %d, want %d", st.CurrItems, ejectDocs/2)
	}
}

func mustGet(t *testing.T, c *engine.Collection, i int) *engine.Document {
	t.Helper()
	d, err := c.Get(context.Background(), memKey(i))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// After a clean restart, and after a crash (a copy of the files taken while
// open), every value reads back intact, and warm-up loads values only up to
// the low-water mark.
func TestValueEvictionAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func(dir string) *engine.Engine {
		eng, err := engine.Open(dir, &engine.Options{Clock: engine.NewFakeClock(t0), NumPartitions: 8})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	eng := open(dir)
	b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase, RAMQuotaMB: ejectQuota})
	if err != nil {
		t.Fatal(err)
	}
	fillEjecting(t, b)
	crashed := t.TempDir()
	copyDir(t, dir, crashed) // what kill -9 now would leave
	closeChecked(t, eng)

	for _, tc := range []struct{ name, dir string }{{"clean restart", dir}, {"crash", crashed}} {
		eng := open(tc.dir)
		b, err := eng.Bucket("b")
		if err != nil {
			t.Fatal(err)
		}
		st := b.Stats()
		if st.MemUsed > st.MemHighWat || st.ResidentPct >= 100 || st.NonResident == 0 {
			t.Errorf("%s: after warm-up mem_used %d (high-water mark %d), resident %d%%, non-resident %d", tc.name, st.MemUsed, st.MemHighWat, st.ResidentPct, st.NonResident)
		}
		c := b.DefaultCollection()
		for i := range ejectDocs {
			wantValue(t, tc.name+": Get", mustGet(t, c, i), i, 0)
		}
		closeChecked(t, eng)
	}
}

// Writers, readers and ejection at once: every read gets its key's value
// intact at some version it had, and the counters hold (engine.Check in the
// cleanup recounts ep_kv_size and the non-resident count).
func TestValueEvictionConcurrent(t *testing.T) {
	ctx := context.Background()
	b := ejectBucket(t)
	c := b.DefaultCollection()
	fillEjecting(t, b)
	const workers, rounds = 4, 600
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for w := range workers {
		wg.Add(2)
		go func() { // writer: rewrites its share of keys at version 1
			defer wg.Done()
			for r := range rounds {
				i := (w + r*workers) % ejectDocs
				if _, err := c.Upsert(ctx, memKey(i), ejectValue(i, 1), nil); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() { // reader
			defer wg.Done()
			for r := range rounds {
				i := (r*7 + w*131) % ejectDocs
				d, err := c.Get(ctx, memKey(i))
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(d.Value, ejectValue(i, 0)) && !bytes.Equal(d.Value, ejectValue(i, 1)) {
					errs <- fmt.Errorf("Get %s: value %.40q", memKey(i), d.Value)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := b.Stats(); st.MemUsed > ejectQuota<<20 {
		t.Errorf("mem_used %d past the quota after concurrent writes", st.MemUsed)
	}
}

// A change-feed cursor reading a bucket whose values are mostly ejected
// while writers rewrite its keys (the batched key-order read then finds
// newer versions than the ones it copied): every document it yields has its
// own value at the version it names, and once the writers stop, reading on
// reaches every key's last version.
func TestValueEvictionCursorWhileWriting(t *testing.T) {
	ctx := context.Background()
	b := ejectBucket(t)
	c := b.DefaultCollection()
	fillEjecting(t, b)
	cur, err := b.Consumer("build").Changes(nil)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]uint64{} // the last seq the cursor yielded per key
	read := func() {
		t.Helper()
		for d := range cur.Next(50) {
			var i, v int
			if _, err := fmt.Sscanf(string(d.Value), `{"k":%d,"v":%d,`, &i, &v); err != nil || memKey(i) != d.Key || !bytes.Equal(d.Value, ejectValue(i, v)) {
				t.Fatalf("cursor: %s (seq %d) holds %.40q", d.Key, d.Seq, d.Value)
			}
			if d.Seq <= last[d.Key] {
				t.Fatalf("cursor: %s at seq %d after seq %d", d.Key, d.Seq, last[d.Key])
			}
			last[d.Key] = d.Seq
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		for r := range 3 * ejectDocs {
			i := (r * 13) % ejectDocs
			if _, err := c.Upsert(ctx, memKey(i), ejectValue(i, 1+r/ejectDocs), nil); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for writing := true; writing; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			writing = false
		default:
		}
		read()
	}
	for range 2 * ejectDocs { // to the feed's end
		before := cur.Position()
		read()
		if slices.Equal(before, cur.Position()) {
			break
		}
	}
	for i := range ejectDocs {
		d := mustGet(t, c, i)
		if last[d.Key] != d.Seq {
			t.Errorf("cursor at the feed's end: %s last yielded at seq %d, its version is seq %d", d.Key, last[d.Key], d.Seq)
		}
	}
}

// A write flood far past the quota: mem_used and ep_kv_size stay under it.
func TestValueEvictionQuotaHoldsUnderWriteFlood(t *testing.T) {
	ctx := context.Background()
	b := ejectBucket(t)
	c := b.DefaultCollection()
	var peak int64
	for r := range 5 {
		for i := range ejectDocs {
			if _, err := c.Upsert(ctx, memKey(i), ejectValue(i, r), nil); err != nil {
				t.Fatal(err)
			}
			peak = max(peak, b.Stats().MemUsed)
		}
	}
	st := b.Stats()
	t.Logf("5 x %d writes of 4 KiB into %d MiB: peak mem_used %d, ep_kv_size %d, ejects %d", ejectDocs, ejectQuota, peak, st.KVSize, st.NumValueEjects)
	if peak > ejectQuota<<20 || st.KVSize > ejectQuota<<20 {
		t.Errorf("peak mem_used %d, ep_kv_size %d: past the %d MiB quota", peak, st.KVSize, ejectQuota)
	}
	keys := make([]int, 0, ejectDocs)
	for i := range ejectDocs {
		keys = append(keys, i)
	}
	for _, i := range slices.Backward(keys) {
		wantValue(t, "Get", mustGet(t, c, i), i, 4)
	}
}

// BenchmarkGetEjected measures random gets of a couchbase bucket whose
// values are mostly ejected (20,000 documents of 1 KiB under a 16 MiB
// quota): each such get reads its value back from disk. It reports the
// latency's p50 and p99 and the share of gets that read from disk.
func BenchmarkGetEjected(b *testing.B) {
	ctx := context.Background()
	eng, err := engine.Open(b.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	bk, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "bench", Type: engine.Couchbase, RAMQuotaMB: 16})
	if err != nil {
		b.Fatal(err)
	}
	c := bk.DefaultCollection()
	const keys = 20_000
	value := bytes.Repeat([]byte("v"), 1024)
	for i := range keys {
		if _, err := c.Upsert(ctx, memKey(i), value, nil); err != nil {
			b.Fatal(err)
		}
	}
	st := bk.Stats()
	fetched := st.BgFetched
	rng := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, 0, max(b.N, 1000))
	b.ResetTimer()
	for i := 0; i < max(b.N, 1000); i++ {
		start := time.Now()
		if _, err := c.Get(ctx, memKey(rng.IntN(keys))); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(100*float64(bk.Stats().BgFetched-fetched)/float64(len(lat)), "%-bg-fetched")
	b.ReportMetric(float64(st.ResidentPct), "%-resident")
}

// The TTL rules over ejected documents: a sliding read extends an ejected
// document's expiration and keeps its value, and a defaultTTL
// re-evaluation reads each ejected document's "ttl" field from disk.
func TestValueEvictionTTLRules(t *testing.T) {
	ctx := context.Background()
	b := ejectBucket(t)
	clk := b.Clock().(*engine.FakeClock)
	if err := b.CreateScope(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateCollectionWith(ctx, "s", "c", engine.CollectionSettings{IdleTTL: 1000}); err != nil {
		t.Fatal(err)
	}
	c, err := b.Collection("s", "c")
	if err != nil {
		t.Fatal(err)
	}
	ttlValue := func(i int) []byte { // 4 KiB, with a "ttl" of 500 + i seconds
		head := fmt.Sprintf(`{"ttl":%d,"pad":"`, 500+i)
		return append([]byte(head), append(bytes.Repeat([]byte("x"), 4096-len(head)-2), `"}`...)...)
	}
	for i := range ejectDocs {
		if _, err := c.Upsert(ctx, memKey(i), ttlValue(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.Stats(); st.NonResident == 0 {
		t.Fatalf("no value ejected: %+v", st)
	}
	clk.Advance(100)
	for i := range 10 { // written first: ejected
		d, err := c.Get(ctx, memKey(i))
		if err != nil || !bytes.Equal(d.Value, ttlValue(i)) {
			t.Fatalf("sliding read of %s: %.40q, %v", memKey(i), d.Value, err)
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.SlidingExtends != 10 {
		t.Errorf("ep_sliding_extends %d after 10 sliding reads, want 10", st.SlidingExtends)
	}
	if _, _, err := b.UpdateCollection(ctx, "s", "c", func(cs *engine.CollectionSettings) error {
		cs.IdleTTL, cs.DefaultTTL = 0, 1
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	for i := range ejectDocs {
		d, err := c.Get(ctx, memKey(i))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(d.Value, ttlValue(i)) || d.Expiration != d.TS+int64(500+i) {
			t.Fatalf("%s after the re-evaluation: expiration %d (written at %d, now %d), want its ttl field %d after the write; value %.40q", memKey(i), d.Expiration, d.TS, now, 500+i, d.Value)
		}
	}
	// Dropping the collection takes its ejected documents out of the count.
	if err := b.DropCollection(ctx, "s", "c"); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.NonResident != 0 || st.ResidentPct != 100 || st.CurrItems != 0 {
		t.Errorf("after dropping the collection: non-resident %d, resident %d%%, curr_items %d", st.NonResident, st.ResidentPct, st.CurrItems)
	}
}

// TestGetResidentNeverReadsTheStore: GetResident answers the documents whose
// values are in memory as Get does, and ErrWouldBlock, reading nothing
// (ep_bg_fetched unchanged), for those whose values were ejected; Get then
// reads them back. Misses need no store and are answered.
func TestGetResidentNeverReadsTheStore(t *testing.T) {
	ctx := context.Background()
	b := ejectBucket(t)
	c := b.DefaultCollection()
	fillEjecting(t, b)
	before := b.Stats().BgFetched
	var resident, blocked int
	var ejected []int
	for i := range ejectDocs {
		d, err := c.GetResident(ctx, memKey(i))
		switch {
		case errors.Is(err, engine.ErrWouldBlock):
			blocked++
			ejected = append(ejected, i)
		case err != nil:
			t.Fatal(err)
		default:
			resident++
			wantValue(t, "GetResident", d, i, 0)
		}
	}
	if after := b.Stats().BgFetched; after != before {
		t.Fatalf("GetResident read %d values from the store", after-before)
	}
	if resident == 0 || blocked == 0 {
		t.Fatalf("of %d documents under a %d MiB quota, %d answered from memory and %d would block: want some of each", ejectDocs, ejectQuota, resident, blocked)
	}
	for _, i := range ejected[:min(len(ejected), 20)] {
		d, err := c.Get(ctx, memKey(i))
		if err != nil {
			t.Fatal(err)
		}
		wantValue(t, "Get after ErrWouldBlock", d, i, 0)
	}
	if _, err := c.GetResident(ctx, "never-written"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("GetResident of a missing key: %v, want ErrNotFound", err)
	}
}
