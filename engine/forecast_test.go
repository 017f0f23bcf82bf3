package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// The forecast counts, per interval ahead, the documents that will expire
// and their bytes, and those expired but not purged.
func TestForecast(t *testing.T) {
	ctx := context.Background()
	b, clk := newBucket(t, engine.Couchbase)
	c := b.DefaultCollection()
	put := func(key string, expiry int64) {
		t.Helper()
		if _, err := c.Upsert(ctx, key, []byte(`{"v":1}`), &engine.WriteOptions{Expiry: expiry}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		put(fmt.Sprint("soon", i), 30)  // first hour
		put(fmt.Sprint("later", i), 90) // second minute… with interval 60: second interval
	}
	put("never", 0)
	put("far", 86400*2)
	put("past", 10)
	clk.Advance(20) // "past" has expired, unpurged
	f, err := b.Forecast(60, 3600)
	if err != nil {
		t.Fatal(err)
	}
	if f.ExpiredUnpurged != 1 || f.ExpiredUnpurgedBytes != 7 || b.Stats().ExpiredUnpurged != 1 {
		t.Errorf("expired unpurged %d (%d bytes), want 1 (7)", f.ExpiredUnpurged, f.ExpiredUnpurgedBytes)
	}
	if len(f.Intervals) != 60 {
		t.Fatalf("%d intervals, want 60", len(f.Intervals))
	}
	if iv := f.Intervals[0]; iv.Docs != 5 || iv.Bytes != 35 || iv.Start != f.Now || iv.End != f.Now+60 {
		t.Errorf("first interval %+v, want the 5 'soon' documents", iv)
	}
	if iv := f.Intervals[1]; iv.Docs != 5 {
		t.Errorf("second interval %+v, want the 5 'later' documents", iv)
	}
	var total int64
	for _, iv := range f.Intervals {
		total += iv.Docs
	}
	if total != 10 {
		t.Errorf("%d documents expire within the horizon, want 10", total)
	}
	if _, err := b.Forecast(0, 10); !errors.Is(err, engine.ErrInvalidSetting) {
		t.Errorf("interval 0: %v", err)
	}
	if _, err := b.Forecast(1, 1<<40); !errors.Is(err, engine.ErrInvalidSetting) {
		t.Errorf("too many intervals: %v", err)
	}
}
