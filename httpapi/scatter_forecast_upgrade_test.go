package httpapi_test

import (
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/httpapi"
)

// TestViewScatterForecastNamesANodeOfThePreviousBuild: during a rolling
// upgrade, a coverer of the previous build answers a forecast share request
// as a client's forecast (every row its index holds, replicas included, at
// its own instant, which is the merger's whenever their clocks agree to the
// second); the merger names such a coverer in "errors" rather than add its
// rows to the others' shares (views.MergeForecasts says so); a review found
// it summed them, counting rows twice without a word.
func TestViewScatterForecastNamesANodeOfThePreviousBuild(t *testing.T) {
	c := newScatterCluster(t)
	const path = "/default/_design/d/_view/s?forecast=60&horizon=600&stale=false"
	st, _, want := c.oracle.do("GET", path, "", "")
	if st != 200 || !strings.Contains(want, `"expired_unpurged":{"rows":`) || strings.Contains(want, `"expired_unpurged":{"rows":0`) {
		t.Fatalf("on one node holding every document: %d %s", st, want)
	}
	// The oracle has no view coverage: it answers a share request of a
	// forecast as the previous build does, ignoring _share_partitions.
	c.extra = []httpapi.Coverer{{Name: "old", URL: c.oracle.srv.URL}}
	defer func() { c.extra = nil }()
	st, _, got := c.nodes[1].do("GET", path, "", "")
	counts := strings.SplitN(strings.TrimSuffix(want, "}\n"), `,"errors"`, 2)[0]
	if st != 200 || !strings.HasPrefix(got, counts) || !strings.Contains(got, `"errors":[{"from":"`+c.oracle.srv.URL) {
		t.Errorf("a coverer of the previous build: %d %s\nwant the three shares' counts %s and the old node named in errors", st, got, want)
	}
}
