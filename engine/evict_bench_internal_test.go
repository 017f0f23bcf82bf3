package engine

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"testing"
)

// evictDocs is how many documents BenchmarkEvictedHeap loads.
var evictDocs = flag.Int("evictdocs", 200_000, "documents BenchmarkEvictedHeap loads")

// BenchmarkEvictedHeap loads -evictdocs small documents (the memory
// issue's shape: an 8-byte key, a 29-byte value) into a couchbase bucket
// kept with Bloom filters, then takes 90% of them out of memory whole
// (evictItemLocked, as fullEviction does) and reports the live heap per
// document before (every record resident, value included) and after (10%
// resident), with the tables as eviction left them and once compacted
// (shrinkTables), and the bucket's own account (mem_used).
func BenchmarkEvictedHeap(b *testing.B) {
	ctx := context.Background()
	value := []byte(`{"type":"t3","n":123,"v":4.5}`)
	var before, kept, after, usedBefore, usedAfter, filters float64
	for range b.N {
		eng, err := Open(b.TempDir(), &Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		bk, err := eng.CreateBucket(ctx, BucketSettings{Name: "heap", RAMQuotaMB: 1024})
		if err != nil {
			b.Fatal(err)
		}
		c := bk.DefaultCollection()
		base := heapNow()
		for i := range *evictDocs {
			if _, err := c.Upsert(ctx, fmt.Sprintf("k%07d", i), value, nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := bk.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		bk.installBloom()
		if err := bk.loadBloom(ctx, bk.store.st); err != nil {
			b.Fatal(err)
		}
		before += float64(heapNow() - base)
		usedBefore += float64(bk.Stats().MemUsed)
		n := 0
		evictItemsB(bk, func(string) bool { n++; return n%10 != 0 })
		// The change logs rebuilt, the records and index as eviction
		// left them (before shrinkTables, every record kept for reuse):
		for _, p := range bk.parts {
			p.mu.Lock()
			p.rebuildLogLocked()
			p.mu.Unlock()
		}
		kept += float64(heapNow() - base)
		// And once an eviction pass compacts them:
		bk.mem.evicting.Lock()
		bk.shrinkTables()
		bk.mem.evicting.Unlock()
		after += float64(heapNow() - base)
		usedAfter += float64(bk.Stats().MemUsed)
		filters += float64(bk.Stats().Bloom.Size)
		runtime.KeepAlive(c)
		if err := eng.Close(); err != nil {
			b.Fatal(err)
		}
	}
	per := func(v float64) float64 { return v / float64(b.N) / float64(*evictDocs) }
	b.ReportMetric(per(before), "heap-B/doc-resident")
	b.ReportMetric(per(kept), "heap-B/doc-10%resident-uncompacted")
	b.ReportMetric(per(after), "heap-B/doc-10%resident")
	b.ReportMetric(per(usedBefore), "mem_used-B/doc-resident")
	b.ReportMetric(per(usedAfter), "mem_used-B/doc-10%resident")
	b.ReportMetric(per(filters), "bloom-B/doc")
}

// evictItemsB is evictItems for a benchmark.
func evictItemsB(b *Bucket, evict func(key string) bool) {
	for _, p := range b.parts {
		p.mu.Lock()
		var slots []uint32
		p.mu.docs.each(func(i uint32) bool {
			if evict(p.mu.docs.keyOf(i)) {
				slots = append(slots, i)
			}
			return true
		})
		for _, i := range slots {
			b.evictItemLocked(p, i)
		}
		p.mu.Unlock()
	}
}

// heapNow returns the bytes of live heap after a full collection.
func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkMissAfterEviction reads keys that no document has from a
// bucket whose items left memory (so a miss may have to ask the store),
// with the partitions' Bloom filters answering (filter) and without them
// (store: every miss a point read of the store), alternately in one run.
func BenchmarkMissAfterEviction(b *testing.B) {
	ctx := context.Background()
	for _, kind := range []string{StoragePebble, StorageBolt} {
		eng, err := Open(b.TempDir(), &Options{NoSync: true, Storage: kind})
		if err != nil {
			b.Fatal(err)
		}
		bk, err := eng.CreateBucket(ctx, BucketSettings{Name: "miss", RAMQuotaMB: 1024})
		if err != nil {
			b.Fatal(err)
		}
		c := bk.DefaultCollection()
		for i := range 100_000 {
			if _, err := c.Upsert(ctx, fmt.Sprintf("k%07d", i), []byte(`{"type":"t3","n":123,"v":4.5}`), nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := bk.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		bk.installBloom()
		if err := bk.loadBloom(ctx, bk.store.st); err != nil {
			b.Fatal(err)
		}
		evictItemsB(bk, func(string) bool { return true })
		for round := range 2 {
			for _, filter := range []bool{true, false} {
				name := "store"
				if filter {
					name = "filter"
				}
				b.Run(fmt.Sprintf("%s/%s/round%d", kind, name, round), func(b *testing.B) {
					bk.bloom.ready.Store(filter)
					for i := range b.N {
						if _, err := c.Get(ctx, fmt.Sprintf("absent%07d", i)); err == nil {
							b.Fatal("an absent key was found")
						}
					}
				})
			}
		}
		bk.bloom.ready.Store(true)
		if err := eng.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWarmupKeysPass reopens a couchbase bucket of -evictdocs small
// documents and reports the warm-up's time and, of it, the pass that reads
// the store's keys into the Bloom filters before the documents load.
func BenchmarkWarmupKeysPass(b *testing.B) {
	ctx := context.Background()
	for _, kind := range []string{StoragePebble, StorageBolt} {
		b.Run(kind, func(b *testing.B) {
			dir := b.TempDir()
			eng, err := Open(dir, &Options{NoSync: true, Storage: kind})
			if err != nil {
				b.Fatal(err)
			}
			bk, err := eng.CreateBucket(ctx, BucketSettings{Name: "w", RAMQuotaMB: 1024})
			if err != nil {
				b.Fatal(err)
			}
			for i := range *evictDocs {
				if _, err := bk.DefaultCollection().Upsert(ctx, fmt.Sprintf("k%07d", i), []byte(`{"type":"t3","n":123,"v":4.5}`), nil); err != nil {
					b.Fatal(err)
				}
			}
			if err := eng.Close(); err != nil {
				b.Fatal(err)
			}
			var warm, keys float64
			for range b.N {
				eng, err := Open(dir, &Options{NoSync: true, Storage: kind})
				if err != nil {
					b.Fatal(err)
				}
				bk, err := eng.Bucket("w")
				if err != nil {
					b.Fatal(err)
				}
				warm += float64(bk.WarmupStats().Time) / 1e3
				// The keys pass again, on fresh filters, timed alone.
				bk.installBloom()
				bk.bloom.ready.Store(false)
				start := stopwatch()
				if err := bk.loadBloom(ctx, bk.store.st); err != nil {
					b.Fatal(err)
				}
				keys += float64(stopwatch().Sub(start).Microseconds()) / 1e3
				if err := eng.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(warm/float64(b.N), "warmup-ms")
			b.ReportMetric(keys/float64(b.N), "keys-pass-ms")
		})
	}
}

// BenchmarkFullEvictionWarmup restarts a bucket of -evictdocs small
// documents, a valueOnly one (its warm-up loads every item, as a
// fullEviction bucket's did before step 4) and a fullEviction one (keys
// into the filters and the counts only), alternately, and reports each
// one's warm-up time and the live heap it holds once warm.
func BenchmarkFullEvictionWarmup(b *testing.B) {
	ctx := context.Background()
	for _, kind := range []string{StoragePebble, StorageBolt} {
		b.Run(kind, func(b *testing.B) {
			dirs := map[EvictionPolicy]string{}
			policies := []EvictionPolicy{ValueOnly, FullEviction}
			for _, policy := range policies {
				dirs[policy] = b.TempDir()
				eng, err := Open(dirs[policy], &Options{NoSync: true, Storage: kind})
				if err != nil {
					b.Fatal(err)
				}
				s := DefaultBucketSettings("w")
				s.EvictionPolicy, s.RAMQuotaMB = policy, 1024
				bk, err := eng.CreateBucket(ctx, s)
				if err != nil {
					b.Fatal(err)
				}
				for i := range *evictDocs {
					if _, err := bk.DefaultCollection().Upsert(ctx, fmt.Sprintf("k%07d", i), []byte(`{"type":"t3","n":123,"v":4.5}`), nil); err != nil {
						b.Fatal(err)
					}
				}
				if err := eng.Close(); err != nil {
					b.Fatal(err)
				}
			}
			warm, heap := map[EvictionPolicy]float64{}, map[EvictionPolicy]float64{}
			for range b.N {
				for _, policy := range policies {
					base := heapNow()
					eng, err := Open(dirs[policy], &Options{NoSync: true, Storage: kind})
					if err != nil {
						b.Fatal(err)
					}
					bk, err := eng.Bucket("w")
					if err != nil {
						b.Fatal(err)
					}
					if n := bk.Stats().CurrItems; n != int64(*evictDocs) {
						b.Fatalf("%s: curr_items %d after a restart", policy, n)
					}
					warm[policy] += float64(bk.WarmupStats().Time) / 1e3
					heap[policy] += float64(heapNow() - base)
					runtime.KeepAlive(bk)
					if err := eng.Close(); err != nil {
						b.Fatal(err)
					}
				}
			}
			for _, policy := range policies {
				b.ReportMetric(warm[policy]/float64(b.N), "warmup-ms-"+string(policy))
				b.ReportMetric(heap[policy]/float64(b.N)/float64(*evictDocs), "heap-B/doc-"+string(policy))
			}
		})
	}
}
