package httpapi

// MetricOf is metricOf, for the tests of package httpapi_test.
var MetricOf = metricOf
