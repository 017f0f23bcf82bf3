package httpapi_test

import (
	"net/http"
	"testing"
)

// TestExpiryForecastIntervalCap: a bucket's expiry forecast answers at most
// 10,000 intervals, a partial last one counting, and refuses a horizon that
// needs more with a 400 worded as a view forecast's, where a review found
// 600,001 s in steps of 60 s answered 10,001 intervals.
func TestExpiryForecastIntervalCap(t *testing.T) {
	f := newFixture(t)
	status, _, body := f.do(http.MethodGet, "/default/_expiry?interval=60&horizon=600000", "", "")
	if status != http.StatusOK {
		t.Fatalf("10,000 whole intervals: %d %s", status, body)
	}
	if ivs, _ := jsonOf(t, body)["intervals"].([]any); len(ivs) != 10000 {
		t.Fatalf("10,000 whole intervals: answered %d", len(ivs))
	}
	status, _, body = f.do(http.MethodGet, "/default/_expiry?interval=60&horizon=600001", "", "")
	if status != http.StatusBadRequest {
		t.Fatalf("10,000 intervals and a partial one: %d %.200s, want 400", status, body)
	}
	m := jsonOf(t, body)
	if m["error"] != "bad_request" || m["reason"] != "`horizon`/`interval` is over 10000 intervals" {
		t.Errorf("refusal: %s", body)
	}
}
