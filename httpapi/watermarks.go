package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/mayflydb/mayfly/engine"
)

// waterMarksJSON is the answer of .../settings/waterMarks: the bucket's
// quota and water marks in bytes (cbstats' ep_max_size, ep_mem_high_wat,
// ep_mem_low_wat) and the marks' shares of the quota, as fractions
// (ep_mem_high_wat_percent, ep_mem_low_wat_percent: 0.85 is 85%).
type waterMarksJSON struct {
	MaxSize     int64   `json:"ep_max_size"`
	High        int64   `json:"mem_high_wat"`
	Low         int64   `json:"mem_low_wat"`
	HighPercent float64 `json:"mem_high_wat_percent"`
	LowPercent  float64 `json:"mem_low_wat_percent"`
}

// waterMarksOf returns s's water marks as .../settings/waterMarks answers.
func waterMarksOf(s engine.BucketSettings) waterMarksJSON {
	high, low := s.WaterMarks()
	quota := s.RAMQuotaMB << 20
	share := func(v int64) float64 { return math.Round(float64(v)/float64(quota)*1e4) / 1e4 }
	return waterMarksJSON{MaxSize: quota, High: high, Low: low, HighPercent: share(high), LowPercent: share(low)}
}

// getWaterMarks handles GET .../settings/waterMarks.
func (s *server) getWaterMarks(w http.ResponseWriter, r *http.Request) error {
	b, err := s.bucketOf(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, waterMarksOf(b.Settings()))
	return nil
}

// setWaterMarks handles POST .../settings/waterMarks, cbepctl's
// flush_param mem_high_wat / mem_low_wat (bytes; 0 for the default, 85%
// and 75% of the quota) or mem_high_wat_percent / mem_low_wat_percent
// (a fraction of the quota, 0 < f <= 1, as Couchbase's configuration
// takes them). The marks persist with the bucket, take effect at once (a
// bucket past a lowered high-water mark evicts), and a later change of
// the quota moves them in proportion.
func (s *server) setWaterMarks(w http.ResponseWriter, r *http.Request) error {
	b, vals, err := s.bucketForm(r)
	if err != nil {
		return err
	}
	type mark struct {
		name string
		pct  bool
		v    float64
	}
	var marks []mark
	for _, name := range []string{"mem_high_wat", "mem_low_wat", "mem_high_wat_percent", "mem_low_wat_percent"} {
		if !vals.Has(name) {
			continue
		}
		raw := strings.TrimSpace(vals.Get(name))
		pct := strings.HasSuffix(name, "_percent")
		var v float64
		if pct {
			f, err := strconv.ParseFloat(raw, 64)
			if err != nil || !(f > 0 && f <= 1) {
				return errBadRequest(name + ": must be a fraction of the quota above 0 and at most 1 (0.85 is 85%), got " + strconv.Quote(raw))
			}
			v = f
		} else {
			n, err := strconv.ParseInt(raw, 10, 64)
			if err != nil || n < 0 {
				return errBadRequest(name + ": must be a number of bytes (0 for the default), got " + strconv.Quote(raw))
			}
			v = float64(n)
		}
		marks = append(marks, mark{name, pct, v})
	}
	if len(marks) == 0 {
		return errBadRequest("give mem_high_wat and/or mem_low_wat (bytes), or mem_high_wat_percent and/or mem_low_wat_percent (fractions of the quota)")
	}
	updated, err := s.changeSettings(r, b, func(st *engine.BucketSettings) error {
		quota := st.RAMQuotaMB << 20
		for _, m := range marks {
			v := int64(m.v)
			if m.pct {
				v = int64(math.Round(m.v * float64(quota)))
				if v == 0 {
					// 0 bytes would mean the default: say so, not that.
					return errBadRequest(fmt.Sprintf("%s: %v of the quota (%d bytes) is 0 bytes", m.name, m.v, quota))
				}
			}
			if strings.HasPrefix(m.name, "mem_high_wat") {
				st.MemHighWat = v
			} else {
				st.MemLowWat = v
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, waterMarksOf(updated))
	return nil
}
