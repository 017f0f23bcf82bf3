package engine

import (
	"fmt"
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

// MaxForecastIntervals caps how many intervals one forecast has.
const MaxForecastIntervals = 10000

// Forecast tells how many documents (and bytes) expire in each interval of
// interval seconds over the next horizon seconds, and how many have expired
// but are not purged. It walks the expiry index up to now+horizon, so its
// cost follows the documents that expire inside the horizon (and those
// expired already), not the bucket's size.
func (b *Bucket) Forecast(interval, horizon int64) (*Forecast, error) {
	switch {
	case interval <= 0 || horizon <= 0:
		return nil, fmt.Errorf("%w: interval and horizon must be positive seconds", ErrInvalidSetting)
	case horizon/interval > MaxForecastIntervals:
		return nil, fmt.Errorf("%w: horizon/interval is over %d intervals", ErrInvalidSetting, MaxForecastIntervals)
	}
	now := b.clock.Now()
	f := &Forecast{Now: now}
	n := (horizon + interval - 1) / interval
	f.Intervals = make([]ForecastInterval, n)
	for i := range f.Intervals {
		f.Intervals[i] = ForecastInterval{Start: now + int64(i)*interval, End: min(now+int64(i+1)*interval, now+horizon)}
	}
	end := now + horizon
	var due []expItem
	b.exps.mu.Lock()
	b.exps.tree.Ascend(func(it expItem) bool {
		if it.exp > end {
			return false
		}
		due = append(due, it)
		return true
	})
	b.exps.mu.Unlock()
	for _, it := range due {
		size := b.valueSize(it.key)
		if size < 0 {
			continue // gone since
		}
		if it.exp <= now {
			f.ExpiredUnpurged++
			f.ExpiredUnpurgedBytes += size
			continue
		}
		iv := &f.Intervals[(it.exp-now-1)/interval]
		iv.Docs++
		iv.Bytes += size
	}
	return f, nil
}

// valueSize returns the size of a live document's value, or -1 if it is
// gone.
func (b *Bucket) valueSize(k docKey) int64 {
	p := b.partitionFor(k.key)
	p.mu.RLock()
	defer p.mu.RUnlock()
	d := p.mu.docs[k]
	if d == nil || d.Deleted {
		return -1
	}
	return int64(len(d.Value))
}
