package httpapi

import "time"

// MetricOf is metricOf, for the tests of package httpapi_test.
var MetricOf = metricOf

// SetClock makes h time its samples by now, for the tests of package
// httpapi_test; call it before the first sample.
func (h *StatsHistory) SetClock(now func() time.Time) { h.now = now }
