package index_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/index"
)

// Benchmark data: benchRows single-row documents doc0000000…, applied in
// batches of benchBatch, each emitting [group, n] with one of benchGroups
// string groups and a random number, and the value 1, into a view with a
// count-and-sum reduce.
const (
	benchRows   = 1_000_000
	benchBatch  = 4096
	benchGroups = 1000
)

func benchConfig(path string) index.Config {
	return index.Config{
		Path:          path,
		Signature:     "bench",
		NumPartitions: 1024,
		Views:         []index.ViewConfig{{Name: "v", Reducer: &countSum{}}},
	}
}

func benchKey(rng *rand.Rand) []byte {
	return fmt.Appendf(nil, `["g%04d",%d]`, rng.IntN(benchGroups), rng.IntN(1_000_000))
}

// benchBatches builds the updates, outside any timing.
func benchBatches() [][]index.DocUpdate { return benchBatchesOrder(false) }

// benchBatchesOrder is benchBatches, with the documents' ids scattered
// (a permutation of them) if scattered: the order of a build that reads
// the feed partition by partition, whose documents' ids are hashed to
// partitions, so each batch's back-index entries land all over the back
// index, as its rows land all over the tree.
func benchBatchesOrder(scattered bool) [][]index.DocUpdate {
	rng := rand.New(rand.NewPCG(1, 2))
	var out [][]index.DocUpdate
	for start := 0; start < benchRows; start += benchBatch {
		batch := make([]index.DocUpdate, 0, benchBatch)
		for i := start; i < min(start+benchBatch, benchRows); i++ {
			batch = append(batch, index.DocUpdate{
				DocID:     benchDocID(i, scattered),
				Partition: uint16(i % 1024),
				Seq:       uint64(i/1024 + 1),
				Rows:      map[string][]index.Emit{"v": {{Key: benchKey(rng), Value: []byte("1")}}},
			})
		}
		out = append(out, batch)
	}
	return out
}

// benchDocID is the id of the benchmark's i-th document: doc and i, or
// if scattered a permutation of i (7919 is prime to benchRows).
func benchDocID(i int, scattered bool) string {
	if scattered {
		i = i * 7919 % benchRows
	}
	return fmt.Sprintf("doc%07d", i)
}

// buildBench opens an index at path ("" for memory only) and applies the
// benchmark data to it.
func buildBench(b *testing.B, path string) *index.Index {
	b.Helper()
	ix, err := index.Open(context.Background(), benchConfig(path))
	if err != nil {
		b.Fatal(err)
	}
	for _, batch := range benchBatches() {
		if err := ix.Apply(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	return ix
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkApply loads 1,000,000 single-row documents into a persisted index,
// in batches of 4096, each batch one Apply. "cpu-s" is the CPU time the
// process used (all threads, GC included), a steadier figure than wall time
// on a shared machine.
func BenchmarkApply(b *testing.B) {
	batches := benchBatches()
	dir := b.TempDir()
	run := 0
	cpu := cpuTime()
	for b.Loop() {
		run++
		ix, err := index.Open(context.Background(), benchConfig(filepath.Join(dir, fmt.Sprint(run))))
		if err != nil {
			b.Fatal(err)
		}
		for _, batch := range batches {
			if err := ix.Apply(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		ix.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric((cpuTime()-cpu).Seconds()/float64(b.N), "cpu-s")
}

// BenchmarkApplyUpdate re-applies 4096 documents of a 1,000,000-row persisted
// index with new keys: each removes its old row (found through the back index)
// and inserts a new one. A checkpoint (about every 500,000 updated documents
// at this size) may fall in the measured batches.
func BenchmarkApplyUpdate(b *testing.B) {
	path := filepath.Join(b.TempDir(), "ix")
	buildBench(b, path).Close()
	ix, err := index.Open(context.Background(), benchConfig(path))
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	docs := 0
	for b.Loop() {
		b.StopTimer()
		batch := make([]index.DocUpdate, benchBatch)
		for i := range batch {
			batch[i] = index.DocUpdate{
				DocID: fmt.Sprintf("doc%07d", rng.IntN(benchRows)),
				Rows:  map[string][]index.Emit{"v": {{Key: benchKey(rng), Value: []byte("1")}}},
			}
		}
		b.StartTimer()
		if err := ix.Apply(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		docs += len(batch)
	}
	b.ReportMetric(float64(docs)/b.Elapsed().Seconds(), "docs/s")
}

// BenchmarkReduceFull reduces the whole of a 1,000,000-row view (group_level
// 0) once its reductions are cached; "cold-ms" is the first reduce after the
// build, which computes them.
func BenchmarkReduceFull(b *testing.B) {
	ix := buildBench(b, "")
	defer ix.Close()
	reduceOnce := func() {
		n := 0
		err := ix.Reduce(context.Background(), "v", index.Range{}, index.Grouping{}, func(k, v []byte) error {
			n++
			return nil
		})
		if err != nil || n != 1 {
			b.Fatalf("reduce: %d rows, %v", n, err)
		}
	}
	start := time.Now()
	reduceOnce()
	cold := time.Since(start)
	for b.Loop() {
		reduceOnce()
	}
	b.ReportMetric(float64(cold.Microseconds())/1000, "cold-ms")
}

// BenchmarkReduceGroupLevel1 reduces a 1,000,000-row view with group_level=1:
// 1000 groups of about 1000 rows each.
func BenchmarkReduceGroupLevel1(b *testing.B) {
	ix := buildBench(b, "")
	defer ix.Close()
	groups := 0
	reduceOnce := func() {
		groups = 0
		err := ix.Reduce(context.Background(), "v", index.Range{}, index.Grouping{Level: 1}, func(k, v []byte) error {
			groups++
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	reduceOnce() // compute the cached reductions, as a built index has them
	for b.Loop() {
		reduceOnce()
	}
	if groups != benchGroups {
		b.Fatalf("%d groups, want %d", groups, benchGroups)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(groups), "ns/group")
}

// BenchmarkRange100 reads 100 rows from a random start key of a 1,000,000-row
// view; "p99-ns" is the 99th percentile of one query's time.
func BenchmarkRange100(b *testing.B) {
	ix := buildBench(b, "")
	defer ix.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	var times []time.Duration
	for b.Loop() {
		start := time.Now()
		n := 0
		err := ix.Query(context.Background(), "v", index.Range{StartKey: benchKey(rng)}, func(index.Row) error {
			if n++; n == 100 {
				return index.ErrStop
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkOpen opens a persisted 1,000,000-row index. After a Close, the
// rows are in the checkpoint ("checkpoint"); after a crash, up to half of them
// may be in the log, to replay ("log", here: all of them). "bytes/row" is the
// heap the open index holds per row.
func BenchmarkOpen(b *testing.B) {
	for _, tc := range []struct {
		name           string
		checkpointDocs int
	}{
		{"checkpoint", 1},
		{"log", 1 << 30},
	} {
		b.Run(tc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "ix")
			ix, err := index.Open(context.Background(), benchConfig(path))
			if err != nil {
				b.Fatal(err)
			}
			index.SetCheckpointDocs(ix, 1<<30)
			for _, batch := range benchBatches() {
				if err := ix.Apply(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
			}
			index.SetCheckpointDocs(ix, tc.checkpointDocs)
			if err := ix.Close(); err != nil {
				b.Fatal(err)
			}
			var perRow float64
			for b.Loop() {
				b.StopTimer()
				base := heapInUse()
				b.StartTimer()
				ix, err := index.Open(context.Background(), benchConfig(path))
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if n, _ := ix.TotalRows("v"); n != benchRows {
					b.Fatalf("%d rows after open, want %d", n, benchRows)
				}
				perRow = float64(heapInUse()-base) / benchRows
				index.SetCheckpointDocs(ix, 1<<30) // leave the file as it is
				ix.Close()
				b.StartTimer()
			}
			b.ReportMetric(perRow, "bytes/row")
		})
	}
}
