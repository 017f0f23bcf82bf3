package jsruntime_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/mayflydb/mayfly/jsruntime"
)

// benchDocs returns n small JSON documents like {"type":"t3","n":123,"v":4.5}.
func benchDocs(n int) []jsruntime.Doc {
	docs := make([]jsruntime.Doc, n)
	for i := range docs {
		docs[i] = jsruntime.Doc{
			Value: fmt.Appendf(nil, `{"type":"t%d","n":%d,"v":%d.5}`, i%10, i, i%100),
			Meta:  jsruntime.Meta{ID: "doc" + strconv.Itoa(i), Seq: uint64(i + 1), Type: jsruntime.TypeJSON},
		}
	}
	return docs
}

// benchMap maps batches of small documents through mapSrc with the given
// number of workers and reports documents per second.
func benchMap(b *testing.B, workers int, mapSrc string) {
	p := jsruntime.NewPool(&jsruntime.Options{Workers: workers})
	defer p.Close()
	pr, err := p.Load([]jsruntime.ViewSource{{Name: "v", Map: mapSrc}})
	if err != nil {
		b.Fatal(err)
	}
	const batch = 1000
	docs := benchDocs(100_000)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	mapped := 0
	for i := 0; i < b.N; i++ {
		start := (i * batch) % len(docs)
		res, err := pr.Map(ctx, docs[start:start+batch])
		if err != nil {
			b.Fatal(err)
		}
		if res[0][0].Err != nil || len(res[0][0].Emits) != 1 {
			b.Fatalf("unexpected result %+v", res[0][0])
		}
		mapped += batch
	}
	b.ReportMetric(float64(mapped)/b.Elapsed().Seconds(), "docs/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(mapped), "ns/doc")
}

const benchMapSrc = `function (doc, meta) { emit([doc.type, doc.n], doc.v); }`

func BenchmarkMap(b *testing.B) {
	b.Run("workers=NumCPU", func(b *testing.B) { benchMap(b, runtime.NumCPU(), benchMapSrc) })
	b.Run("workers=1", func(b *testing.B) { benchMap(b, 1, benchMapSrc) })
}

func BenchmarkMapMeta(b *testing.B) {
	benchMap(b, runtime.NumCPU(), `function (doc, meta) { emit(meta.id, doc.v); }`)
}

func BenchmarkMapMetaOnly(b *testing.B) {
	benchMap(b, runtime.NumCPU(), `function (doc, meta) { emit(meta.id, null); }`)
}

// benchReduce reduces batches of n number values with reduce.
func benchReduce(b *testing.B, reduce string, n int, rereduce bool) {
	p := jsruntime.NewPool(nil)
	defer p.Close()
	pr, err := p.Load([]jsruntime.ViewSource{{Name: "v", Map: benchMapSrc, Reduce: reduce}})
	if err != nil {
		b.Fatal(err)
	}
	r, _ := pr.Reducer("v")
	keys := make([][]byte, n)
	ids := make([]string, n)
	vals := make([][]byte, n)
	for i := range vals {
		keys[i] = fmt.Appendf(nil, `["t%d",%d]`, i%10, i)
		ids[i] = "doc" + strconv.Itoa(i)
		vals[i] = fmt.Appendf(nil, "%d.5", i%100)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var err error
		if rereduce {
			_, err = r.Rereduce(ctx, vals)
		} else {
			_, err = r.Reduce(ctx, keys, ids, vals)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "values/s")
}

func BenchmarkReduceSum(b *testing.B) {
	b.Run("builtin/reduce", func(b *testing.B) { benchReduce(b, "_sum", 1000, false) })
	b.Run("builtin/rereduce", func(b *testing.B) { benchReduce(b, "_sum", 1000, true) })
	const js = `function (keys, values, rereduce) { return sum(values); }`
	b.Run("js/reduce", func(b *testing.B) { benchReduce(b, js, 1000, false) })
	b.Run("js/rereduce", func(b *testing.B) { benchReduce(b, js, 1000, true) })
}

func BenchmarkReduceStats(b *testing.B) {
	benchReduce(b, "_stats", 1000, false)
}
