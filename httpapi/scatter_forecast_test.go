package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
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

// TestViewScatterForecastSumsEveryShare: on a cluster, a view's forecast
// sums every node's share at the asked node's instant: each interval's
// rows, and their values as the view's reduce combines them (_sum added,
// _stats field by field, a JavaScript reduce re-reduced), key bounds and
// reduce=false as on one node; a node that cannot be reached is named in
// "errors" after the others' counts (alone with on_error=stop), and a
// reduce that fails in another node's share fails the forecast with one
// node's 500. A review found each node answered for its own share only.
func TestViewScatterForecastSumsEveryShare(t *testing.T) {
	c := newScatterCluster(t)
	b, _ := c.oracle.eng.Bucket("default")
	upsert := func(key, doc string, expiry int64) {
		t.Helper()
		for _, f := range []*fixture{c.oracle, c.nodes[b.PartitionOf(key)%3]} {
			nb, _ := f.eng.Bucket("default")
			if _, err := nb.DefaultCollection().Upsert(context.Background(), key, []byte(doc), &engine.WriteOptions{Expiry: expiry}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 90 {
		upsert(fmt.Sprintf("soon%02d", i), fmt.Sprintf(`{"g":%q,"n":%d}`, []string{"a", "b", "C"}[i%3], i), int64(5+i*6))
	}
	queries := []string{"s", "st", "js", "m", "s?reduce=false", `s?startkey=["b"]`, `js?startkey=["C"]&endkey=["b"]&descending=true`, `st?keys=[["a",1],["b",2],["a",1]]`}
	for _, q := range queries {
		path := "/default/_design/d/_view/" + q + sep(q) + "forecast=60&horizon=600&stale=false"
		st, _, want := c.oracle.do("GET", path, "", "")
		if st != 200 || !someRows.MatchString(want) {
			t.Fatalf("%s on one node holding every document: %d %s", path, st, want)
		}
		for i, n := range c.nodes {
			if st, _, got := n.do("GET", path, "", ""); st != 200 || got != want {
				t.Errorf("%s at node %d: %d %s\nwant %s", path, i, st, got, want)
			}
		}
	}

	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	c.extra = []httpapi.Coverer{{Name: "dead", URL: deadURL}}
	const path = "/default/_design/d/_view/st?forecast=60&horizon=600&stale=false"
	_, _, all := c.oracle.do("GET", path, "", "")
	wantErr := `"errors":[{"from":"` + deadURL + `/default/_design/d/_view/st","reason":"econnrefused"}]`
	st, _, got := c.nodes[1].do("GET", path, "", "")
	if want := strings.TrimSuffix(all, "}\n") + "," + wantErr + "}\n"; st != 200 || got != want {
		t.Errorf("a dead coverer: %d %s\nwant %s", st, got, want)
	}
	st, _, got = c.nodes[1].do("GET", path+"&on_error=stop", "", "")
	if now := strings.TrimPrefix(strings.SplitN(all, ",", 2)[0], "{"); st != 200 || got != "{"+now+","+wantErr+"}\n" {
		t.Errorf("a dead coverer, on_error=stop: %d %s, want the instant and the error alone", st, got)
	}
	c.extra = nil

	const bad = "bad-soon"
	upsert(bad, `{"g":"a","n":"not a number"}`, 100)
	st, _, want := c.oracle.do("GET", path, "", "")
	if st != 500 || !strings.Contains(want, "not a number") {
		t.Fatalf("a bad value, on one node holding every document: %d %s", st, want)
	}
	owner := b.PartitionOf(bad) % 3
	for _, i := range []int{(owner + 1) % 3, owner} {
		if st, _, got := c.nodes[i].do("GET", path, "", ""); st != 500 || got != want {
			t.Errorf("a bad value at node %d (node %d holds it): %d %s\nwant 500 %s", i, owner, st, got, want)
		}
	}
}

// someRows matches an interval of a forecast with rows.
var someRows = regexp.MustCompile(`"end":\d+,"rows":[1-9]`)

// sep is the separator before more parameters of a view query q.
func sep(q string) string {
	if strings.Contains(q, "?") {
		return "&"
	}
	return "?"
}
