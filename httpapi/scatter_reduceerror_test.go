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

// TestViewScatterOtherShareReduceErrorFailsAsOneNode: a reduce that fails
// over a row of another node's share (a _sum or _stats given a value that
// is not a number, a JavaScript reduce that throws) fails the query with
// the 500 and reason one node holding every document answers: the data is
// at fault, not the node; a review found the node asked answered 200 with
// its own and the third node's reduction and an "errors" entry naming the
// node that holds the row, whose reason carried Go prefixes.
func TestViewScatterOtherShareReduceErrorFailsAsOneNode(t *testing.T) {
	c := newScatterCluster(t)
	const ddoc = `{"views":{"t":{"map":"function (doc, meta) { emit(doc.g, doc.n); }",
		"reduce":"function (k, v, re) { var s = 0; for (var i = 0; i < v.length; i++) { if (typeof v[i] != 'number') throw new Error('not a number: ' + v[i]); s += v[i]; } return s; }"}}}`
	for _, f := range append([]*fixture{c.oracle}, c.nodes...) {
		if st, _, body := f.do("PUT", "/default/_design/e", "application/json", ddoc); st != 201 {
			t.Fatalf("PUT ddoc: %d %s", st, body)
		}
	}
	const key = "bad-value"
	b, _ := c.oracle.eng.Bucket("default")
	owner := b.PartitionOf(key) % 3
	for _, f := range []*fixture{c.oracle, c.nodes[owner]} {
		nb, _ := f.eng.Bucket("default")
		if _, err := nb.DefaultCollection().Upsert(context.Background(), key, []byte(`{"g":"a","n":"not a number"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{"/default/_design/d/_view/s?stale=false", "/default/_design/d/_view/st?stale=false", "/default/_design/e/_view/t?stale=false"} {
		st, _, want := c.oracle.do("GET", path, "", "")
		if st != 500 || !strings.Contains(want, "not a number") {
			t.Fatalf("%s on one node holding every document: %d %s, want a 500", path, st, want)
		}
		for _, asked := range []int{(owner + 1) % 3, (owner + 2) % 3, owner} {
			if st, _, got := c.nodes[asked].do("GET", path, "", ""); st != 500 || got != want {
				t.Errorf("%s at node %d (node %d holds the row): %d %s\nwant 500 %s", path, asked, owner, st, got, want)
			}
		}
	}
}
