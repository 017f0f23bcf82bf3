package engine

import (
	"bytes"
	"context"
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

// A change-feed cursor over a bucket whose values are mostly ejected (1,000
// documents of 4 KiB under a 1 MiB quota) yields exactly what the feed
// yields one point read at a time (Bucket.Changes: the same versions, in
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

			// The reference: the feed read in one go, a point read each.
			want, _, err := b.Changes(nil, 0)
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
			if b.Stats().NonResident != nonResident {
				t.Errorf("the cursor changed residency: %d non-resident, was %d", b.Stats().NonResident, nonResident)
			}
		})
	}
}
