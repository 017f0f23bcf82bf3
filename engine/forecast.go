package engine

import (
	"fmt"
	"math"
)

// ForecastInterval is one interval of an expiry forecast: the documents
// (and their bytes) whose expiration falls in (Start, End].
type ForecastInterval struct {
	// Start and End bound the interval, in Unix seconds.
	Start, End int64
	// Docs counts the documents that expire in it.
	Docs int64
	// Bytes adds up their values' sizes.
	Bytes int64
}

// Forecast is what will expire, and what has expired but is not purged yet.
type Forecast struct {
	// Now is the instant the forecast was made (the bucket's clock).
	Now int64
	// ExpiredUnpurged counts documents whose expiration has passed that the
	// pager (or a read) has not purged yet; they still count in curr_items.
	ExpiredUnpurged int64
	// ExpiredUnpurgedBytes adds up their values' sizes.
	ExpiredUnpurgedBytes int64
	// Intervals cover (Now, Now+horizon] in steps of the interval asked for.
	Intervals []ForecastInterval
}

// MaxForecastIntervals caps how many intervals one forecast has, a partial
// last one included (as a view's forecast counts them, index.Forecast).
const MaxForecastIntervals = 10000

// ForecastIntervals is how many intervals a forecast of interval seconds
// over horizon seconds has (both positive): horizon/interval, and one more,
// partial, when interval does not divide horizon.
func ForecastIntervals(interval, horizon int64) int64 {
	n := horizon / interval
	if horizon%interval != 0 {
		n++
	}
	return n
}

// Forecast tells how many documents (and bytes) expire in each interval of
// interval seconds over the next horizon seconds, and how many have expired
// but are not purged. The expiry index keeps per-second totals, so the
// forecast costs the distinct expiration seconds inside the horizon (at most
// horizon of them) plus the documents expired already, not the bucket's
// size: 0.85 ms for 1,000,000 documents expiring over 24 hours.
func (b *Bucket) Forecast(interval, horizon int64) (*Forecast, error) {
	switch {
	case interval <= 0 || horizon <= 0:
		return nil, fmt.Errorf("%w: interval and horizon must be positive seconds", ErrInvalidSetting)
	case ForecastIntervals(interval, horizon) > MaxForecastIntervals:
		return nil, fmt.Errorf("%w: horizon/interval is over %d intervals", ErrInvalidSetting, MaxForecastIntervals)
	}
	if !b.warm() {
		return nil, ErrWarmup
	}
	now := b.clock.Now()
	if horizon > math.MaxInt64-now {
		// now+horizon would overflow Unix seconds.
		return nil, fmt.Errorf("%w: horizon %d reaches past the largest expiration", ErrInvalidSetting, horizon)
	}
	f := &Forecast{Now: now}
	// The intervals' count and bounds, computed so that nothing overflows
	// whatever interval and horizon are: (n-1)*interval < horizon.
	f.Intervals = make([]ForecastInterval, ForecastIntervals(interval, horizon))
	for i := range f.Intervals {
		start := now + int64(i)*interval
		end := now + horizon
		if interval < end-start {
			end = start + interval
		}
		f.Intervals[i] = ForecastInterval{Start: start, End: end}
	}
	f.ExpiredUnpurged, f.ExpiredUnpurgedBytes = b.exps.dueTotals(now)
	b.exps.secondsIn(now, now+horizon, func(exp int64, t secTotal) {
		iv := &f.Intervals[(exp-now-1)/interval]
		iv.Docs += t.docs
		iv.Bytes += t.bytes
	})
	return f, nil
}
