package views_test

import (
	"context"
	"io"
	"net/url"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/views"
)

// BenchmarkScatter measures what answering across three nodes costs the
// views package against one node answering alone, on one index of
// benchDocs() documents (MAYFLY_BENCH_DOCS), alternately in each
// iteration: Run alone, then this node's share of a third of the
// partitions (Partial with Share.Partitions; each node's index keeps
// answering the same share, so its cached share reductions are warm) and
// the Merge of it with the two other nodes' shares (computed before: on
// their nodes they are computed at the same time as this one). It reports
// both times and their ratio. The network between nodes is not in it.
func BenchmarkScatter(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a large bucket")
	}
	n := benchDocs()
	eng, err := engine.Open(b.TempDir(), &engine.Options{Clock: engine.NewFakeClock(t0), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default")); err != nil {
		b.Fatal(err)
	}
	loadBench(b, eng, n, 0)
	svc, err := views.New(context.Background(), eng, &views.Options{NoAutoUpdate: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { svc.Close(); eng.Close() }()
	if _, err := svc.PutDesignDoc(context.Background(), "default", "bench", []byte(benchDDoc)); err != nil {
		b.Fatal(err)
	}
	runQuery(b, svc, "stale=false&limit=0")
	bk, _ := eng.Bucket("default")
	ctx := context.Background()
	for _, c := range []struct{ name, params string }{
		{"reduce_full", "stale=ok"},
		{"reduce_group_level_1", "stale=ok&group_level=1"},
		{"range_100", `stale=ok&reduce=false&startkey=["t3",5000]&limit=100`},
		{"range_100_skip_1000", `stale=ok&reduce=false&startkey=["t3",5000]&skip=1000&limit=100`},
	} {
		b.Run(c.name, func(b *testing.B) {
			v, _ := url.ParseQuery(c.params)
			p, err := views.ParseParams(v, nil)
			if err != nil {
				b.Fatal(err)
			}
			prep := func() *views.Query {
				q, err := svc.Prepare(ctx, "default", "bench", "v", p)
				if err != nil {
					b.Fatal(err)
				}
				return q
			}
			share := func(node int) *views.Partial {
				covered := make([]bool, bk.NumPartitions())
				for p := range covered {
					covered[p] = p%3 == node
				}
				part, err := prep().Partial(ctx, views.Share{Partitions: covered})
				if err != nil {
					b.Fatal(err)
				}
				return part
			}
			// The other two nodes' shares, computed on their own nodes at
			// the same time as this one's: their answers as they arrive.
			others := []*views.Partial{share(1), share(2)}
			share(0) // this node's index warms its caches for its share once
			var alone, across time.Duration
			for range b.N {
				start := time.Now() // wall clock: a benchmark's own timing
				if err := prep().Run(ctx, io.Discard); err != nil {
					b.Fatal(err)
				}
				alone += time.Since(start)
				start = time.Now() // wall clock: a benchmark's own timing
				parts := append([]*views.Partial{share(0)}, others...)
				if err := prep().Merge(ctx, parts, nil, io.Discard); err != nil {
					b.Fatal(err)
				}
				across += time.Since(start)
			}
			b.ReportMetric(float64(alone.Nanoseconds())/float64(b.N), "alone-ns/op")
			b.ReportMetric(float64(across.Nanoseconds())/float64(b.N), "3shares-ns/op")
			b.ReportMetric(float64(across)/float64(alone), "ratio")
		})
	}
}
