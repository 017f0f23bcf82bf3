package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
)

// TestReadBarrier: on a cluster node a read this node answers as its
// partition's leader takes its Route's Barrier first (a read index); a
// barrier that fails (the node no longer leads, or cannot confirm it)
// answers 503 and not the document from this node's memory, which may
// be stale. Writes do not take it.
func TestReadBarrier(t *testing.T) {
	var (
		mu     sync.Mutex
		refuse error
		calls  atomic.Int64
	)
	route := func(_ context.Context, bucket, key string) (httpapi.Route, error) {
		return httpapi.Route{Barrier: func(context.Context) error {
			calls.Add(1)
			mu.Lock()
			defer mu.Unlock()
			return refuse
		}}, nil
	}
	f := newFixtureOpts(t, &httpapi.Options{Route: route}, nil)
	if code, _, body := f.do(http.MethodPut, "/default/docs/k", "application/json", `{"v":1}`); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("a write took the read barrier (%d calls)", n)
	}
	if code, _, body := f.do(http.MethodGet, "/default/docs/k", "", ""); code != http.StatusOK || !strings.Contains(body, `"v":1`) {
		t.Fatalf("GET with the barrier passed: %d %s", code, body)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("a GET took the barrier %d times, want 1", n)
	}

	mu.Lock()
	refuse = fmt.Errorf("%w: partition 3: this node does not lead the group", engine.ErrNotMyVBucket)
	mu.Unlock()
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		code, _, body := f.do(m, "/default/docs/k", "", "")
		if code != http.StatusServiceUnavailable || strings.Contains(body, `"v":1`) {
			t.Fatalf("%s with the barrier refused: %d %s, want 503 without the document", m, code, body)
		}
	}
	if code, _, body := f.do(http.MethodGet, "/default/docs/k?touch=100", "", ""); code != http.StatusServiceUnavailable || strings.Contains(body, `"v":1`) {
		t.Fatalf("get-and-touch with the barrier refused: %d %s, want 503", code, body)
	}
	mu.Lock()
	refuse = fmt.Errorf("%w: partition 3: this node could not confirm that it still leads it", engine.ErrTempFail)
	mu.Unlock()
	if code, _, body := f.do(http.MethodGet, "/default/docs/k", "", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("GET with the barrier timed out: %d %s, want 503", code, body)
	}
	// A write is ordered by the partition's log: no barrier.
	before := calls.Load()
	if code, _, body := f.do(http.MethodPut, "/default/docs/k", "application/json", `{"v":2}`); code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("PUT with the barrier refused: %d %s", code, body)
	}
	if calls.Load() != before {
		t.Fatal("a write took the read barrier")
	}
}
