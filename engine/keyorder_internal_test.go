package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
)

// countingReads is a store that counts its reads of documents by key: point
// reads (doc) and batched reads (docs, and the keys they asked for), and
// whether every batch came in the store's key order.
type countingReads struct {
	storage
	point, batches, batchKeys atomic.Int64
	unsorted                  atomic.Bool
}

func (c *countingReads) doc(k docKey) (*Document, error) {
	c.point.Add(1)
	return c.storage.doc(k)
}

func (c *countingReads) docs(keys []docKey) ([]*Document, error) {
	c.batches.Add(1)
	c.batchKeys.Add(int64(len(keys)))
	if !slices.IsSortedFunc(keys, compareDocKeys) {
		c.unsorted.Store(true)
	}
	return c.storage.docs(keys)
}

// pointReadFeed reads b's whole change feed as the cursor did before it
// batched its reads: partition by partition in sequence order, cursorChunk
// versions at a time, each ejected value read back by its own point read
// (withValue), a replaced version stepped over.
func pointReadFeed(b *Bucket) ([]*Document, error) {
	var out []*Document
	buf := make([]*Document, 0, cursorChunk)
	for _, p := range b.parts {
		for since := uint64(0); ; {
			buf, _, _ = p.changesAfter(since, cursorChunk, buf[:0])
			for _, d := range buf {
				full, err := b.withValue(context.Background(), d, false)
				if err != nil && !errors.Is(err, errReplaced) {
					return nil, err
				}
				if err == nil {
					out = append(out, full)
				}
				since = d.Seq
			}
			if len(buf) < cursorChunk {
				break
			}
		}
	}
	return out, nil
}

// A change-feed cursor over a bucket whose values are mostly ejected (1,000
// documents of 4 KiB under a 1 MiB quota) yields exactly what the feed
// yielded one point read at a time (pointReadFeed: the same versions, in
// the same order, with the same values), counts each value it read back in
// ep_bg_fetched, and reads those values from the store in batches, in key
// order, with no point read: at most one batched read per partition a
// Next call visits.
func TestCursorReadsEjectedValuesInKeyOrder(t *testing.T) {
	for _, kind := range []string{StoragePebble, StorageBolt} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			const parts, n, batch = 4, 1000, 150
			var cr *countingReads
			eng, err := Open(t.TempDir(), &Options{NumPartitions: parts, NoSync: true, Storage: kind,
				wrapStorage: func(st storage) storage { cr = &countingReads{storage: st}; return cr }})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			b, err := eng.CreateBucket(ctx, BucketSettings{Name: "b", Type: Couchbase, RAMQuotaMB: 1})
			if err != nil {
				t.Fatal(err)
			}
			c := b.DefaultCollection()
			value := func(i int) []byte {
				head := fmt.Sprintf(`{"k":%d,"pad":"`, i)
				return append([]byte(head), append(bytes.Repeat([]byte("x"), 4096-len(head)-2), `"}`...)...)
			}
			for i := range n {
				if _, err := c.Upsert(ctx, fmt.Sprintf("k%05d", (i*7919)%n), value((i*7919)%n), nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			nonResident := b.Stats().NonResident
			if nonResident < n/2 {
				t.Fatalf("only %d of %d values ejected", nonResident, n)
			}

			// The reference: the feed read as it was, a point read each.
			want, err := pointReadFeed(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) != n {
				t.Fatalf("Changes: %d documents, want %d", len(want), n)
			}

			fetched := b.Stats().BgFetched
			point, batches := cr.point.Load(), cr.batches.Load()
			cur, err := b.Consumer("view").Changes(nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []*Document
			calls := 0
			for {
				calls++
				before := len(got)
				for d := range cur.Next(batch) {
					got = append(got, d)
				}
				if cur.Err() != nil {
					t.Fatal(cur.Err())
				}
				if len(got) == before {
					break
				}
			}
			if len(got) != len(want) {
				t.Fatalf("cursor yielded %d documents, the feed %d", len(got), len(want))
			}
			for i, d := range got {
				w := want[i]
				if d.Key != w.Key || d.Seq != w.Seq || d.CAS != w.CAS || d.Partition != w.Partition || !bytes.Equal(d.Value, w.Value) {
					t.Fatalf("cursor's document %d: %s seq %d cas %d (%d bytes), the feed's: %s seq %d cas %d (%d bytes)",
						i, d.Key, d.Seq, d.CAS, len(d.Value), w.Key, w.Seq, w.CAS, len(w.Value))
				}
				var k int
				fmt.Sscanf(d.Key, "k%05d", &k)
				if !bytes.Equal(d.Value, value(k)) || d.ejected {
					t.Fatalf("cursor's %s: value %.30q, not its own", d.Key, d.Value)
				}
			}
			if got := b.Stats().BgFetched - fetched; got != nonResident {
				t.Errorf("ep_bg_fetched rose by %d over a cursor read of %d non-resident values", got, nonResident)
			}
			if p := cr.point.Load() - point; p != 0 {
				t.Errorf("the cursor made %d point reads of the store, want none (all batched)", p)
			}
			nb := cr.batches.Load() - batches
			if nb == 0 || nb > int64(calls+parts) {
				t.Errorf("the cursor made %d batched reads over %d Next calls of %d partitions, want 1 to %d", nb, calls, parts, calls+parts)
			}
			if cr.unsorted.Load() {
				t.Error("a batched read asked for its keys out of key order")
			}
			// A reader that stops mid-batch (here after 37 documents) goes
			// on from there: nothing skipped, nothing twice.
			cur2, err := b.Consumer("stops").Changes(nil)
			if err != nil {
				t.Fatal(err)
			}
			var got2 []*Document
			for {
				before, k := len(got2), 0
				for d := range cur2.Next(batch) {
					got2 = append(got2, d)
					if k++; k == 37 {
						break
					}
				}
				if cur2.Err() != nil {
					t.Fatal(cur2.Err())
				}
				if len(got2) == before {
					break
				}
			}
			if len(got2) != len(want) {
				t.Fatalf("a reader stopping mid-batch read %d documents, the feed holds %d", len(got2), len(want))
			}
			for i, d := range got2 {
				if d.Key != want[i].Key || d.Seq != want[i].Seq || !bytes.Equal(d.Value, want[i].Value) {
					t.Fatalf("a reader stopping mid-batch: document %d is %s seq %d, the feed's %s seq %d", i, d.Key, d.Seq, want[i].Key, want[i].Seq)
				}
			}
			if b.Stats().NonResident != nonResident {
				t.Errorf("the cursor changed residency: %d non-resident, was %d", b.Stats().NonResident, nonResident)
			}
		})
	}
}

// BenchmarkCursorEjected measures an index build's read of the change feed
// over a bucket whose values are mostly ejected: n documents of 1 KiB (keys
// written in a scattered order, as a bucket's keys usually are) under a
// quota of 16 MiB per 100,000 documents, on pebble compacted once loaded (so that no background
// compaction runs while it measures), read whole by a cursor per
// iteration. "point" is the read as it was: one point read per ejected
// value, in sequence order; "keyorder" is Cursor.Next, a batch (20,000: the
// views' DefaultBatchSize) at a time, its values read together in key
// order. With 20,000 documents one batch is the whole bucket; with 100,000
// it holds a fifth of the keys. It reports documents per second and the
// share of them read back from disk.
func BenchmarkCursorEjected(b *testing.B) {
	for _, n := range []int{20_000, 100_000} {
		b.Run(fmt.Sprintf("docs=%d", n), func(b *testing.B) { benchCursorEjected(b, n) })
	}
}

func benchCursorEjected(b *testing.B, n int) {
	ctx := context.Background()
	eng, err := Open(b.TempDir(), &Options{NoSync: true, Storage: StoragePebble})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	bk, err := eng.CreateBucket(ctx, BucketSettings{Name: "bench", Type: Couchbase, RAMQuotaMB: int64(max(n*16/100_000, 2))})
	if err != nil {
		b.Fatal(err)
	}
	c := bk.DefaultCollection()
	value := bytes.Repeat([]byte("v"), 1024)
	for i := range n {
		if _, err := c.Upsert(ctx, fmt.Sprintf("k%08d", (i*7919)%n), value, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := bk.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	if err := bk.store.st.(*pebbleStorage).db.Compact(ctx, []byte{0}, []byte{0xff}, true); err != nil {
		b.Fatal(err)
	}
	resident := float64(bk.Stats().ResidentPct)
	run := func(b *testing.B, read func() int) {
		fetched := bk.Stats().BgFetched
		docs := 0
		b.ResetTimer()
		for range b.N {
			if got := read(); got != n {
				b.Fatalf("read %d documents, want %d", got, n)
			}
			docs += n
		}
		b.StopTimer()
		b.ReportMetric(float64(docs)/b.Elapsed().Seconds(), "docs/s")
		b.ReportMetric(100*float64(bk.Stats().BgFetched-fetched)/float64(docs), "%-bg-fetched")
		b.ReportMetric(resident, "%-resident")
	}
	b.Run("point", func(b *testing.B) {
		run(b, func() int {
			docs, err := pointReadFeed(bk)
			if err != nil {
				b.Fatal(err)
			}
			return len(docs)
		})
	})
	b.Run("keyorder", func(b *testing.B) {
		run(b, func() int {
			cur, err := bk.Consumer("bench").Changes(nil)
			if err != nil {
				b.Fatal(err)
			}
			read := 0
			for {
				before := read
				for range cur.Next(20000) {
					read++
				}
				if cur.Err() != nil {
					b.Fatal(cur.Err())
				}
				if read == before {
					return read
				}
			}
		})
	})
}

// withValues over versions copied from the feed, some of which were
// replaced before their values were read: the batched read finds the newer
// versions in the store, and those versions are stepped over (nil, as
// superseded); the others come with their own values, and none is missed.
func TestWithValuesStepsOverReplacedVersions(t *testing.T) {
	ctx := context.Background()
	var cr *countingReads
	eng, err := Open(t.TempDir(), &Options{NumPartitions: 1, NoSync: true,
		wrapStorage: func(st storage) storage { cr = &countingReads{storage: st}; return cr }})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, DefaultBucketSettings("b"))
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	for i := range 20 {
		if _, err := c.Upsert(ctx, fmt.Sprintf("k%02d", 19-i), []byte(fmt.Sprintf(`{"i":%d}`, 19-i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	docs, _, _ := b.parts[0].changesAfter(0, 100, nil)
	for _, d := range docs {
		if !ejectDoc(b, d) {
			t.Fatalf("%s not ejected", d.Key)
		}
	}
	docs, _, _ = b.parts[0].changesAfter(0, 100, nil) // the ejected versions
	replaced := map[string]bool{"k03": true, "k11": true}
	for k := range replaced {
		if _, err := c.Upsert(ctx, k, []byte(`"new"`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	full, n, err := b.withValues(ctx, docs)
	if err != nil || n != len(docs) {
		t.Fatalf("withValues: %d of %d, %v", n, len(docs), err)
	}
	if cr.batches.Load() != 1 {
		t.Errorf("%d batched reads, want 1", cr.batches.Load())
	}
	for i, d := range docs {
		switch {
		case replaced[d.Key]:
			if full[i] != nil {
				t.Errorf("%s, replaced, came back at seq %d with %q", d.Key, full[i].Seq, full[i].Value)
			}
		case full[i] == nil:
			t.Errorf("%s (seq %d) stepped over, not replaced", d.Key, d.Seq)
		default:
			var k int
			fmt.Sscanf(d.Key, "k%d", &k)
			if full[i].Seq != d.Seq || string(full[i].Value) != fmt.Sprintf(`{"i":%d}`, k) {
				t.Errorf("%s: seq %d value %q", d.Key, full[i].Seq, full[i].Value)
			}
		}
	}
}
