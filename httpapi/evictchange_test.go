package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/auth"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/search"
	"github.com/mayflydb/mayfly/views"
)

// TestEvictionPolicyChangeOverHTTP: a valueOnly couchbase bucket with
// documents (more than its 1 MiB quota holds) and a view is switched to
// fullEviction and back over the REST API, as Couchbase allows: each change
// answers 200 with the new policy, the bucket restarts with it, and nothing
// is lost: every document reads back, curr_items, the view's _count and a
// search index's hits are right (both go on from their positions and take
// the writes made after each restart), and a reader during the restart gets only answers
// or temporary failures (503), never a wrong one. On the old code the change
// was refused (400).
func TestEvictionPolicyChangeOverHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 8, BackgroundWarmup: true})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := views.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	fts, err := search.New(ctx, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := auth.Open(t.TempDir(), &auth.Options{Argon2: cheapArgon2, ScramIterations: cheapScram, AdminUser: adminUser, AdminPassword: adminPass})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Views: vs, Search: fts, Auth: store}))
	f := &fixture{t: t, eng: eng, srv: srv, users: store}
	defer func() {
		srv.Close()
		fts.Close()
		vs.Close()
		if err := eng.Check(ctx); err != nil {
			t.Errorf("engine.Check: %v", err)
		}
		if err := eng.Close(); err != nil {
			t.Error(err)
		}
	}()

	if st, _, body := f.do("POST", "/pools/default/buckets", formCT, "name=ev&bucketType=couchbase&ramQuota=1"); st != 202 || !strings.Contains(body, `"evictionPolicy":"valueOnly"`) {
		t.Fatalf("create bucket: %d %s", st, body)
	}
	if st, _, body := f.do("PUT", "/ev/_design/d", "application/json", `{"views":{"v":{"map":"function (doc, meta) { emit(doc.n, null); }","reduce":"_count"}}}`); st != 201 {
		t.Fatalf("design document: %d %s", st, body)
	}
	if st, _, body := f.do("PUT", "/api/index/evx", "application/json", `{"type":"fulltext-index","sourceType":"couchbase","sourceName":"ev","params":{"mapping":{"default_mapping":{"enabled":true,"dynamic":false,"properties":{"n":{"enabled":true,"fields":[{"name":"n","type":"number","index":true}]}}}}}}`); st != 200 {
		t.Fatalf("search index: %d %s", st, body)
	}
	// Few large documents: each HTTP request costs the most under the
	// race detector, not its bytes.
	pad := strings.Repeat("x", 14000)
	key := func(i int) string { return fmt.Sprintf("k%04d", i) }
	put := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if st, _, body := f.do("PUT", "/ev/docs/"+key(i), "application/json", fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, pad)); st != 200 && st != 201 {
				t.Fatalf("put %d: %d %s", i, st, body)
			}
		}
	}
	n := 150 // 2.1 MB of values in a 1 MiB quota
	put(0, n)

	check := func(when string, policy engine.EvictionPolicy) {
		t.Helper()
		b, err := eng.Bucket("ev")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.WaitWarm(ctx); err != nil {
			t.Fatal(err)
		}
		if _, _, body := f.do("GET", "/pools/default/buckets/ev", "", ""); !strings.Contains(body, fmt.Sprintf(`"evictionPolicy":%q`, policy)) {
			t.Fatalf("%s: bucket shows %.300s, want evictionPolicy %s", when, body, policy)
		}
		for i := range n {
			st, _, body := f.do("GET", "/ev/docs/"+key(i), "", "")
			if st != 200 || !strings.Contains(body, fmt.Sprintf(`"n":%d,`, i)) || !strings.Contains(body, pad) {
				t.Fatalf("%s: get %s: %d %.80s", when, key(i), st, body)
			}
		}
		_, _, body := f.do("GET", "/pools/default/buckets/ev/stats", "", "")
		var s map[string]any
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(body)
		}
		if s["curr_items"] != float64(n) {
			t.Fatalf("%s: curr_items %v, want %d", when, s["curr_items"], n)
		}
		st, _, body := f.do("GET", "/ev/_design/d/_view/v?stale=false&reduce=true", "", "")
		if st != 200 || !strings.Contains(body, fmt.Sprintf(`"value":%d}`, n)) {
			t.Fatalf("%s: view count: %d %.200s, want %d", when, st, body, n)
		}
		st, _, body = f.do("POST", "/api/index/evx/query", "application/json", `{"query":{"match_all":{}},"size":0,"ctl":{"consistency":{"level":"at_plus"}}}`)
		if st != 200 || !strings.Contains(body, fmt.Sprintf(`"total_hits":%d,`, n)) {
			t.Fatalf("%s: search count: %d %.300s, want %d", when, st, body, n)
		}
	}
	check("before any change", engine.ValueOnly)

	// A reader during each restart: every answer is the document or a
	// temporary failure.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	bad := make(chan string, 1)
	wg.Add(1)
	n0 := n // the documents the reader reads (n grows meanwhile)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/ev/docs/"+key(i%n0), nil)
			req.SetBasicAuth(adminUser, adminPass)
			resp, err := srv.Client().Do(req)
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 && resp.StatusCode != 503 || resp.StatusCode == 200 && !strings.Contains(string(body), fmt.Sprintf(`"n":%d,`, i%n0)) {
				select {
				case bad <- fmt.Sprintf("get %s during a restart: %d %.200s", key(i%n0), resp.StatusCode, body):
				default:
				}
			}
			// Paced: a read every millisecond or so still meets every
			// restart many times over; unpaced, the loop was most of
			// the test's CPU under -race.
			time.Sleep(time.Millisecond)
		}
	}()

	for _, to := range []engine.EvictionPolicy{engine.FullEviction, engine.ValueOnly} {
		if st, _, body := f.do("POST", "/pools/default/buckets/ev", formCT, "evictionPolicy="+string(to)); st != 200 || !strings.Contains(body, fmt.Sprintf(`"evictionPolicy":%q`, to)) {
			t.Fatalf("change of evictionPolicy to %s: %d %s", to, st, body)
		}
		check("after the change to "+string(to), to)
		put(n, n+15) // the view takes writes after the restart
		n += 15
		check("after writes under "+string(to), to)
	}
	close(stop)
	wg.Wait()
	select {
	case msg := <-bad:
		t.Error(msg)
	default:
	}

	// Ephemeral and memcached buckets take no couchbase policy.
	if st, _, body := f.do("POST", "/pools/default/buckets", formCT, "name=eph&bucketType=ephemeral&ramQuota=1"); st != 202 {
		t.Fatalf("create ephemeral bucket: %d %s", st, body)
	}
	if st, _, body := f.do("POST", "/pools/default/buckets/eph", formCT, "evictionPolicy=fullEviction"); st != 400 || !strings.Contains(body, "evictionPolicy") {
		t.Errorf("ephemeral bucket changed to fullEviction: %d %s, want 400 naming evictionPolicy", st, body)
	}
}
