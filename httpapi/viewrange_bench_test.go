package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/feed"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/views"
)

// rangeDDoc is the view of bench/bigrun's range phase (and of the views
// benchmarks): emit([doc.type, doc.n], doc.v) with _sum.
const rangeDDoc = `{"views":{"v":{"map":"function (doc, meta) { emit([doc.type, doc.n], doc.v); }","reduce":"_sum"}}}`

// BenchmarkViewRange: the server's side of bench/bigrun's range phase, a
// GET of 100 rows of a view from a random start key
// (stale=ok&reduce=false&limit=100&startkey=["t3",123]), on 100,000
// documents (MAYFLY_BENCH_DOCS to change it) with the index paged through
// a 256 MiB cache as serve's default. The handler is called directly, so
// what it reports is the server's own cost per query (from the router and
// the authentication to the last row), without the network or a client:
// µs, bytes and allocations per query. The heap allocated per query is
// what sets how often the collector runs under load (issue 19's tail).
func BenchmarkViewRange(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("MAYFLY_BENCH_DOCS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	eng, err := engine.Open(b.TempDir(), &engine.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	bk, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		b.Fatal(err)
	}
	c := bk.DefaultCollection()
	for i := range n {
		v := fmt.Appendf(nil, `{"type":"t%d","n":%d,"v":%d.5}`, i%10, i, i%100)
		if _, err := c.Upsert(ctx, fmt.Sprintf("doc%07d", i), v, nil); err != nil {
			b.Fatal(err)
		}
	}
	vs, err := views.New(ctx, eng, &views.Options{IndexCache: index.NewPageCache(256 << 20)})
	if err != nil {
		b.Fatal(err)
	}
	defer vs.Close()
	users, err := auth.Open(b.TempDir(), &auth.Options{AdminUser: adminUser, AdminPassword: adminPass, Argon2: cheapArgon2, ScramIterations: cheapScram})
	if err != nil {
		b.Fatal(err)
	}
	h := httpapi.New(eng, &httpapi.Options{Views: vs, Auth: users, AllowedHosts: []string{"127.0.0.1"}})
	get := func(query string) *discardResponse {
		req, err := http.NewRequest("GET", "/default/_design/bench/_view/v?"+query, nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Host = "127.0.0.1:8091"
		req.SetBasicAuth(adminUser, adminPass)
		w := &discardResponse{}
		h.ServeHTTP(w, req)
		if w.status != 0 && w.status != http.StatusOK {
			b.Fatalf("%s: %d %.300s", query, w.status, w.body.Bytes())
		}
		return w
	}
	put, err := http.NewRequest("PUT", "/default/_design/bench", bytes.NewReader([]byte(rangeDDoc)))
	if err != nil {
		b.Fatal(err)
	}
	put.Host = "127.0.0.1:8091"
	put.SetBasicAuth(adminUser, adminPass)
	put.Header.Set("Content-Type", "application/json")
	pw := &discardResponse{}
	h.ServeHTTP(pw, put)
	if pw.status != http.StatusCreated {
		b.Fatalf("PUT design document: %d %s", pw.status, pw.body.Bytes())
	}
	get("stale=false&limit=1")
	// A paged index writes its pages back once its feed has been quiet a
	// while (feed.DefaultQuietDelay); until then a read merges each leaf's
	// pending changes. bigrun queries long after its build: so do these.
	time.Sleep(3 * feed.DefaultQuietDelay)

	// The queries, made beforehand: the client's work is not the server's.
	rng := rand.New(rand.NewPCG(19, 100))
	reqs := make([]*http.Request, 1024)
	for i := range reqs {
		k := rng.IntN(n)
		q := fmt.Sprintf("stale=ok&reduce=false&limit=100&startkey=%%5B%%22t%d%%22,%d%%5D", k%10, k)
		reqs[i], err = http.NewRequest("GET", "/default/_design/bench/_view/v?"+q, nil)
		if err != nil {
			b.Fatal(err)
		}
		reqs[i].Host = "127.0.0.1:8091"
		reqs[i].SetBasicAuth(adminUser, adminPass)
	}
	w := &discardResponse{keep: true}
	h.ServeHTTP(w, reqs[0])
	if w.status != 0 && w.status != http.StatusOK || bytes.Count(w.body.Bytes(), []byte(`"id":`)) == 0 {
		b.Fatalf("%d %.300s", w.status, w.body.Bytes())
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w := &discardResponse{}
		h.ServeHTTP(w, reqs[i%len(reqs)])
		if w.status != 0 && w.status != http.StatusOK || w.n == 0 {
			b.Fatalf("status %d, %d bytes", w.status, w.n)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/query")
}

// discardResponse is an http.ResponseWriter that counts what it is sent
// (and keeps it if keep is set).
type discardResponse struct {
	h      http.Header
	status int
	n      int
	keep   bool
	body   bytes.Buffer
}

func (d *discardResponse) Header() http.Header {
	if d.h == nil {
		d.h = http.Header{}
	}
	return d.h
}

func (d *discardResponse) WriteHeader(status int) {
	if d.status == 0 {
		d.status = status
	}
}

func (d *discardResponse) Write(p []byte) (int, error) {
	d.n += len(p)
	if d.keep || d.status >= 300 {
		d.body.Write(p)
	}
	return len(p), nil
}
