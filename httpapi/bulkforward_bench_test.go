package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/httpapi"
)

// BenchmarkForwardedBulk: a _bulk of 20,000 small upserts (fresh keys each
// time) through a node that leads a third of them, the others led by two
// more nodes in the process (loopback HTTP) ("forwarded"), and, for
// comparison, through the same node leading them all ("local"). Reports
// the lines a second and the lines answered an error.
//
//	go test -run '^$' -bench ForwardedBulk -benchtime 5x ./httpapi/
func BenchmarkForwardedBulk(b *testing.B) {
	addrs := map[string]string{}
	for _, name := range []string{"b", "c"} {
		addrs[name] = strings.TrimPrefix(newFixtureEngine(b, nil, nil, nil).srv.URL, "http://")
	}
	node := newFixtureEngine(b, nil, &httpapi.Options{Route: func(_ context.Context, _, key string) (httpapi.Route, error) {
		if l := leaderOf(key); l != "a" && !strings.HasPrefix(key, "local") {
			return httpapi.Route{Node: l, Addr: addrs[l], From: "a"}, nil
		}
		return httpapi.Route{}, nil
	}}, nil)
	// "forwarded": two thirds of the keys led by the other nodes;
	// "local": every key led by the node, for comparison.
	for _, kind := range []string{"forwarded", "local"} {
		b.Run(kind, func(b *testing.B) { benchBulkThrough(b, node, kind) })
	}
}

func benchBulkThrough(b *testing.B, node *fixture, prefix string) {
	const n = 20000
	var elapsed time.Duration
	errs := 0 // lines answered an error (main's leaders refuse some: too_many_requests)
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		var body strings.Builder
		for j := range n {
			fmt.Fprintf(&body, `{"op":"upsert","id":"%s%d-%05d","doc":{"v":%d}}`+"\n", prefix, i, j, j)
		}
		b.StartTimer()
		start := time.Now() // wall clock: the benchmark's rate
		req, err := http.NewRequest(http.MethodPost, node.srv.URL+"/default/_bulk", strings.NewReader(body.String()))
		if err != nil {
			b.Fatal(err)
		}
		req.SetBasicAuth(adminUser, adminPass)
		req.Header.Set("Content-Type", ndjson)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		out := string(raw)
		elapsed += time.Since(start)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("_bulk: %d %v", resp.StatusCode, err)
		}
		if got := strings.Count(out, "\n"); got != n {
			b.Fatalf("%d answer lines for %d", got, n)
		}
		errs += strings.Count(out, `"error"`)
	}
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "lines/s")
	b.ReportMetric(float64(errs)/float64(b.N), "failed-lines/op")
}
