package engine_test

import (
	"context"
	"fmt"
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
func BenchmarkGet(b *testing.B) {
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
		if _, err := c.Upsert(ctx, names[i], []byte(`{"n":1}`), &engine.WriteOptions{Expiry: 3600}); err != nil {
			b.Fatal(err)
		}
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
