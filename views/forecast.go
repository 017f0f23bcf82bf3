package views

import (
	"context"
	"encoding/json"
	"errors"
	"io"

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
	f, err := rd.Forecast(ctx, q.view, q.rangeOf(), now, q.p.Forecast, q.p.Horizon, q.reduce)
	if err != nil {
		err = reduceError(q.view, err, q.ix.reduced.updating(q.view))
		var re *ReduceError
		if errors.As(err, &re) {
			q.ix.recordReduceError(q.view, re)
		}
		return q.closedErr(err)
	}
	conv := func(er index.ExpiryRows) ForecastRows {
		fr := ForecastRows{Start: er.Start, End: er.End, Rows: er.Rows, Value: er.Value}
		if q.reduce && fr.Value == nil {
			fr.Value = json.RawMessage("null")
		}
		return fr
	}
	out := ViewForecast{Now: f.Now, Intervals: make([]ForecastRows, len(f.Intervals)), ExpiredUnpurged: conv(f.Expired)}
	for i, iv := range f.Intervals {
		out.Intervals[i] = conv(iv)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
