package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// BenchmarkPutDoc measures single-document PUTs per second through the
// whole HTTP stack (router, authentication, handler, group commit) from
// parallel keep-alive clients, at the bucket's default durability
// (persistToMajority: every answer waits for its commit; the fixture's
// engine skips fsync) and at none. Profile it with -cpuprofile.
func BenchmarkPutDoc(b *testing.B) {
	for _, level := range []engine.Durability{engine.DurabilityPersistToMajority, engine.DurabilityNone} {
		b.Run(string(level), func(b *testing.B) {
			f := newFixtureEngine(b, nil, nil, nil)
			if _, _, err := f.mustBucket("default").UpdateSettings(b.Context(), func(s *engine.BucketSettings) error {
				s.DurabilityMinLevel = level
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			tr := &http.Transport{MaxIdleConnsPerHost: 256}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			body := strings.Repeat("x", 100)
			var n atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/default/docs/k%d", f.srv.URL, i%1000), strings.NewReader(body))
					req.SetBasicAuth(adminUser, adminPass)
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode/100 != 2 {
						b.Errorf("PUT: %d", resp.StatusCode)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
		})
	}
}
