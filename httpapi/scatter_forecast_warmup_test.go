package httpapi_test

import (
	"strings"
	"testing"
)

// TestViewScatterForecastAtAWarmingNode: a view's expiry forecast asked of
// a cluster node whose view indexes are still opening (its bucket
// restarting) is answered as a row query asked of it is, and as the same
// forecast asked of another node is: 200 with the other nodes' counts and
// the warming node's share named in "errors" (README: "the forecast covers
// the whole view whichever node is asked, as a row query does"); a review
// found the warming node passed row queries to another node but not
// forecasts (relayView leaves them out), answering 503 "still opening its
// indexes".
func TestViewScatterForecastAtAWarmingNode(t *testing.T) {
	hold := newAttachHold()
	c := newScatterClusterWith(t, 0, hold)
	t.Cleanup(hold.open)
	const path = "/default/_design/d/_view/s?forecast=60&horizon=600"
	done, err := restartHeld(c.nodes[0], hold)
	if err != nil {
		t.Fatal(err)
	}
	st, _, want := c.nodes[1].do("GET", path, "", "")
	if st != 200 || !strings.Contains(want, `"errors":[{"from":"`+c.urls[0]) || !strings.Contains(want, "still opening its indexes") {
		t.Fatalf("asked of node 1 during node 0's warm-up: %d %s, want node 0's share named in errors", st, want)
	}
	if st, _, got := c.nodes[0].do("GET", path, "", ""); st != 200 || got != want {
		t.Errorf("asked of node 0 during its warm-up: %d %s\nwant 200 %s, as node 1 answers", st, got, want)
	}
	hold.open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
