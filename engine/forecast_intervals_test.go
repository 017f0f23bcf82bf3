package engine_test

import (
	"errors"
	"testing"

	"github.com/mayflydb/mayfly/engine"
)

// TestForecastNeverExceedsMaxIntervals: a bucket's expiry forecast
// (GET /{bucket}/_expiry) has at most MaxForecastIntervals intervals; a
// horizon that would need one more, its last one partial, is refused as a
// view's forecast refuses it, where a review found 600,001 s in steps of
// 60 s answered with 10,001 intervals.
func TestForecastNeverExceedsMaxIntervals(t *testing.T) {
	b, _ := newBucket(t, engine.Couchbase)
	const interval = 60
	f, err := b.Forecast(interval, interval*engine.MaxForecastIntervals)
	if err != nil || len(f.Intervals) != engine.MaxForecastIntervals {
		t.Fatalf("horizon of exactly %d intervals: %v, err %v", engine.MaxForecastIntervals, f != nil, err)
	}
	f, err = b.Forecast(interval, interval*engine.MaxForecastIntervals+1)
	switch {
	case err == nil:
		t.Fatalf("horizon of %d intervals and one second answered %d intervals, want it refused (at most %d)",
			engine.MaxForecastIntervals, len(f.Intervals), engine.MaxForecastIntervals)
	case !errors.Is(err, engine.ErrInvalidSetting):
		t.Fatalf("refused with %v, want ErrInvalidSetting", err)
	}
}
