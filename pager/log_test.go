package pager_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/logtest"
	"github.com/mayflydb/mayfly/pager"
)

// A pager run that purges documents logs one info line with the bucket, the
// count purged and the duration; runs that purge nothing (an idle bucket's,
// every exp_pager_stime) add no info line.
func TestLogPagerRun(t *testing.T) {
	eng, clk := newEngine(t, "")
	b := newBucket(t, eng, "b", engine.Couchbase, nil)
	var logs logtest.Buffer
	logger := logs.Logger()
	m := newManager(t, eng, &pager.Options{Logger: logger})
	ctx := context.Background()
	for range 5 {
		if _, err := m.RunNow(ctx, "b"); err != nil {
			t.Fatal(err)
		}
	}
	if got := logs.Records(t, "expiry pager run"); len(got) != 0 {
		t.Fatalf("idle runs logged at info level: %v", got)
	}
	for i := range 7 {
		put(t, b.DefaultCollection(), fmt.Sprint("k", i), 10)
	}
	clk.Advance(20)
	r, err := m.RunNow(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if r.Purged != 7 {
		t.Fatalf("run purged %d, want 7", r.Purged)
	}
	if _, err := m.RunNow(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	got := logs.Records(t, "expiry pager run")
	if len(got) != 1 {
		t.Fatalf("%d info lines for one run that purged, want 1: %v", len(got), got)
	}
	if l := got[0]; l["level"] != "INFO" || l["bucket"] != "b" || l["purged"] != float64(7) || l["duration_ms"] == nil {
		t.Errorf("pager run line = %v", l)
	}
}
