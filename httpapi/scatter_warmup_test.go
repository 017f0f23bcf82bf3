package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// attachHold is an engine service that, while armed, holds a bucket's
// attach (a restart's) until opened: the services attached after it (the
// views) are not attached meanwhile, and their design documents answer
// engine.ErrWarmup, "still opening its indexes", as after a server
// restart while the indexes open in the background.
type attachHold struct {
	entered chan struct{}
	mu      sync.Mutex
	gate    chan struct{} // nil: not armed
}

func newAttachHold() *attachHold { return &attachHold{entered: make(chan struct{}, 1)} }

func (h *attachHold) AttachBucket(context.Context, *engine.Bucket) error {
	h.mu.Lock()
	gate := h.gate
	h.mu.Unlock()
	if gate != nil {
		h.entered <- struct{}{}
		<-gate
	}
	return nil
}

func (h *attachHold) DetachBucket(context.Context, *engine.Bucket, bool) error { return nil }

// arm makes the next attach wait for open.
func (h *attachHold) arm() {
	h.mu.Lock()
	h.gate = make(chan struct{})
	h.mu.Unlock()
}

// open lets a held attach go on, and the next ones pass.
func (h *attachHold) open() {
	h.mu.Lock()
	if h.gate != nil {
		close(h.gate)
		h.gate = nil
	}
	h.mu.Unlock()
}

// restartHeld restarts f's bucket (a changed evictionPolicy reopens it)
// with hold armed, and returns once the restart is held with the node's
// views detached; the restart's error comes on the channel once hold
// opens. It may run on any goroutine: its failure is an error.
func restartHeld(f *fixture, hold *attachHold) (<-chan error, error) {
	b, err := f.eng.Bucket("default")
	if err != nil {
		return nil, err
	}
	hold.arm()
	done := make(chan error, 1)
	go func() {
		_, _, err := b.UpdateSettings(context.Background(), func(s *engine.BucketSettings) error {
			s.EvictionPolicy = engine.FullEviction
			if b.Settings().EvictionPolicy == engine.FullEviction {
				s.EvictionPolicy = engine.ValueOnly
			}
			return nil
		})
		done <- err
	}()
	select {
	case <-hold.entered:
		return done, nil
	case err := <-done:
		return nil, fmt.Errorf("the restart did not wait for the hold: %v", err)
	case <-time.After(time.Minute):
		return nil, errors.New("the restart did not reach the hold")
	}
}

// viewAnswer is a merged view answer, its rows as they are sent.
type viewAnswer struct {
	TotalRows int               `json:"total_rows"`
	Rows      []json.RawMessage `json:"rows"`
	Errors    []struct {
		From   string `json:"from"`
		Reason string `json:"reason"`
	} `json:"errors"`
}

// TestViewScatterNodeWarmingUp: while a cluster node's view indexes are
// still opening (its bucket restarting, the views not attached again), a
// view query sent to that very node answers 200 with every other node's
// rows and the warming node's share named in "errors" (on_error=continue),
// or that error alone (on_error=stop), as a query sent to another node
// does, stale=false included; once its indexes are open every node
// answers whole. The same holds when the node's index closes under a
// query it has already prepared (its own share then fails with
// engine.ErrWarmup). Before, the node asked answered the whole query 503
// ("still opening its indexes") in both cases.
func TestViewScatterNodeWarmingUp(t *testing.T) {
	hold := newAttachHold()
	c := newScatterClusterWith(t, 0, hold)
	t.Cleanup(hold.open)
	const path = "/default/_design/d/_view/m"
	_, _, all := c.oracle.do("GET", path+"?stale=false", "", "")
	var whole viewAnswer
	if err := json.Unmarshal([]byte(all), &whole); err != nil {
		t.Fatal(err)
	}
	// The rows of the partitions nodes 1 and 2 cover (p%3 != 0).
	ob, _ := c.oracle.eng.Bucket("default")
	var others []string
	for _, raw := range whole.Rows {
		var row struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &row); err != nil {
			t.Fatal(err)
		}
		if ob.PartitionOf(row.ID)%3 != 0 {
			others = append(others, string(raw))
		}
	}
	if len(others) == 0 || len(others) == len(whole.Rows) {
		t.Fatalf("%d rows of %d outside node 0's partitions", len(others), len(whole.Rows))
	}
	from := c.urls[0] + path
	check := func(what string, node int, query string, wantRows []string) {
		t.Helper()
		st, _, body := c.nodes[node].do("GET", path+query, "", "")
		var got viewAnswer
		if err := json.Unmarshal([]byte(body), &got); err != nil || st != 200 {
			t.Fatalf("%s, asked of node %d: %d %v %.400s", what, node, st, err, body)
		}
		rows := make([]string, len(got.Rows))
		for i, r := range got.Rows {
			rows[i] = string(r)
		}
		if strings.Join(rows, "\n") != strings.Join(wantRows, "\n") {
			t.Errorf("%s, asked of node %d: %d rows, want %d (those of nodes 1 and 2)", what, node, len(rows), len(wantRows))
		}
		if len(got.Errors) != 1 || got.Errors[0].From != from || !strings.Contains(got.Errors[0].Reason, "still opening its indexes") {
			t.Errorf("%s, asked of node %d: errors %+v, want node 0's share named, still opening its indexes", what, node, got.Errors)
		}
	}

	done, err := restartHeld(c.nodes[0], hold)
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range []int{0, 1} {
		check("stale=ok during node 0's warm-up", node, "?stale=ok", others)
		check("stale=false during node 0's warm-up", node, "?stale=false", others)
		check("on_error=stop during node 0's warm-up", node, "?on_error=stop", nil)
	}
	// With no other node to merge it (both cannot be reached), the node
	// asked answers the temporary failure it has, as before.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	urls := c.urls
	c.urls = []string{urls[0], dead.URL, dead.URL}
	st, h, body := c.nodes[0].do("GET", path, "", "")
	if st != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" || !strings.Contains(body, "still opening its indexes") {
		t.Errorf("asked of node 0 during its warm-up, the other nodes unreachable: %d Retry-After %q %.300s", st, h.Get("Retry-After"), body)
	}
	// One that refuses (503: warming up too, saturated) is passed over
	// for the next.
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"temporary_failure","reason":"busy"}`, http.StatusServiceUnavailable)
	}))
	defer refusing.Close()
	c.urls = []string{urls[0], refusing.URL, urls[2]}
	st, _, body = c.nodes[0].do("GET", path, "", "")
	if st != 200 || !strings.Contains(body, `"from":"`+from+`","reason":"bucket is warming up`) || !strings.Contains(body, `"reason":"busy"`) {
		t.Errorf("asked of node 0 during its warm-up, node 1 refusing: %d %.300s", st, body)
	}
	c.urls = urls
	// A reduce too: the node asked could not re-reduce without its design
	// document; another node merges it.
	st, _, body = c.nodes[0].do("GET", "/default/_design/d/_view/js?group_level=1", "", "")
	if st != 200 || !strings.Contains(body, `"rows":[`) || !strings.Contains(body, "still opening its indexes") {
		t.Errorf("a JavaScript reduce asked of node 0 during its warm-up: %d %.400s", st, body)
	}
	hold.open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wholeAt := func(what string) {
		t.Helper()
		for i := range c.nodes {
			if st, _, got := c.nodes[i].do("GET", path+"?stale=false", "", ""); st != 200 || got != all {
				t.Fatalf("%s, at node %d: %d\n got %.400s\nwant %.400s", what, i, st, got, all)
			}
		}
	}
	wholeAt("after node 0's warm-up")

	// A query node 0 prepared before its index closed under it: the
	// restart begins at node 0's coverage read, between the query's
	// preparation and its own share.
	var once sync.Once
	var restarted <-chan error
	var restartErr error
	hook := func() { once.Do(func() { restarted, restartErr = restartHeld(c.nodes[0], hold) }) }
	c.coverageHook.Store(&hook)
	check("a share whose index closed under it", 0, "?stale=ok", others)
	c.coverageHook.Store(nil)
	hold.open()
	if restartErr != nil {
		t.Fatal(restartErr)
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	wholeAt("after node 0's second restart")
}

// TestViewSingleNodeWarmingUp: on a single node (no coverage) a view query
// while the node's view indexes are still opening answers 503 with
// Retry-After, as before: there is no other copy to answer from.
func TestViewSingleNodeWarmingUp(t *testing.T) {
	hold := newAttachHold()
	f := newFixtureFirst(t, nil, nil, nil, nil, hold)
	t.Cleanup(hold.open)
	if st, _, body := f.do("PUT", "/default/_design/d", "application/json", scatterDDoc); st != 201 {
		t.Fatalf("PUT ddoc: %d %s", st, body)
	}
	done, err := restartHeld(f, hold)
	if err != nil {
		t.Fatal(err)
	}
	st, h, body := f.do("GET", "/default/_design/d/_view/m", "", "")
	if st != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" || !strings.Contains(body, "still opening its indexes") {
		t.Errorf("a single node's view during its warm-up: %d Retry-After %q %.300s", st, h.Get("Retry-After"), body)
	}
	hold.open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st, _, body := f.do("GET", "/default/_design/d/_view/m", "", ""); st != 200 {
		t.Errorf("after the warm-up: %d %.300s", st, body)
	}
}
