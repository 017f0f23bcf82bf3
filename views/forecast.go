package views

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/mayflydb/mayfly/index"
)

// ForecastRows is the rows that leave a view in one interval of a forecast
// (or that have expired and are not purged yet): how many, and for a reduce
// view queried with reduce, their reduction.
type ForecastRows struct {
	// Start and End bound the interval (Start, End], Unix seconds (absent
	// for the expired rows).
	Start int64 `json:"start,omitempty"`
	End   int64 `json:"end,omitempty"`
	// Rows counts the rows.
	Rows int64 `json:"rows"`
	// Value is the reduction of the rows: null when there are none, absent
	// for a map view (or reduce=false).
	Value json.RawMessage `json:"value,omitempty"`
}

// ViewForecast is the answer of a view query with forecast: the rows that
// leave the view as their documents expire, per interval ahead of Now.
type ViewForecast struct {
	// Now is the instant of the forecast (the bucket's clock), Unix seconds.
	Now int64 `json:"now"`
	// Intervals cover (Now, Now+horizon] in steps of the forecast interval.
	Intervals []ForecastRows `json:"intervals"`
	// ExpiredUnpurged is the rows of documents expired at Now that the view
	// still holds (Couchbase's answers include them until the pager purges
	// the documents; expired=exclude leaves them out).
	ExpiredUnpurged ForecastRows `json:"expired_unpurged"`
}

// runForecast answers a query with forecast at instant now, from rd.
func (q *Query) runForecast(ctx context.Context, rd *index.Reader, w io.Writer, now int64) error {
	f, err := q.forecast(ctx, rd, now, nil)
	if err != nil {
		return err
	}
	return writeJSONLine(w, f)
}

// forecast computes the query's forecast at instant now from rd, over the
// rows of the documents of include (nil: every row).
func (q *Query) forecast(ctx context.Context, rd *index.Reader, now int64, include *index.Subset) (*ViewForecast, error) {
	rng := q.rangeOf()
	rng.Include = include
	f, err := rd.Forecast(ctx, q.view, rng, now, q.p.Forecast, q.p.Horizon, q.reduce)
	if err != nil {
		return nil, q.closedErr(q.reduceFailed(err))
	}
	conv := func(er index.ExpiryRows) ForecastRows {
		fr := ForecastRows{Start: er.Start, End: er.End, Rows: er.Rows, Value: er.Value}
		if q.reduce && fr.Value == nil {
			fr.Value = json.RawMessage("null")
		}
		return fr
	}
	out := &ViewForecast{Now: f.Now, Intervals: make([]ForecastRows, len(f.Intervals)), ExpiredUnpurged: conv(f.Expired)}
	for i, iv := range f.Intervals {
		out.Intervals[i] = conv(iv)
	}
	return out, nil
}

// writeJSONLine writes v as JSON and a newline.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ForecastShare is one node's part of a forecast query's answer on a
// cluster: the forecast of the rows of share (its partitions' documents)
// at share.Now, the querying node's instant, so that every node's
// intervals are the same. stale=false is as for Stream (this node's copies
// made current first; an index that does not catch up within
// connection_timeout fails it with an error wrapping ErrTimeout), and so
// is a replacement of the design document. A reduce that fails is a
// *ReduceError (ErrReduce), which fails the whole query.
func (q *Query) ForecastShare(ctx context.Context, share Share) (*ViewForecast, error) {
	if q.p.Forecast <= 0 {
		return nil, badRequest("forecast", "a forecast share asked without `forecast`")
	}
	return runShare(ctx, q, share, q.forecastShare)
}

// forecastShare answers ForecastShare once, on q.ix.
func (q *Query) forecastShare(ctx, wait context.Context, share Share, target []uint64) (*ViewForecast, error) {
	rd, timedOut, err := q.open(ctx, wait, target)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	if timedOut {
		return nil, fmt.Errorf("%w: design document %s: the index did not catch up within connection_timeout (%v)", ErrTimeout, q.ix.id, q.p.ConnectionTimeout())
	}
	now := share.Now
	if now == 0 {
		now = q.ix.bucket.Clock().Now()
	}
	var include *index.Subset
	if share.Partitions != nil {
		include = q.ix.subset(slices.Clone(share.Partitions))
	}
	return q.forecast(ctx, rd, now, include)
}

// forecastError is an entry of a merged forecast's "errors" list.
type forecastError struct {
	From   string `json:"from"`
	Reason string `json:"reason"`
}

// NodeForecast is one node's share of a forecast, as MergeForecasts reads
// it.
type NodeForecast struct {
	// From names the node in the answer's "errors" list should its share
	// not be the query's intervals.
	From string
	// Forecast is the node's ForecastShare.
	Forecast *ViewForecast
}

// MergeForecasts writes to w the answer of a forecast query on a cluster
// from the nodes' shares (ForecastShare's, each at instant now): what one
// node holding every document answers. Each interval's rows, and the
// expired rows, are summed, and their values combined with the view's
// reducer (the built-ins in Go: counts and sums added, _stats combined
// field by field; a JavaScript reduce with rereduce true), as the index
// combines its subtrees'. errs, the nodes whose shares are missing, end the
// answer as an "errors" list, as a row query's: with on_error=stop the
// answer is that list alone, with the instant, and no counts. A share
// whose intervals are not the query's (a node of another build) is named
// there too. A re-reduce that fails is returned, as Run's would be:
// nothing was written.
func (q *Query) MergeForecasts(ctx context.Context, now int64, parts []NodeForecast, errs []NodeError, w io.Writer) error {
	list := func(errs []NodeError) []forecastError {
		out := make([]forecastError, len(errs))
		for i, e := range errs {
			out[i] = forecastError{From: e.From, Reason: e.Reason}
		}
		return out
	}
	if q.p.OnErrorStop && len(errs) > 0 {
		return writeJSONLine(w, struct {
			Now    int64           `json:"now"`
			Errors []forecastError `json:"errors"`
		}{now, list(errs[:1])})
	}
	// The intervals as one node lays them out (index.Reader.Forecast).
	n := q.p.Horizon / q.p.Forecast
	if q.p.Horizon%q.p.Forecast != 0 {
		n++
	}
	out := ViewForecast{Now: now, Intervals: make([]ForecastRows, n)}
	for i := range out.Intervals {
		iv := &out.Intervals[i]
		iv.Start = now + int64(i)*q.p.Forecast
		iv.End = min(iv.Start+q.p.Forecast, now+q.p.Horizon)
	}
	var use []*ViewForecast
	for _, p := range parts {
		f := p.Forecast
		if len(f.Intervals) != len(out.Intervals) || f.Now != now {
			errs = append(errs, NodeError{From: p.From, Reason: fmt.Sprintf("the node's forecast has %d intervals from %d, not %d from %d", len(f.Intervals), f.Now, n, now)})
			continue
		}
		use = append(use, f)
	}
	var vals [][]byte
	combine := func(dst *ForecastRows, of func(*ViewForecast) *ForecastRows) error {
		vals = vals[:0]
		for _, p := range use {
			r := of(p)
			dst.Rows += r.Rows
			if len(r.Value) > 0 && string(r.Value) != "null" {
				vals = append(vals, r.Value)
			}
		}
		if !q.reduce {
			return nil
		}
		switch len(vals) {
		case 0:
			dst.Value = json.RawMessage("null")
		case 1:
			dst.Value = json.RawMessage(vals[0])
		default:
			v, err := q.rereduce(ctx, vals)
			if err != nil {
				return q.reduceFailed(err)
			}
			dst.Value = v
		}
		return nil
	}
	if err := combine(&out.ExpiredUnpurged, func(p *ViewForecast) *ForecastRows { return &p.ExpiredUnpurged }); err != nil {
		return err
	}
	for i := range out.Intervals {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := combine(&out.Intervals[i], func(p *ViewForecast) *ForecastRows { return &p.Intervals[i] }); err != nil {
			return err
		}
	}
	if len(errs) == 0 {
		return writeJSONLine(w, &out)
	}
	return writeJSONLine(w, struct {
		*ViewForecast
		Errors []forecastError `json:"errors"`
	}{&out, list(errs)})
}
