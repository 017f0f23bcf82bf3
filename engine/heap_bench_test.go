package engine_test

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// heapDocs is how many documents BenchmarkHeapPerDoc loads.
var heapDocs = flag.Int("heapdocs", 100_000, "documents BenchmarkHeapPerDoc loads")

// BenchmarkHeapPerDoc loads 100,000 small documents (the memory issue's
// shape: a 8-byte key, a 29-byte value; -heapdocs sets how many) into an
// ephemeral and a couchbase bucket and reports the live heap they take per document (heap-B/doc), that beyond
// their key and value (overhead-B/doc), and the bucket's own account of it
// (mem_used-B/doc), which should stay close to the first.
func BenchmarkHeapPerDoc(b *testing.B) {
	for _, typ := range []engine.BucketType{engine.Ephemeral, engine.Couchbase} {
		b.Run(string(typ), func(b *testing.B) { benchHeapPerDoc(b, typ) })
	}
}

func benchHeapPerDoc(b *testing.B, typ engine.BucketType) {
	ctx := context.Background()
	value := []byte(`{"type":"t3","n":123,"v":4.5}`)
	var heap, used float64
	for range b.N {
		eng, err := engine.Open(b.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		bk, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "heap", Type: typ, RAMQuotaMB: 1024})
		if err != nil {
			b.Fatal(err)
		}
		c := bk.DefaultCollection()
		before := liveHeap()
		for i := range *heapDocs {
			if _, err := c.Upsert(ctx, fmt.Sprintf("k%07d", i), value, nil); err != nil {
				b.Fatal(err)
			}
		}
		heap += float64(liveHeap() - before)
		used += float64(bk.Stats().MemUsed)
		runtime.KeepAlive(c)
		if err := eng.Close(); err != nil {
			b.Fatal(err)
		}
	}
	per := heap / float64(b.N) / float64(*heapDocs)
	b.ReportMetric(per, "heap-B/doc")
	b.ReportMetric(per-float64(len("k0000000")+len(value)), "overhead-B/doc")
	b.ReportMetric(used/float64(b.N)/float64(*heapDocs), "mem_used-B/doc")
}

// liveHeap returns the bytes of live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
