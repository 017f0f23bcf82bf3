package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// benchUpsert measures upserts with an expiry through the engine API, from
// `writers` concurrent goroutines, so group commit can batch them.
func benchUpsert(b *testing.B, typ engine.BucketType, writers int) {
	ctx := context.Background()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(b.TempDir(), &engine.Options{Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	bk, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "bench", Type: typ})
	if err != nil {
		b.Fatal(err)
	}
	c := bk.DefaultCollection()
	value := []byte(`{"type":"player","name":"someone","score":1234,"level":7}`)
	var n atomic.Int64
	b.SetParallelism(max(1, writers/2)) // RunParallel starts GOMAXPROCS × this
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, err := c.Upsert(ctx, fmt.Sprint("key", i%1_000_000), value, &engine.WriteOptions{Expiry: 3600}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkUpsertPersisted: durable upserts (fsync'd group commits), 128 writers.
func BenchmarkUpsertPersisted(b *testing.B) { benchUpsert(b, engine.Couchbase, 128) }

// BenchmarkUpsertEphemeral: in-memory upserts.
func BenchmarkUpsertEphemeral(b *testing.B) { benchUpsert(b, engine.Ephemeral, 2) }

// BenchmarkGet measures in-memory gets of a persistent bucket's documents.
func BenchmarkGet(b *testing.B) { benchGetOrdered(b, &engine.WriteOptions{Expiry: 3600}) }

// BenchmarkGetUnpinned: the same reads of documents written without an
// expiry (as most clients write), whose reads check whether their
// collection slides.
func BenchmarkGetUnpinned(b *testing.B) { benchGetOrdered(b, nil) }

// benchGetOrdered writes 100,000 documents with opts and reads them in the
// order written, from GOMAXPROCS goroutines.
func benchGetOrdered(b *testing.B, opts *engine.WriteOptions) {
	ctx := context.Background()
	eng, err := engine.Open(b.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	bk, _ := eng.CreateBucket(ctx, engine.BucketSettings{Name: "bench"})
	c := bk.DefaultCollection()
	const keys = 100_000
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprint("key", i)
		if _, err := c.Upsert(ctx, names[i], []byte(`{"n":1}`), opts); err != nil {
			b.Fatal(err)
		}
	}
	// The writes' commits to disk finish before the clock starts: at -cpu 1
	// the backlog would otherwise run inside the timed reads.
	if err := bk.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Get(ctx, names[n.Add(1)%keys]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// benchGets measures gets of 100,000 documents of a persisted (fsync'd)
// bucket from GOMAXPROCS goroutines. With sliding, the collection has
// idleTTL and maxLifetime, and the (fake) clock moves one second every
// 1,000,000 reads: each document is read about ten times a second, and the
// first read of it in each second slides its expiration, an extension
// queued for the next group commit (the read does not wait for it). So
// about one read in ten extends, whatever the machine's speed.
func benchGets(b *testing.B, sliding bool) {
	ctx := context.Background()
	clk := engine.NewFakeClock(t0)
	eng, err := engine.Open(b.TempDir(), &engine.Options{Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	bk, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	cs := engine.CollectionSettings{}
	if sliding {
		cs.IdleTTL, cs.MaxLifetime = 1800, 86400*30
	}
	if err := bk.CreateScope(ctx, "app"); err != nil {
		b.Fatal(err)
	}
	if _, err := bk.CreateCollectionWith(ctx, "app", "sessions", cs); err != nil {
		b.Fatal(err)
	}
	c, err := bk.Collection("app", "sessions")
	if err != nil {
		b.Fatal(err)
	}
	const keys = 100_000
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprint("session", i)
	}
	// Load concurrently so group commit batches the durable writes.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < keys; i = next.Add(1) - 1 {
				if _, err := c.Upsert(ctx, names[i], []byte(`{"user":"u","cart":[1,2,3]}`), nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	extends0 := bk.Stats().SlidingExtends
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if i%1_000_000 == 0 {
				clk.Advance(1)
			}
			if _, err := c.Get(ctx, names[(i*7919)%keys]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
	if sliding {
		b.ReportMetric(float64(bk.Stats().SlidingExtends-extends0)/float64(b.N), "extends/read")
	}
}

// BenchmarkGetPlain: reads of a collection without sliding expiry.
func BenchmarkGetPlain(b *testing.B) { benchGets(b, false) }

// BenchmarkGetSliding: the same reads with idleTTL and maxLifetime set
// (issue 10's target: at least half of BenchmarkGetPlain's throughput).
func BenchmarkGetSliding(b *testing.B) { benchGets(b, true) }

// BenchmarkForecast1M: the expiry forecast (GET /{bucket}/_expiry) of a
// bucket of 1,000,000 documents that all expire within its 24-hour horizon,
// in hourly intervals (issue 10's target: under 50 ms).
func BenchmarkForecast1M(b *testing.B) {
	ctx := context.Background()
	eng, err := engine.Open(b.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0)})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	bk, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "bench", Type: engine.Ephemeral})
	if err != nil {
		b.Fatal(err)
	}
	c := bk.DefaultCollection()
	const docs = 1_000_000
	value := []byte(`{"type":"session","user":"someone"}`)
	for i := range docs {
		if _, err := c.Upsert(ctx, fmt.Sprint("doc", i), value, &engine.WriteOptions{Expiry: 60 + int64(i%86000)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		f, err := bk.Forecast(3600, 86400)
		if err != nil {
			b.Fatal(err)
		}
		var total int64
		for _, iv := range f.Intervals {
			total += iv.Docs
		}
		if total != docs {
			b.Fatalf("forecast counts %d documents, want %d", total, docs)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/forecast")
}

// BenchmarkUpsertNone measures the engine's side of a memcached set at
// durability none (BENCHMARKS.md, "The engine's write path at none"): a
// couchbase bucket acknowledging from memory, 1,000 keys of 100 bytes written
// over and over without an expiry, from 50 goroutines as the memcached
// benchmark's 50 connections. Its allocations per operation are the write
// path's own (the keys are made up front). With 1,024 partitions (a
// server's) nearly every key is its partition's only one, and a batch
// touches nearly as many partitions as it holds writes.
func BenchmarkUpsertNone(b *testing.B) {
	for _, parts := range []int{64, 1024} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) { benchUpsertNone(b, parts) })
	}
}

func benchUpsertNone(b *testing.B, parts int) {
	ctx := context.Background()
	eng, err := engine.Open(b.TempDir(), &engine.Options{NumPartitions: parts})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	bk, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "bench", Type: engine.Couchbase, DurabilityMinLevel: engine.DurabilityNone})
	if err != nil {
		b.Fatal(err)
	}
	c := bk.DefaultCollection()
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key:%d", i)
	}
	value := make([]byte, 100)
	var n atomic.Int64
	b.SetParallelism(25) // 50 goroutines on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, err := c.Upsert(ctx, keys[(i*7919)%1000], value, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
