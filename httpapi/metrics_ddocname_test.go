package httpapi_test

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// /metrics answers every bucket's statistics whatever the design documents'
// names: a name sent percent-encoded as bytes that are not UTF-8
// (_design/x%FFy, a Latin-1 client) must not cost the scrape. The view
// metrics carry the name as a label, which Prometheus requires to be UTF-8;
// a review found that the collector failed on it and /metrics answered 500
// with a panic's stack trace instead of any metric, so monitoring went blind
// for every bucket. A server that refuses such a name instead passes too.
func TestMetricsSurviveDesignDocNameNotUTF8(t *testing.T) {
	f := newFixture(t)
	if st, _, body := f.do("PUT", "/default/docs/a", "application/json", `{"n":1}`); st >= 300 {
		t.Fatalf("PUT doc: %d %s", st, body)
	}
	ddoc := `{"views":{"v":{"map":"function (doc, meta) { emit(meta.id, null); }"}}}`
	if st, _, body := f.do("PUT", "/default/_design/ok", "application/json", ddoc); st != 201 {
		t.Fatalf("PUT _design/ok: %d %s", st, body)
	}
	put, _, body := f.do("PUT", "/default/_design/x%FFy", "application/json", ddoc)
	if put >= 500 {
		t.Fatalf("PUT _design/x%%FFy: %d %s", put, body)
	}
	st, _, metrics := f.do("GET", "/metrics", "", "")
	if st != 200 {
		t.Fatalf("/metrics with a design document named _design/x%%FFy (its PUT answered %d): %d %.300s", put, st, metrics)
	}
	for _, want := range []string{`mayfly_curr_items{bucket="default"} 1`, `mayfly_view_rows{bucket="default",ddoc="_design/ok",view="v"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !utf8.ValidString(metrics) {
		t.Errorf("/metrics is not UTF-8, as Prometheus' text format must be")
	}
}
