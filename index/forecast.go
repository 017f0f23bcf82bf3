package index

import (
	"context"
	"fmt"
	"math"
)

// MaxForecastIntervals caps the intervals of one Forecast.
const MaxForecastIntervals = 10000

// forecastChunk is how many rows of one interval a Forecast gathers before it
// reduces them to a partial reduction.
const forecastChunk = 4096

// ExpiryRows is the rows of a view that leave it in one interval of a
// Forecast (or that have expired already): their number and, for a view
// with a Reducer, their reduction (nil when there are none, or no Reducer).
type ExpiryRows struct {
	// Start and End bound the interval (Start, End], Unix seconds; both 0
	// for the expired rows.
	Start, End int64
	// Rows counts the rows.
	Rows int64
	// Value is the reduction of the rows, raw JSON.
	Value []byte
}

// ExpiryForecast is what a view loses to expiry over a horizon.
type ExpiryForecast struct {
	// Now is the instant of the forecast, Unix seconds.
	Now int64
	// Expired is the rows of documents expired at Now that are still in the
	// view (the pager has not purged them, or the index not seen the purge).
	Expired ExpiryRows
	// Intervals cover (Now, Now+horizon] in steps of the interval.
	Intervals []ExpiryRows
}

// Forecast tells, for each interval of interval seconds over the horizon
// seconds after now, how many rows of view (selected by r as Query selects
// them, ExcludeExpired aside: with Descending, StartKey is the upper bound
// and EndKey the lower; with Keys, a key given twice counts its rows twice)
// leave it because their document expires in that
// interval, and, with reduce, what their reduction is (for a view with a
// Reducer; reduce is ignored for one without); and the
// same for the rows expired at now but still in the view. Over the whole
// view (r selects every row), each interval is a key range of the view's
// expiry tree, counted and reduced from cached values in a few node visits.
// With a narrower r (key bounds, keys, or Include: a cluster node's share),
// it walks the view's tree, only into the subtrees whose
// earliest expiration falls before the horizon, so its cost follows the
// rows that expire within it (and those expired), not the view's size. A
// bad interval or horizon gives an error wrapping ErrInvalidForecast.
func (ix *Index) Forecast(ctx context.Context, view string, r Range, now, interval, horizon int64, reduce bool) (*ExpiryForecast, error) {
	rd, err := ix.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return rd.Forecast(ctx, view, r, now, interval, horizon, reduce)
}

// Forecast is Index.Forecast from the Reader's snapshot.
func (rdr *Reader) Forecast(ctx context.Context, view string, r Range, now, interval, horizon int64, reduce bool) (_ *ExpiryForecast, err error) {
	ix := rdr.ix
	switch {
	case interval <= 0 || horizon <= 0:
		return nil, fmt.Errorf("%w: interval and horizon must be positive seconds", ErrInvalidForecast)
	case horizon/interval > MaxForecastIntervals || horizon/interval == MaxForecastIntervals && horizon%interval != 0:
		return nil, fmt.Errorf("%w: horizon/interval is over %d intervals", ErrInvalidForecast, MaxForecastIntervals)
	case now >= math.MaxInt64-horizon:
		return nil, fmt.Errorf("%w: horizon %d is too far", ErrInvalidForecast, horizon)
	}
	snap, vi, err := rdr.view(view)
	if err != nil {
		return nil, err
	}
	defer recoverPage(&err)
	if r.Include == nil && r.Keys == nil && r.StartKey == nil && r.EndKey == nil && r.StartDocID == "" && r.EndDocID == "" && !r.StartDocIDSet && !r.EndDocIDSet {
		var red Reducer
		if reduce {
			red = ix.views[vi].Reducer
		}
		return forecastAll(ctx, snap.expRoots[vi], red, now, interval, horizon)
	}
	// spans are ascending intervals of tree keys whatever r.Descending,
	// which only swaps which of r's bounds is the lower one.
	spans, err := r.spans(nil)
	if err != nil {
		return nil, err
	}
	f := &forecaster{
		rd:  reduction{ctx: ctx},
		now: now, end: now + horizon, interval: interval,
		include: r.Include,
	}
	if reduce {
		f.rd.r = ix.views[vi].Reducer
	}
	nIntervals := horizon / interval
	if horizon%interval != 0 {
		nIntervals++
	}
	f.parts = make([]forecastPart, 1+nIntervals)
	for _, s := range spans {
		if s.empty() {
			continue
		}
		if err := f.walk(snap.roots[vi], s.lo, s.hi); err != nil {
			return nil, err
		}
	}
	out := &ExpiryForecast{Now: now, Intervals: make([]ExpiryRows, len(f.parts)-1)}
	for i := range f.parts {
		p := &f.parts[i]
		if err := f.flush(p); err != nil {
			return nil, err
		}
		er := ExpiryRows{Rows: p.rows}
		if len(p.reds) > 0 {
			if er.Value, err = f.rd.rereduce(p.reds); err != nil {
				return nil, err
			}
		}
		if i == 0 {
			out.Expired = er
			continue
		}
		er.Start = now + int64(i-1)*interval
		er.End = now + horizon
		if int64(i) < nIntervals {
			er.End = er.Start + interval
		}
		out.Intervals[i-1] = er
	}
	return out, nil
}

// forecastAll is Forecast over the whole view, from its expiry tree: each
// interval is one key range of it, counted from node counts and reduced from
// cached reductions, so its cost is a few node visits per interval whatever
// the number of rows.
func forecastAll(ctx context.Context, root *node, red Reducer, now, interval, horizon int64) (*ExpiryForecast, error) {
	rd := reduction{ctx: ctx, r: red}
	part := func(lo, hi []byte) (ExpiryRows, error) {
		er := ExpiryRows{Rows: int64(rangeCount(root, lo, hi))}
		if red != nil && er.Rows > 0 {
			v, _, err := rd.rangeValue(root, lo, hi)
			if err != nil {
				return er, err
			}
			er.Value = v
		}
		return er, nil
	}
	out := &ExpiryForecast{Now: now}
	var err error
	if out.Expired, err = part(nil, encodeExp(now+1)); err != nil {
		return nil, err
	}
	for start := now; start < now+horizon; start += interval {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		end := now + horizon
		if horizon-(start-now) > interval {
			end = start + interval
		}
		er, err := part(encodeExp(start+1), encodeExp(end+1))
		if err != nil {
			return nil, err
		}
		er.Start, er.End = start, end
		out.Intervals = append(out.Intervals, er)
	}
	return out, nil
}

// rangeCount returns the number of rows under n in [lo, hi) (nil: open).
func rangeCount(n *node, lo, hi []byte) int {
	if n.count == 0 {
		return 0
	}
	lo, hi = trimBounds(n, lo, hi)
	if lo == nil && hi == nil {
		return n.count
	}
	if n.leaf() {
		items := n.rows()
		i, j := 0, len(items)
		if lo != nil {
			i, _ = searchItems(items, lo)
		}
		if hi != nil {
			j, _ = searchItems(items, hi)
		}
		return max(0, j-i)
	}
	total := 0
	_ = eachChildIn(n, lo, hi, func(c *node, lo, hi []byte) error {
		total += rangeCount(c, lo, hi)
		return nil
	})
	return total
}

// forecaster gathers the rows of a Forecast by interval.
type forecaster struct {
	rd                 reduction
	now, end, interval int64
	parts              []forecastPart // [0]: expired; [i]: interval i-1
	include            *Subset        // Range.Include: the rows of other documents are left out
	visited            int
}

// forecastPart is the rows of one interval: counted, and reduced in chunks.
type forecastPart struct {
	rows   int64
	reds   [][]byte // partial reductions
	keys   [][]byte // rows not reduced yet
	ids    []string
	values [][]byte
}

// flush reduces the rows p gathered into one more partial reduction.
func (f *forecaster) flush(p *forecastPart) error {
	if len(p.values) == 0 {
		return nil
	}
	v, err := f.rd.r.Reduce(f.rd.ctx, p.keys, p.ids, p.values)
	if err == nil {
		v, err = checkSize(v)
	}
	if err != nil {
		return err
	}
	p.reds = append(p.reds, v)
	p.keys, p.ids, p.values = p.keys[:0], p.ids[:0], p.values[:0]
	return nil
}

// walk gathers the rows of n in [lo, hi) that expire by f.end, skipping the
// subtrees where none does.
func (f *forecaster) walk(n *node, lo, hi []byte) error {
	if n.count == 0 || n.minExp == 0 || n.minExp > f.end {
		return nil
	}
	if f.visited++; f.visited&255 == 0 {
		if err := f.rd.ctx.Err(); err != nil {
			return err
		}
	}
	lo, hi = trimBounds(n, lo, hi)
	if n.leaf() {
		items := n.rows()
		i, j := 0, len(items)
		if lo != nil {
			i, _ = searchItems(items, lo)
		}
		if hi != nil {
			j, _ = searchItems(items, hi)
		}
		for _, r := range items[i:max(i, j)] {
			e := r.exp()
			if e == 0 || e > f.end {
				continue
			}
			if f.include != nil {
				if _, _, id := r.fields(); !f.include.Has(id) {
					continue
				}
			}
			k := 0
			if e > f.now {
				k = 1 + int((e-f.now-1)/f.interval)
			}
			p := &f.parts[k]
			p.rows++
			if f.rd.r == nil {
				continue
			}
			key, value, id := r.fields()
			p.keys, p.ids, p.values = append(p.keys, key), append(p.ids, id), append(p.values, value)
			if len(p.values) >= forecastChunk {
				if err := f.flush(p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return eachChildIn(n, lo, hi, f.walk)
}
