package engine

import (
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The storage comparison (issue 19): bbolt against pebble on the memory
// issue's workload, store against store through the storage seam, with
// fsync on. Sizes are flags, so that the figures in BENCHMARKS.md can be
// taken at a million documents by hand:
//
//	go test -run '^$' -bench StorageCompare -storecmp.small 1000000 -storecmp.large 250000 ./engine/
var (
	storecmpSmall = flag.Int("storecmp.small", 100_000, "small documents the storage comparison loads")
	storecmpLarge = flag.Int("storecmp.large", 20_000, "1 KiB documents the storage comparison loads")
)

// storecmpGets is how many random gets the comparison times per store.
const storecmpGets = 50_000

// storecmpLoadBatch is the group commit the load goes through.
const storecmpLoadBatch = 1024

// storecmpKind opens one candidate store in dir.
type storecmpKind struct {
	name string
	open func(dir string) (storage, error)
	size func(dir string) int64
}

func storecmpKinds() []storecmpKind {
	o := &Options{Logger: slog.New(slog.DiscardHandler)} // fsync on
	return []storecmpKind{
		{name: "bolt", open: func(dir string) (storage, error) { return openBoltStorage(filepath.Join(dir, boltFile), o) }},
		{name: "pebble", open: func(dir string) (storage, error) { return openPebbleStorage(filepath.Join(dir, pebbleDir), o) }},
	}
}

// storecmpResult is what one store measured on one document size.
type storecmpResult map[string]float64

// BenchmarkStorageCompare runs the workload over each store and each
// document size, and reports each figure, then pebble's figures as ratios
// of bbolt's (pebble/bolt, measured in the same run). Each sub-benchmark
// runs its workload once, whatever b.N (ns/op is not a figure here).
func BenchmarkStorageCompare(b *testing.B) {
	sizes := []struct {
		name  string
		n     int
		value []byte
	}{
		{"small", *storecmpSmall, []byte(`{"type":"t3","n":123,"v":4.5}`)},
		{"1KiB", *storecmpLarge, []byte(`{"type":"t3","n":123,"pad":"` + strings.Repeat("x", 1024-29) + `"}`)},
	}
	for _, sz := range sizes {
		results := map[string]storecmpResult{}
		for _, k := range storecmpKinds() {
			b.Run(fmt.Sprintf("%s/%s", sz.name, k.name), func(b *testing.B) {
				r, ok := results[k.name]
				if !ok {
					r = runStorecmp(b, k, sz.n, sz.value)
					results[k.name] = r
				}
				for _, m := range slices.Sorted(mapsKeys(r)) {
					b.ReportMetric(r[m], m)
				}
				b.ReportMetric(0, "ns/op")
			})
		}
		b.Run(sz.name+"/pebble-over-bolt", func(b *testing.B) {
			bolt, pebble := results["bolt"], results["pebble"]
			if bolt == nil || pebble == nil {
				b.Skip("both stores must run")
			}
			for _, m := range slices.Sorted(mapsKeys(bolt)) {
				if bolt[m] != 0 {
					b.ReportMetric(pebble[m]/bolt[m], m)
				}
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

func mapsKeys(m storecmpResult) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// storecmpKey is document i's key: 10 bytes, as the issue's.
func storecmpKey(i int) string { return fmt.Sprintf("k%09d", i) }

func runStorecmp(b *testing.B, k storecmpKind, n int, value []byte) storecmpResult {
	r := storecmpResult{}
	dir := b.TempDir()
	st, err := k.open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { st.close(false) }()
	rng := rand.New(rand.NewPCG(1, 2))
	const parts = 1024
	var seqs [parts]uint64
	var cas uint64
	rec := func(i int) record {
		key := storecmpKey(i)
		p := partitionOf(key, parts)
		seqs[p]++
		cas++
		return put(testDoc(DefaultCollectionID, key, p, seqs[p], cas, 0, string(value)), 0)
	}

	// Load: every document once, in random key order (keys hash; clients
	// do not write in key order), through fsynced group commits.
	order := rng.Perm(n)
	heap0 := liveHeapBytes()
	start := time.Now()
	batch := make([]record, 0, storecmpLoadBatch)
	for i, id := range order {
		batch = append(batch, rec(id))
		if len(batch) == storecmpLoadBatch || i == n-1 {
			if err := st.commit(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	r["load-docs/s"] = float64(n) / time.Since(start).Seconds()
	r["heap-after-load-MB"] = float64(liveHeapBytes()-min(heap0, liveHeapBytes())) / (1 << 20)
	r["rss-after-load-MB"] = rssMB()
	r["disk-B/doc"] = float64(dirSize(dir)) / float64(n)

	// Open: close, reopen, read what warm-up reads before the documents
	// (metadata, sequence numbers).
	if err := st.close(true); err != nil {
		b.Fatal(err)
	}
	start = time.Now()
	if st, err = k.open(dir); err != nil {
		b.Fatal(err)
	}
	if _, err := st.meta(); err != nil {
		b.Fatal(err)
	}
	if _, err := st.seqnos(); err != nil {
		b.Fatal(err)
	}
	r["open-ms"] = float64(time.Since(start).Microseconds()) / 1000

	// Random gets by key, the path of an ejected value's read (the OS page
	// cache is warm: it holds what the load wrote).
	lat := make([]time.Duration, storecmpGets)
	start = time.Now()
	for i := range lat {
		id := rng.IntN(n)
		t0 := time.Now()
		d, err := st.doc(docKey{key: storecmpKey(id)})
		lat[i] = time.Since(t0)
		if err != nil || len(d.Value) != len(value) {
			b.Fatalf("get %d: %v", id, err)
		}
	}
	r["get/s"] = float64(len(lat)) / time.Since(start).Seconds()
	slices.Sort(lat)
	r["get-p50-us"] = float64(lat[len(lat)/2].Nanoseconds()) / 1000
	r["get-p99-us"] = float64(lat[len(lat)*99/100].Nanoseconds()) / 1000
	r["get-max-ms"] = float64(lat[len(lat)-1].Microseconds()) / 1000
	r["rss-after-gets-MB"] = rssMB()

	// A full scan in key order (warm-up, an index rebuild).
	start = time.Now()
	seen := 0
	var maxGap time.Duration
	last := time.Now()
	if err := st.scan(func(*Document) error {
		seen++
		now := time.Now()
		maxGap = max(maxGap, now.Sub(last))
		last = now
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	r["scan-maxgap-ms"] = float64(maxGap.Microseconds()) / 1000
	if seen != n {
		b.Fatalf("scan saw %d documents of %d", seen, n)
	}
	r["scan-docs/s"] = float64(n) / time.Since(start).Seconds()

	// Fsynced group commits of 1, 16 and 256 records, rewriting random
	// documents: latency per commit and records per second.
	for _, size := range []int{1, 16, 256} {
		commits := max(20, min(400, 4096/size))
		lat := make([]time.Duration, commits)
		start := time.Now()
		for c := range lat {
			batch = batch[:0]
			for range size {
				batch = append(batch, rec(rng.IntN(n)))
			}
			t0 := time.Now()
			if err := st.commit(batch); err != nil {
				b.Fatal(err)
			}
			lat[c] = time.Since(t0)
		}
		el := time.Since(start)
		slices.Sort(lat)
		s := strconv.Itoa(size)
		r["commit"+s+"-p50-ms"] = float64(lat[len(lat)/2].Microseconds()) / 1000
		r["commit"+s+"-p99-ms"] = float64(lat[len(lat)*99/100].Microseconds()) / 1000
		r["commit"+s+"-recs/s"] = float64(commits*size) / el.Seconds()
	}

	// Purges: a tenth of the documents removed in batches, as the metadata
	// purger and the pager remove them.
	purge := order[:n/10]
	start = time.Now()
	for len(purge) > 0 {
		m := min(len(purge), storecmpLoadBatch)
		batch = batch[:0]
		for _, id := range purge[:m] {
			key := storecmpKey(id)
			batch = append(batch, record{purge: true, key: docKey{key: key}, part: partitionOf(key, parts)})
		}
		if err := st.commit(batch); err != nil {
			b.Fatal(err)
		}
		purge = purge[m:]
	}
	r["purge-docs/s"] = float64(n/10) / time.Since(start).Seconds()
	r["disk-after-purge-B/doc"] = float64(dirSize(dir)) / float64(n)
	b.Logf("%s, %d documents of %d B: %v", k.name, n, len(value), r)
	return r
}

// liveHeapBytes returns the live heap after a full collection.
func liveHeapBytes() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// rssMB returns the process's resident memory (Linux), or 0.
func rssMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// dirSize returns the bytes of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
