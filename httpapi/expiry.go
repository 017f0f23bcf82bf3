package httpapi

import (
	"fmt"
	"net/http"

	"github.com/mayflydb/mayfly/engine"
)

// forecastJSON is the answer of GET /{bucket}/_expiry.
type forecastJSON struct {
	Now             int64          `json:"now"`
	ExpiredUnpurged docsBytes      `json:"expired_unpurged"`
	Intervals       []intervalJSON `json:"intervals"`
	PagerNextRun    int64          `json:"pager_next_run,omitempty"`
}

type docsBytes struct {
	Docs  int64 `json:"docs"`
	Bytes int64 `json:"bytes"`
}

type intervalJSON struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	docsBytes
}

// expiryForecast handles GET /{bucket}/_expiry?interval=S&horizon=S (defaults
// 3600 and 86400): per interval ahead, the documents and bytes that expire,
// those expired but not purged, and when the pager runs next.
func (s *server) expiryForecast(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	interval, ok, err := intParam(q, "interval")
	if err != nil {
		return err
	} else if !ok {
		interval = 3600
	}
	horizon, ok, err := intParam(q, "horizon")
	if err != nil {
		return err
	} else if !ok {
		horizon = 86400
	}
	if interval > 0 && horizon > 0 && engine.ForecastIntervals(interval, horizon) > engine.MaxForecastIntervals {
		// Worded as a view forecast's refusal (views/params.go).
		return errBadRequest(fmt.Sprintf("`horizon`/`interval` is over %d intervals", engine.MaxForecastIntervals))
	}
	f, err := b.Forecast(interval, horizon)
	if err != nil {
		return err
	}
	out := forecastJSON{Now: f.Now, ExpiredUnpurged: docsBytes{f.ExpiredUnpurged, f.ExpiredUnpurgedBytes}, Intervals: make([]intervalJSON, len(f.Intervals))}
	for i, iv := range f.Intervals {
		out.Intervals[i] = intervalJSON{Start: iv.Start, End: iv.End, docsBytes: docsBytes{iv.Docs, iv.Bytes}}
	}
	if s.pager != nil {
		if ps, err := s.pager.Stats(b.Name()); err == nil {
			out.PagerNextRun = ps.NextRun
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
