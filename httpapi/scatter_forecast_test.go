package httpapi_test

import (
	"strings"
	"testing"
)

// TestViewScatterForecastCoversTheWholeView: a view's expiry forecast
// (README, "Exact answers") counts the rows of the whole view whichever
// node of a cluster is asked, as a row query does; a review found each node
// answered for its own share only, a different count at each node.
func TestViewScatterForecastCoversTheWholeView(t *testing.T) {
	c := newScatterCluster(t)
	for _, q := range []string{"s?forecast=60&horizon=600", "m?forecast=60&horizon=600"} {
		path := "/default/_design/d/_view/" + q
		st, _, want := c.oracle.do("GET", path, "", "")
		if st != 200 || !strings.Contains(want, `"expired_unpurged":{"rows":`) || strings.Contains(want, `"expired_unpurged":{"rows":0`) {
			t.Fatalf("%s on one node holding every document: %d %s", q, st, want)
		}
		for i, n := range c.nodes {
			if st, _, got := n.do("GET", path, "", ""); st != 200 || got != want {
				t.Errorf("%s at node %d: %d %s\nwant %s", q, i, st, got, want)
			}
		}
	}
}
