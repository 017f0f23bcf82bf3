package search

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/mayflydb/mayfly/engine"
)

// benchDocs returns n synthetic documents: 20 words of a 2,000-word
// vocabulary (Zipf-like), a category and a number; every tenth expires.
func benchDocs(n int) (keys []string, values [][]byte) {
	r := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, 1999)
	for i := range n {
		var words []string
		for range 20 {
			words = append(words, fmt.Sprintf("w%d", zipf.Uint64()))
		}
		keys = append(keys, fmt.Sprintf("doc%06d", i))
		values = append(values, fmt.Appendf(nil, `{"text":%q,"category":"c%d","n":%d}`, strings.Join(words, " "), r.IntN(20), r.IntN(1000)))
	}
	return keys, values
}

// benchSize is the documents the build and query benchmarks index: 50,000,
// or $MAYFLY_SEARCH_BENCH_N (1000000 for BENCHMARKS.md's figures).
func benchSize(b *testing.B) int {
	v := os.Getenv("MAYFLY_SEARCH_BENCH_N")
	if v == "" {
		return 50000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("MAYFLY_SEARCH_BENCH_N=%q: want a positive integer", v)
	}
	return n
}

func benchEngine(b *testing.B, keys []string, values [][]byte) (*engine.Engine, *engine.Bucket) {
	ctx := context.Background()
	eng, err := engine.Open(b.TempDir(), &engine.Options{Clock: engine.NewFakeClock(1_700_000_000), NumPartitions: 64, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	bk, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		b.Fatal(err)
	}
	for i, k := range keys {
		var exp int64
		if i%10 == 0 {
			exp = 3600
		}
		if _, err := bk.DefaultCollection().Upsert(ctx, k, values[i], &engine.WriteOptions{Expiry: exp}); err != nil {
			b.Fatal(err)
		}
	}
	if err := bk.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	return eng, bk
}

// benchService is a search service over an engine loaded by benchEngine;
// both close when the benchmark ends.
func benchService(b *testing.B, keys []string, values [][]byte) (*Service, *engine.Engine) {
	eng, _ := benchEngine(b, keys, values)
	b.Cleanup(func() { eng.Close() })
	s, err := New(context.Background(), eng, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, eng
}

// BenchmarkBuild indexes benchSize documents (50,000 unless
// $MAYFLY_SEARCH_BENCH_N) both ways in every iteration, in turns (so that
// the machine's load weighs on both alike): Mayfly from the change feed (a
// persistent bucket, batches acknowledged once on disk), and bleve's own
// batch indexing of the same documents into scorch with the same batch
// size. It reports each one's rate and Mayfly's as a percentage of bleve's.
func BenchmarkBuild(b *testing.B) {
	benchN := benchSize(b)
	keys, values := benchDocs(benchN)
	s, _ := benchService(b, keys, values)
	ctx := context.Background()
	mayfly := func(i int) time.Duration {
		name := fmt.Sprint("i", i)
		start := time.Now()
		if _, err := s.PutIndex(ctx, "default", name, []byte(`{}`)); err != nil {
			b.Fatal(err)
		}
		out, err := s.Search(ctx, "default", name, []byte(`{"query":{"match_all":{}},"size":0,"ctl":{"timeout":0,"consistency":{"level":"at_plus"}}}`))
		if err != nil || out.Total != uint64(benchN) {
			b.Fatalf("%v %v", out, err)
		}
		took := time.Since(start)
		if err := s.DeleteIndex(ctx, "default", name); err != nil {
			b.Fatal(err)
		}
		return took
	}
	bleveOwn := func() time.Duration {
		start := time.Now()
		idx, err := bleve.NewUsing(filepath.Join(b.TempDir(), "x"), bleve.NewIndexMapping(), scorch.Name, scorch.Name, nil)
		if err != nil {
			b.Fatal(err)
		}
		bt := idx.NewBatch()
		for j, k := range keys {
			var m map[string]any
			if err := json.Unmarshal(values[j], &m); err != nil {
				b.Fatal(err)
			}
			bt.Index(k, m)
			if bt.Size() == DefaultBatchSize {
				if err := idx.Batch(bt); err != nil {
					b.Fatal(err)
				}
				bt = idx.NewBatch()
			}
		}
		if err := idx.Batch(bt); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		idx.Close()
		return took
	}
	var tm, tb time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			tm += mayfly(i)
			tb += bleveOwn()
		} else {
			tb += bleveOwn()
			tm += mayfly(i)
		}
	}
	b.ReportMetric(float64(benchN*b.N)/tm.Seconds(), "mayfly-docs/s")
	b.ReportMetric(float64(benchN*b.N)/tb.Seconds(), "bleve-docs/s")
	b.ReportMetric(100*tb.Seconds()/tm.Seconds(), "mayfly-%-of-bleve")
}

// BenchmarkExpiryFilter measures a match query with and without the expiry
// filter every query carries, each iteration running every variant in turn
// (so that the machine's load weighs on all alike) and reporting each one's
// mean time: none (the query alone, expired documents included), must_not
// (the filter as a bool must_not clause, used for mappings with synonyms),
// live (liveQuery, the filter every other query gets), live_cold (liveQuery
// with an empty cache: the cost of the first query on a new index
// snapshot or second); and live's overhead over none, in percent.
func BenchmarkExpiryFilter(b *testing.B) {
	keys, values := benchDocs(benchSize(b))
	s, eng := benchService(b, keys, values)
	ctx := context.Background()
	if _, err := s.PutIndex(ctx, "default", "i", []byte(`{}`)); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Query(ctx, "default", "i", []byte(`{"query":{"match_all":{}},"ctl":{"timeout":0,"consistency":{"level":"at_plus"}}}`)); err != nil {
		b.Fatal(err)
	}
	ix, _ := s.indexerFor("default", "i")
	modes := []string{"none", "must_not", "live", "live_cold"}
	for _, expired := range []bool{false, true} {
		if expired { // a tenth of the documents expired, not purged
			eng.Clock().(*engine.FakeClock).Advance(3600)
		}
		for _, word := range []string{"w1", "w500"} {
			mq := query.NewMatchQuery(word)
			mq.SetField("text")
			b.Run(fmt.Sprintf("expired=%v/%s", expired, word), func(b *testing.B) {
				took := make([]time.Duration, len(modes))
				hits := make([]uint64, len(modes))
				for i := 0; b.Loop(); i++ {
					for j := range modes {
						m := (i + j) % len(modes)
						now := eng.Clock().Now()
						start := time.Now()
						var res *bleve.SearchResult
						var err error
						switch modes[m] {
						case "none":
							res, err = ix.run(ctx, bleve.NewSearchRequest(mq))
						case "must_not":
							res, err = ix.run(ctx, bleve.NewSearchRequest(live(mq, now)))
						case "live":
							res, err = ix.runLive(ctx, bleve.NewSearchRequest(mq), now)
						case "live_cold": // a cache of its own, empty
							res, err = ix.run(ctx, bleve.NewSearchRequest(&liveQuery{q: mq, now: now, cache: &expiredCache{}}))
						}
						took[m] += time.Since(start)
						if err != nil {
							b.Fatal(err)
						}
						hits[m] = res.Total
					}
				}
				for m, name := range modes {
					b.ReportMetric(float64(took[m].Microseconds())/float64(b.N), name+"-µs/op")
				}
				b.ReportMetric(100*(float64(took[2])/float64(took[0])-1), "live-overhead-%")
				if hits[1] != hits[2] || hits[2] != hits[3] {
					b.Fatalf("hits: must_not %d, live %d, live_cold %d", hits[1], hits[2], hits[3])
				}
				b.ReportMetric(float64(hits[2]), "live-hits")
			})
		}
	}
}

// BenchmarkQueryLatency times queries through Query (the JSON request and
// answer the HTTP route uses) on an index of benchSize documents, top 10
// hits by score, and reports their p50 and p99.
func BenchmarkQueryLatency(b *testing.B) {
	keys, values := benchDocs(benchSize(b))
	s, _ := benchService(b, keys, values)
	ctx := context.Background()
	if _, err := s.PutIndex(ctx, "default", "i", []byte(`{}`)); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Query(ctx, "default", "i", []byte(`{"query":{"match_all":{}},"size":0,"ctl":{"timeout":0,"consistency":{"level":"at_plus"}}}`)); err != nil {
		b.Fatal(err)
	}
	for _, q := range []struct{ name, query string }{
		{"match/common", `{"match":"w1","field":"text"}`},
		{"match/rare", `{"match":"w500","field":"text"}`},
		{"match/two_words", `{"match":"w3 w700","field":"text"}`},
		{"query_string/must_not_field", `{"query":"+text:w2 -text:w1 category:c3"}`},
		{"query_string/range", `{"query":"n:>=500 text:w10"}`},
	} {
		req := []byte(`{"query":` + q.query + `,"size":10}`)
		b.Run(q.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := s.Query(ctx, "default", "i", req); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			pct := func(p float64) float64 {
				return float64(took[min(len(took)-1, int(p*float64(len(took))))].Microseconds())
			}
			b.ReportMetric(pct(0.50), "p50-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
		})
	}
}

// BenchmarkBuildPeakHeap indexes 1,000 documents of 20 KB of text
// ($MAYFLY_SEARCH_BENCH_BIGDOCS documents), dynamic mapping, from the
// change feed, with batches bounded by documents alone (the 2,000 of
// DefaultBatchSize: "docs") and by DefaultBatchBytes too ("bytes"), and
// reports the heap's peak over each build (live objects, sampled every
// 2 ms, after a collection before the build) and its rate. Each variant
// runs on an engine of its own, in turns.
func BenchmarkBuildPeakHeap(b *testing.B) {
	n := 1000
	if v := os.Getenv("MAYFLY_SEARCH_BENCH_BIGDOCS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("MAYFLY_SEARCH_BENCH_BIGDOCS=%q: want a positive integer", v)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(7, 8)), 1.05, 1, 99_999)
	keys := make([]string, n)
	values := make([][]byte, n)
	for i := range n {
		var sb strings.Builder
		for sb.Len() < 20_000 {
			fmt.Fprintf(&sb, "w%d ", zipf.Uint64())
		}
		keys[i] = fmt.Sprintf("doc%06d", i)
		values[i] = fmt.Appendf(nil, `{"text":%q,"n":%d}`, sb.String(), r.IntN(1000))
	}
	variants := []struct {
		name  string
		bytes int
	}{{"docs", 1 << 40}, {"bytes", 0}}
	type result struct {
		peak uint64
		took time.Duration
	}
	results := make([]result, len(variants))
	build := func(v int) {
		eng, _ := benchEngine(b, keys, values)
		defer eng.Close()
		ctx := context.Background()
		s, err := New(ctx, eng, &Options{BatchBytes: variants[v].bytes})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		runtime.GC()
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak atomic.Uint64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(2 * time.Millisecond)
			defer t.Stop()
			for {
				metrics.Read(sample)
				if h := sample[0].Value.Uint64(); h > peak.Load() {
					peak.Store(h)
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
		start := time.Now()
		if _, err := s.PutIndex(ctx, "default", "big", []byte(`{}`)); err != nil {
			b.Fatal(err)
		}
		out, err := s.Search(ctx, "default", "big", []byte(`{"query":{"match_all":{}},"size":0,"ctl":{"timeout":0,"consistency":{"level":"at_plus"}}}`))
		if err != nil || out.Total != uint64(n) {
			b.Fatalf("%v %v", out, err)
		}
		took := time.Since(start)
		close(stop)
		<-done
		results[v].peak = max(results[v].peak, peak.Load())
		results[v].took += took
	}
	for i := 0; b.Loop(); i++ {
		for j := range variants {
			build((i + j) % len(variants))
		}
	}
	for v, res := range results {
		b.ReportMetric(float64(res.peak)/(1<<20), variants[v].name+"-peak-heap-MiB")
		b.ReportMetric(float64(n*b.N)/res.took.Seconds(), variants[v].name+"-docs/s")
	}
}
