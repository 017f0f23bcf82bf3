package engine

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
)

// countingScans is a store that counts the documents its backfill reads
// (docsAfter) return.
type countingScans struct {
	storage
	read atomic.Int64
}

func (c *countingScans) docsAfter(after docKey, from bool, n int, out []*Document) ([]*Document, error) {
	l := len(out)
	out, err := c.storage.docsAfter(after, from, n, out)
	c.read.Add(int64(len(out) - l))
	return out, err
}

// backfillBucket opens a fullEviction pebble bucket of parts partitions
// holding n documents (the first n/10 of them deleted), every item out of
// memory whole, its store counting the documents backfills read.
func backfillBucket(t testing.TB, parts, n int) (*Bucket, *countingScans) {
	t.Helper()
	ctx := context.Background()
	var cs *countingScans
	eng, err := Open(t.TempDir(), &Options{NumPartitions: parts, NoSync: true, Storage: StoragePebble,
		wrapStorage: func(st storage) storage { cs = &countingScans{storage: st}; return cs }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	b, err := eng.CreateBucket(ctx, BucketSettings{Name: "bf", EvictionPolicy: FullEviction})
	if err != nil {
		t.Fatal(err)
	}
	c := b.DefaultCollection()
	for i := range n {
		if _, err := c.Upsert(ctx, fmt.Sprintf("k%06d", i), fmt.Appendf(nil, `{"n":%d}`, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n / 10 {
		if _, err := c.Delete(ctx, fmt.Sprintf("k%06d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if out := evictItems(b, func(string) bool { return true }); out < n*8/10 {
		t.Fatalf("%d of %d items left memory", out, n)
	}
	return b, cs
}

// readWindow reads b's change feed from 0 as a _changes window does:
// partition by partition, limit versions a read, each partition from where
// an earlier backfill's Ahead says, taking at most readAhead versions (0:
// reading no partition ahead). It returns the live keys and tombstones
// seen, each with how many times it came.
func readWindow(t testing.TB, b *Bucket, limit, readAhead int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	var ahead []uint64
	hi := b.MaxCAS()
	for p := range b.parts {
		s := ChangeScan{Part: p, Hi: hi, Limit: limit, ReadAhead: readAhead, MetaOnly: true}
		if p < len(ahead) {
			s.After = ahead[p]
		}
		for more := true; more; more = s.More {
			s.Docs = s.Docs[:0]
			b.ScanChanges(&s)
			if s.Err != nil {
				t.Fatal(s.Err)
			}
			for _, d := range s.Docs {
				if int(d.Partition) < p || readAhead == 0 && int(d.Partition) != p {
					t.Fatalf("partition %d's read yields %q of partition %d", p, d.Key, d.Partition)
				}
				seen[fmt.Sprintf("%s/%v", d.Key, d.Deleted)]++
			}
			if s.Ahead != nil {
				ahead = s.Ahead
			}
		}
	}
	return seen
}

// TestChangesWindowBackfillsInOnePass: a _changes window read from 0 over a
// fullEviction bucket whose every partition has items out of memory reads
// the store once (its first partition's backfill reads the later ones'
// too: ReadAhead), not once per partition, nor a chunk again for each
// read that stops inside it, and still yields every live document and
// tombstone exactly once (nothing changes meanwhile). On the old code each
// partition's backfill passed over the whole store (64 partitions read it
// 64 times), and a read of 100 documents read 512.
func TestChangesWindowBackfillsInOnePass(t *testing.T) {
	const parts, n = 64, 3000
	b, cs := backfillBucket(t, parts, n)
	check := func(seen map[string]int) {
		t.Helper()
		for i := range n {
			k := fmt.Sprintf("k%06d/%v", i, i < n/10)
			if seen[k] != 1 {
				t.Fatalf("%s came %d times, want once", k, seen[k])
			}
		}
		if len(seen) != n {
			t.Fatalf("%d documents seen, want %d", len(seen), n)
		}
	}
	for _, limit := range []int{100, 1000} {
		cs.read.Store(0)
		check(readWindow(t, b, limit, math.MaxInt))
		if got := cs.read.Load(); got != n {
			t.Errorf("limit %d: a window's backfills read %d stored documents, the store holds %d", limit, got, n)
		}
	}
	// A reader that takes at most a quarter of the documents reads ahead
	// what it can take whole: a few passes, each over a quarter of the
	// partitions.
	cs.read.Store(0)
	check(readWindow(t, b, 100, n/4))
	if got := cs.read.Load(); got > 5*n {
		t.Errorf("reading ahead a quarter at a time, a window's backfills read %d stored documents, want at most 5 passes (%d)", got, 5*n)
	}
	// A reader that does not read ahead backfills each partition with a
	// pass of its own (what ReadAhead saves).
	cs.read.Store(0)
	check(readWindow(t, b, 1000, 0))
	if got := cs.read.Load(); got < int64(parts/2*n) {
		t.Errorf("without ReadAhead a window's backfills read %d stored documents, want one pass a partition (%d)", got, parts*n)
	}
}
