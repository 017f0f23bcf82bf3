package httpapi_test

import (
	"context"
	"strings"
	"testing"
)

// TestViewScatterOwnShareReduceErrorFailsAsOneNode: a _sum over a row whose
// value is not a number fails the query with Couchbase's 500 (README,
// "Views"); on a cluster, the node whose own share holds that row fails
// the query as one node does (docs/ARCHITECTURE.md: "A failure of the
// merger's own share fails the query as on one node"), rather than
// answering 200 with the other nodes' sum as if it were the whole view's.
// A review found the node answered 200, the sum without its share, and an
// "errors" entry naming itself.
func TestViewScatterOwnShareReduceErrorFailsAsOneNode(t *testing.T) {
	c := newScatterCluster(t)
	const key = "bad-value"
	b, _ := c.oracle.eng.Bucket("default")
	owner := b.PartitionOf(key) % 3
	for _, f := range []*fixture{c.oracle, c.nodes[owner]} {
		nb, _ := f.eng.Bucket("default")
		if _, err := nb.DefaultCollection().Upsert(context.Background(), key, []byte(`{"g":"a","n":"not a number"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	const path = "/default/_design/d/_view/s?stale=false"
	st, _, want := c.oracle.do("GET", path, "", "")
	if st != 500 || !strings.Contains(want, "Value is not a number") {
		t.Fatalf("one node holding every document: %d %s, want Couchbase's 500", st, want)
	}
	st, _, got := c.nodes[owner].do("GET", path, "", "")
	if st != 500 || got != want {
		t.Errorf("the node holding the row: %d %s\nwant 500 %s", st, got, want)
	}
}
