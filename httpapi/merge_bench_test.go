package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
)

// BenchmarkMergedShares measures what a merged answer costs the node that
// merges it in memory: a cluster's _all_docs?include_docs=true and a map
// view query without limit over MAYFLY_BENCH_MERGE_DOCS documents (200,000
// by default), split by partition across three nodes. The node asked
// answers its own share in process; the two others' shares are recorded
// once from real nodes and served from files, so that the heap measured is
// the merging side's alone (every node of the benchmark shares one
// process). Reported: the peak of the live heap during the query above the
// live heap before it (runtime/metrics' /gc/heap/live:bytes, sampled, the
// collector run often meanwhile so that the samples follow the heap), per
// row and whole; and, for comparison, the same for node 0 answering alone
// from its own third of the documents (no coverage: a single node's
// listing or query, no share, no merge).
func BenchmarkMergedShares(b *testing.B) {
	n := 200_000
	if s := os.Getenv("MAYFLY_BENCH_MERGE_DOCS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	const ddoc = `{"views":{"v":{"map":"function (doc, meta) { emit(doc.n, doc.g); }"}}}`
	var urls [3]string
	var recorded [3]*httptest.Server
	var alone atomic.Bool // node 0 answers alone, from its own documents
	coverage := func(self int) func(context.Context, string, int64) (*httpapi.ViewCoverage, error) {
		return func(context.Context, string, int64) (*httpapi.ViewCoverage, error) {
			if self == 0 && alone.Load() {
				return nil, nil // a single node: no coverage, no merge
			}
			cov := &httpapi.ViewCoverage{Rev: 7}
			for node := range 3 {
				var ps []int
				for p := node; p < 16; p += 3 {
					ps = append(ps, p)
				}
				u := urls[node]
				if self == 0 && node > 0 && recorded[node] != nil {
					u = recorded[node].URL
				}
				cov.Nodes = append(cov.Nodes, httpapi.Coverer{Name: fmt.Sprint("n", node), URL: u, Self: node == self, Partitions: ps})
			}
			return cov, nil
		}
	}
	var nodes [3]*fixture
	for i := range nodes {
		nodes[i] = newFixtureEngine(b, nil, &httpapi.Options{ViewCoverage: coverage(i)}, nil)
		urls[i] = nodes[i].srv.URL
		if st, _, body := nodes[i].do("PUT", "/default/_design/d", "application/json", ddoc); st != 201 {
			b.Fatalf("PUT ddoc: %d %s", st, body)
		}
	}
	bk, _ := nodes[0].eng.Bucket("default")
	colls := [3]*engine.Collection{}
	for i, f := range nodes {
		nb, _ := f.eng.Bucket("default")
		colls[i] = nb.DefaultCollection()
	}
	const writers = 16
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := range writers {
		wg.Go(func() {
			for i := w; i < n; i += writers {
				key := fmt.Sprintf("doc%07d", i)
				doc := fmt.Sprintf(`{"g":"group %d","n":%d,"text":"a document of the merge benchmark, some ninety bytes long"}`, i%17, i)
				if _, err := colls[bk.PartitionOf(key)%3].Upsert(context.Background(), key, []byte(doc), nil); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	queries := []struct{ name, path string }{
		{"all_docs_include_docs", "/default/_all_docs?include_docs=true"},
		{"view_no_limit", "/default/_design/d/_view/v?stale=false"},
	}
	for _, f := range nodes {
		if st, _, body := f.do("GET", "/default/_design/d/_view/v?stale=false&limit=0", "", ""); st != 200 {
			b.Fatalf("index build: %d %s", st, body)
		}
	}
	// Nodes 1 and 2's shares, recorded to files and served from them.
	dir := b.TempDir()
	for node := 1; node < 3; node++ {
		for qi, q := range queries {
			var ps []string
			for p := node; p < 16; p += 3 {
				ps = append(ps, strconv.Itoa(p))
			}
			sep := "?"
			if bytes.ContainsRune([]byte(q.path), '?') {
				sep = "&"
			}
			u := urls[node] + q.path + sep + "_share_rev=7&_share_now=" + strconv.FormatInt(nodes[0].clk.Now(), 10) + "&_share_partitions=" + joinComma(ps)
			req, _ := http.NewRequest("GET", u, nil)
			req.SetBasicAuth(adminUser, adminPass)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			out, err := os.Create(filepath.Join(dir, fmt.Sprintf("n%d-q%d", node, qi)))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(out, resp.Body); err != nil || resp.StatusCode != 200 {
				b.Fatalf("recording node %d's share of %s: %d %v", node, q.path, resp.StatusCode, err)
			}
			resp.Body.Close()
			out.Close()
		}
		recorded[node] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			qi := 0
			if r.URL.Path != "/default/_all_docs" {
				qi = 1
			}
			w.Header().Set("Content-Type", "application/json")
			http.ServeFile(w, r, filepath.Join(dir, fmt.Sprintf("n%d-q%d", node, qi)))
		}))
		defer recorded[node].Close()
	}
	for _, q := range queries {
		for _, mode := range []string{"merged", "one_node_alone"} {
			b.Run(q.name+"/"+mode, func(b *testing.B) {
				alone.Store(mode != "merged")
				defer alone.Store(false)
				want := n
				if alone.Load() {
					want = n / 4 // its third of the documents
				}
				var peakPerRow, peak float64
				for b.Loop() {
					p, rows := mergedPeak(b, urls[0]+q.path)
					if rows < want {
						b.Fatalf("%d rows, want at least %d", rows, want)
					}
					peak = max(peak, float64(p))
					peakPerRow = max(peakPerRow, float64(p)/float64(rows))
				}
				b.ReportMetric(peakPerRow, "peak-heap-B/row")
				b.ReportMetric(peak/(1<<20), "peak-heap-MiB")
			})
		}
	}
}

// joinComma joins ss with commas.
func joinComma(ss []string) string {
	var b bytes.Buffer
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	return b.String()
}

// mergedPeak asks for url, reads the answer to its end, and returns the
// peak of the live heap meanwhile above the live heap before, and the
// answer's rows.
func mergedPeak(b *testing.B, url string) (peak uint64, rows int) {
	old := debug.SetGCPercent(5) // collections often: the live heap sampled closely
	defer debug.SetGCPercent(old)
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	stop := make(chan struct{})
	done := make(chan uint64)
	go func() {
		most := base
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			most = max(most, s[0].Value.Uint64())
			select {
			case <-stop:
				done <- most
				return
			case <-t.C:
			}
		}
	}()
	req, _ := http.NewRequest("GET", url, nil)
	req.SetBasicAuth(adminUser, adminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 32<<10)
	tail := []byte{}
	for {
		k, err := resp.Body.Read(buf)
		chunk := append(tail, buf[:k]...)
		rows += bytes.Count(chunk, []byte(`{"id":`))
		if len(chunk) > 5 {
			tail = append(tail[:0], chunk[len(chunk)-5:]...)
		} else {
			tail = append(tail[:0], chunk...)
		}
		if err != nil {
			break
		}
	}
	resp.Body.Close()
	runtime.GC() // the last collection's live heap, the query's end included
	close(stop)
	most := <-done
	if resp.StatusCode != 200 {
		b.Fatalf("%s: %d", url, resp.StatusCode)
	}
	if most < base {
		return 0, rows
	}
	return most - base, rows
}
