package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
)

// BenchmarkAllDocs: GET /{bucket}/_all_docs?limit=100 on a couchbase
// bucket of 100,000 documents, and of 1,000,000 with
// MAYFLY_BENCH_ALLDOCS_1M=1 (the load takes a while), and on an ephemeral
// bucket of 100,000 (no ordered index there): from the first key,
// from a key in the middle, and descending. Reports ms per page and the
// heap allocated per page.
func BenchmarkAllDocs(b *testing.B) {
	sizes := []int{100_000}
	if os.Getenv("MAYFLY_BENCH_ALLDOCS_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	type run struct {
		typ engine.BucketType
		n   int
	}
	var runs []run
	for _, n := range sizes {
		runs = append(runs, run{engine.Couchbase, n})
	}
	runs = append(runs, run{engine.Ephemeral, 100_000})
	for _, rn := range runs {
		n := rn.n
		b.Run(fmt.Sprintf("%s/docs=%d", rn.typ, n), func(b *testing.B) {
			eng, err := engine.Open(b.TempDir(), &engine.Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close()
			settings := engine.DefaultBucketSettings("default")
			settings.Type = rn.typ
			bk, err := eng.CreateBucket(context.Background(), settings)
			if err != nil {
				b.Fatal(err)
			}
			loadDocs(b, bk.DefaultCollection(), n)
			users, err := auth.Open(b.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
			if err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Auth: users}))
			defer srv.Close()
			for _, q := range []struct{ name, query string }{
				{"first", "limit=100"},
				{"middle", fmt.Sprintf(`limit=100&startkey="doc%07d"`, n/2)},
				{"descending", "limit=100&descending=true"},
			} {
				b.Run(q.name, func(b *testing.B) {
					req, _ := http.NewRequest("GET", srv.URL+"/default/_all_docs?"+q.query, nil)
					req.SetBasicAuth(adminUser, adminPass)
					b.ReportAllocs()
					for b.Loop() {
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							b.Fatal(err)
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 || strings.Count(string(body), `"id":`) != 100 {
							b.Fatalf("%d %.200s", resp.StatusCode, body)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
				})
			}
		})
	}
}

// loadDocs upserts n small documents, doc0000000 up, from 32 writers so
// that group commits fill.
func loadDocs(b *testing.B, c *engine.Collection, n int) {
	b.Helper()
	const writers = 32
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			var err error
			for i := w; i < n && err == nil; i += writers {
				_, err = c.Upsert(context.Background(), "doc"+fmt.Sprintf("%07d", i), []byte(`{"type":"t3","n":`+strconv.Itoa(i)+`,"v":4.5}`), nil)
			}
			errs <- err
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}
