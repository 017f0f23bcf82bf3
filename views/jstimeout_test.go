package views_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/jsruntime"
	"github.com/mayflydb/mayfly/views"
)

// loopingDocs is how many documents the looping map function runs into its
// time limit on, one after the other (one JavaScript worker).
const loopingDocs = 12

// newLoopingEnv returns an env whose design document "loop" has a view "v"
// whose map function loops forever on each of loopingDocs documents, with a
// time limit of 100ms a call and one worker: its build takes at least
// loopingDocs × 100ms, one timeout after another.
func newLoopingEnv(t *testing.T, opts views.Options) *env {
	t.Helper()
	opts.JS = &jsruntime.Options{Workers: 1, Timeout: 100 * time.Millisecond}
	e := newEnv(t, opts)
	e.loadDocs(loopingDocs)
	if _, err := e.svc.PutDesignDoc(context.Background(), "default", "loop", []byte(`{"views":{"v":{"map":"function (doc, meta) { while (true) {} }"}}}`)); err != nil {
		t.Fatal(err)
	}
	return e
}

// waitBuilt polls _info (a hang guard) until design document "loop" has
// seen every change, and returns its view's map errors.
func waitBuilt(t *testing.T, e *env) views.ViewInfo {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // wall clock: hang guard
	for {
		inf, err := e.svc.Info(context.Background(), "default", "loop")
		if err != nil {
			t.Fatal(err)
		}
		if !inf.Building && inf.Pending == 0 {
			return inf.Views["v"]
		}
		if time.Now().After(deadline) { // wall clock: hang guard
			t.Fatalf("the index did not catch up: %+v", inf.BuildInfo)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMapTimeoutsCountAsTheyHappen: a map function that runs into its time
// limit on every document shows in _info as it goes, one map error (its
// reason "timeout") and one document indexed per document, not all of them
// at once when the batch ends: before, _info said map_errors 0 and
// docs_indexed 0 for as long as the batch took (hours for a few thousand
// documents at 5s each).
func TestMapTimeoutsCountAsTheyHappen(t *testing.T) {
	e := newLoopingEnv(t, views.Options{})
	ctx := context.Background()
	var midErrors, midIndexed bool
	deadline := time.Now().Add(time.Minute) // wall clock: hang guard
	for {
		inf, err := e.svc.Info(ctx, "default", "loop")
		if err != nil {
			t.Fatal(err)
		}
		if n := inf.Views["v"].MapErrors; inf.Pending > 0 && n > 0 && n < loopingDocs {
			midErrors = true
		}
		if inf.Building && inf.Indexed > 0 && inf.Indexed < loopingDocs {
			midIndexed = true
		}
		if !inf.Building && inf.Pending == 0 || time.Now().After(deadline) { // wall clock: hang guard
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !midErrors {
		t.Error("_info never showed some of the map errors while the batch was mapped")
	}
	if !midIndexed {
		t.Error("_info never showed some documents indexed while the batch was mapped")
	}
	vi := waitBuilt(t, e)
	if vi.MapErrors < loopingDocs || len(vi.RecentErrors) == 0 || !strings.Contains(vi.RecentErrors[0].Reason, "timeout") {
		t.Errorf("after the build: %d map errors (%+v), want at least %d, for timeouts", vi.MapErrors, vi.RecentErrors, loopingDocs)
	}
}

// TestStaleFalseConnectionTimeout: a stale=false query waits for its index
// at most connection_timeout, then answers from the index as it stands
// with Couchbase's error row for a node that did not answer in time
// ({"from":"local","reason":"timeout"}); with on_error=stop, the error row
// alone. Before, connection_timeout had no effect and the query waited for
// the whole build (loopingDocs × the map time limit; hours on a real
// bucket).
func TestStaleFalseConnectionTimeout(t *testing.T) {
	e := newLoopingEnv(t, views.Options{})
	ctx := context.Background()
	for _, c := range []struct{ params string }{
		{"stale=false&connection_timeout=50"},
		{"stale=false&connection_timeout=50&on_error=stop"},
		{"stale=false&connection_timeout=50&limit=5"},
	} {
		out, err := queryRows(ctx, e.svc, "default", "loop", "v", c.params)
		if err != nil {
			t.Fatalf("%s: %v", c.params, err)
		}
		var a struct {
			TotalRows *int              `json:"total_rows"`
			Rows      []json.RawMessage `json:"rows"`
			Errors    []struct{ From, Reason string }
		}
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatalf("%s: %v: %s", c.params, err, out)
		}
		if a.TotalRows == nil || a.Rows == nil || len(a.Errors) != 1 || a.Errors[0].From != "local" || a.Errors[0].Reason != "timeout" {
			t.Errorf("%s: %s, want the rows so far and the error row {from: local, reason: timeout}", c.params, out)
		}
	}
	// Once built, a stale=false query answers without an error row.
	waitBuilt(t, e)
	out, err := queryRows(ctx, e.svc, "default", "loop", "v", "stale=false&connection_timeout=50")
	if err != nil || strings.Contains(out, "errors") {
		t.Errorf("built: %s, %v; want an answer without errors", out, err)
	}
}
