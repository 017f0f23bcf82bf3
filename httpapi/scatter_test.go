package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
)

// scatterDDoc is a design document with a map-only view and reduce views
// over array keys (group_level), a document emitting twice.
const scatterDDoc = `{"views":{
	"m":{"map":"function (doc, meta) { emit([doc.g, doc.n % 4], doc.n); if (doc.n % 5 == 0) emit(doc.g, null); }"},
	"s":{"map":"function (doc, meta) { emit([doc.g, doc.n % 4], doc.n); }","reduce":"_sum"},
	"st":{"map":"function (doc, meta) { emit([doc.g, doc.n % 4], doc.n); }","reduce":"_stats"},
	"js":{"map":"function (doc, meta) { emit([doc.g, doc.n % 4], doc.n); }","reduce":"function (k, v, re) { var s = 0; for (var i = 0; i < v.length; i++) s += v[i]; return s; }"}}}`

// cluster is three API nodes of one bucket, each covering the partitions
// p with p%3 == its index and holding only their documents, beside an
// oracle holding every document.
type scatterCluster struct {
	oracle *fixture
	nodes  []*fixture
	urls   []string
	// rev is every node's coverage revision; stale, when above 0, is the
	// revision node 0 reads (then it reads rev again).
	rev, stale atomic.Int64
	reads      atomic.Int64 // node 0's coverage reads
	extra      []httpapi.Coverer
	// coverageHook, when set, runs at each of node 0's coverage reads,
	// before it gets its coverage.
	coverageHook atomic.Pointer[func()]
}

func newScatterCluster(t *testing.T) *scatterCluster {
	return newScatterClusterOpts(t, 0)
}

// newScatterClusterOpts is newScatterCluster with each API node's
// MaxRequests (0: the default).
func newScatterClusterOpts(t *testing.T, maxRequests int) *scatterCluster {
	return newScatterClusterWith(t, maxRequests, nil)
}

// newScatterClusterWith is newScatterClusterOpts with an engine service
// attached to node 0's engine before its views (nil: none).
func newScatterClusterWith(t *testing.T, maxRequests int, first engine.BucketService) *scatterCluster {
	c := &scatterCluster{oracle: newFixture(t)}
	c.rev.Store(7)
	for i := range 3 {
		var svc engine.BucketService
		if i == 0 {
			svc = first
		}
		c.nodes = append(c.nodes, newFixtureFirst(t, nil, &httpapi.Options{MaxRequests: maxRequests, ViewCoverage: func(ctx context.Context, bucket string, atLeast int64) (*httpapi.ViewCoverage, error) {
			if h := c.coverageHook.Load(); h != nil && i == 0 {
				(*h)()
			}
			return c.coverage(i), nil
		}}, nil, nil, svc))
		c.urls = append(c.urls, c.nodes[i].srv.URL)
	}
	js := "application/json"
	for _, f := range append([]*fixture{c.oracle}, c.nodes...) {
		if st, _, body := f.do("PUT", "/default/_design/d", js, scatterDDoc); st != 201 {
			t.Fatalf("PUT ddoc: %d %s", st, body)
		}
	}
	b, _ := c.oracle.eng.Bucket("default")
	for i := range 300 {
		key := fmt.Sprintf("k%03d", i)
		doc := fmt.Sprintf(`{"g":%q,"n":%d}`, []string{"a", "b", "C", "d"}[i%4], i%37)
		opts := &engine.WriteOptions{}
		if i%6 == 0 {
			opts.Expiry = 100
		}
		for _, f := range []*fixture{c.oracle, c.nodes[b.PartitionOf(key)%3]} {
			nb, _ := f.eng.Bucket("default")
			if _, err := nb.DefaultCollection().Upsert(context.Background(), key, []byte(doc), opts); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, f := range append([]*fixture{c.oracle}, c.nodes...) {
		f.clk.Advance(200) // a sixth of the documents expired, not purged
		for _, v := range []string{"m", "s", "st", "js"} {
			f.do("GET", "/default/_design/d/_view/"+v+"?stale=false&limit=0&reduce=false", "", "")
		}
	}
	return c
}

// coverage is node i's view of the coverage.
func (c *scatterCluster) coverage(i int) *httpapi.ViewCoverage {
	rev := c.rev.Load()
	if i == 0 {
		c.reads.Add(1)
		if s := c.stale.Swap(0); s > 0 {
			rev = s
		}
	}
	cov := &httpapi.ViewCoverage{Rev: rev}
	for n := range 3 {
		var ps []int
		for p := n; p < 16; p += 3 {
			ps = append(ps, p)
		}
		cov.Nodes = append(cov.Nodes, httpapi.Coverer{Name: fmt.Sprint("n", n), URL: c.urls[n], Self: n == i, Partitions: ps})
	}
	cov.Nodes = append(cov.Nodes, c.extra...)
	return cov
}

// revs matches the revs of documents in answers with include_docs.
var revs = regexp.MustCompile(`"rev":"[^"]*"`)

// TestViewScatter: a view query at any node of three, each holding and
// covering a third of the partitions, answers exactly as one node holding
// every document.
func TestViewScatter(t *testing.T) {
	c := newScatterCluster(t)
	queries := []string{
		"m?stale=ok", "m?stale=ok&descending=true", "m?skip=7&limit=11", "m?descending=true&skip=3&limit=20",
		`m?startkey=["b"]&endkey=["d",2]&limit=25`, `m?startkey=["d"]&endkey=["b",2]&descending=true&inclusive_end=false`,
		`m?keys=[["a",1],"b",["a",1],["zz"],"b"]`, `m?keys=[["a",1],"b",["a",1]]&descending=true&skip=2&limit=9`,
		`m?key="C"&startkey_docid=k100&include_docs=true`, "m?expired=exclude&limit=15", "m?include_docs=true&limit=6&skip=30",
		"s", "s?group=true", "s?group_level=1", "s?group_level=1&descending=true&skip=1&limit=2", "s?expired=exclude&group=true",
		`s?keys=[["a",1],["b",2],["a",1]]&group=true`, `s?startkey=["b"]&endkey=["C",{}]`, "s?reduce=false&limit=10&skip=4",
		"st?group_level=1", "st?expired=exclude", "js?group=true&limit=5", "js?group_level=1&descending=true", "js",
	}
	for _, q := range queries {
		path := "/default/_design/d/_view/" + strings.ReplaceAll(strings.ReplaceAll(q, "[", "%5B"), "]", "%5D")
		_, h, want := c.oracle.do("GET", path, "", "")
		if !strings.Contains(want, `"rows":[`) {
			t.Fatalf("%s on the oracle: %s", q, want)
		}
		// A single node (no coverage) answers alone, as before: no merge.
		if h.Get("X-Mayfly-View-Nodes") != "" {
			t.Fatalf("%s on a single node went through a merge", q)
		}
		for i, n := range c.nodes {
			// Separate engines give a document another CAS, so another rev.
			st, h, got := n.do("GET", path, "", "")
			if st != 200 || revs.ReplaceAllString(got, "") != revs.ReplaceAllString(want, "") {
				t.Errorf("%s at node %d: %d\n got %s\nwant %s", q, i, st, got, want)
			}
			if h.Get("X-Mayfly-View-Nodes") != "3" {
				t.Errorf("%s at node %d: X-Mayfly-View-Nodes %q, want 3", q, i, h.Get("X-Mayfly-View-Nodes"))
			}
		}
	}
	// keys in a POST body are passed on to every coverer.
	body := `{"keys":[["b",3],["a",0],["b",3]]}`
	_, _, want := c.oracle.do("POST", "/default/_design/d/_view/m?limit=40", "application/json", body)
	if _, _, got := c.nodes[2].do("POST", "/default/_design/d/_view/m?limit=40", "application/json", body); got != want {
		t.Errorf("POST keys:\n got %s\nwant %s", got, want)
	}
}

// TestViewScatterCoverageChanged: a node that read another coverage
// revision than its coverers' is refused by them, reads it again, and
// answers right; it never answers from the stale one.
func TestViewScatterCoverageChanged(t *testing.T) {
	c := newScatterCluster(t)
	_, _, want := c.oracle.do("GET", "/default/_design/d/_view/s?group=true", "", "")
	c.stale.Store(6)
	before := c.reads.Load()
	if st, _, got := c.nodes[0].do("GET", "/default/_design/d/_view/s?group=true", "", ""); st != 200 || got != want {
		t.Fatalf("after a coverage change: %d\n got %s\nwant %s", st, got, want)
	}
	if n := c.reads.Load() - before; n != 2 {
		t.Fatalf("node 0 read its coverage %d times, want 2 (the stale one, then the new)", n)
	}
	// A share request under an old revision is refused.
	st, _, body := c.nodes[1].do("GET", "/default/_design/d/_view/s?_share_rev=3&_share_now=1&_share_partitions=1-2", "", "")
	if st != http.StatusConflict || !strings.Contains(body, "coverage_changed") {
		t.Fatalf("a share under an old revision: %d %s", st, body)
	}
	// So is one for partitions the node does not cover.
	st, _, body = c.nodes[1].do("GET", "/default/_design/d/_view/s?_share_rev=7&_share_now=1&_share_partitions=0-2", "", "")
	if st != http.StatusConflict || !strings.Contains(body, "partition 0") {
		t.Fatalf("a share of partitions not covered: %d %s", st, body)
	}
}

// TestViewScatterNodeDown: a coverer that cannot be reached leaves its
// rows out and is named in Couchbase's "errors" list (on_error=continue,
// the default); on_error=stop answers the error alone; a coverer that does
// not answer within connection_timeout is "req_timedout"; and the shares
// are streamed (viewScatterStreams).
func TestViewScatterNodeDown(t *testing.T) {
	c := newScatterCluster(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang); slow.Close() })
	c.extra = []httpapi.Coverer{{Name: "dead", URL: deadURL, Partitions: nil}}
	_, _, all := c.oracle.do("GET", "/default/_design/d/_view/m?limit=1000", "", "")
	st, _, got := c.nodes[1].do("GET", "/default/_design/d/_view/m?limit=1000", "", "")
	wantErr := `"errors":[{"from":"` + deadURL + `/default/_design/d/_view/m","reason":"econnrefused"}]`
	// The dead coverer covers no partition: every row is there.
	want := strings.Replace(all, "\r\n]\r\n}\n", "\r\n],\r\n"+wantErr+"\r\n}\n", 1)
	if st != 200 || got != want {
		t.Fatalf("a dead coverer, on_error=continue: %d\n got %s\nwant %s", st, got, want)
	}
	st, _, got = c.nodes[1].do("GET", "/default/_design/d/_view/m?limit=1000&on_error=stop", "", "")
	if want := "{\"total_rows\":0,\"rows\":[\r\n]," + "\r\n" + wantErr + "\r\n}\n"; st != 200 || got != want {
		t.Fatalf("a dead coverer, on_error=stop: %d %q, want %q", st, got, want)
	}
	c.extra = []httpapi.Coverer{{Name: "slow", URL: slow.URL}}
	st, _, got = c.nodes[2].do("GET", "/default/_design/d/_view/s?connection_timeout=300", "", "")
	if st != 200 || !strings.Contains(got, `"reason":"req_timedout"`) || !strings.Contains(got, `"key":null`) {
		t.Fatalf("a coverer past connection_timeout: %d %s", st, got)
	}
	c.extra = nil
	viewScatterStreams(t, c)
}

// viewScatterStreams (part of TestViewScatterNodeDown, on its cluster):
// the node asked merges its coverers' shares as they arrive, writing the
// answer as it goes. With a coverer's share held after its first rows,
// the client reads the answer's first rows (the merge of every node's
// rows up to the held share's last one) while it is held, and once it is
// let go the whole answer is one node's; a coverer that dies part way
// through its share leaves the answer ending with an error naming it,
// never a short answer passed off as whole.
func viewScatterStreams(t *testing.T, c *scatterCluster) {
	const path = "/default/_design/d/_view/m?include_docs=true"
	node2 := c.urls[2]
	_, _, want := c.oracle.do("GET", path, "", "")
	readsWhileHeld(t, c, path, want, revs)

	dies := cutProxy(t, node2, 3000, nil)
	c.urls[2] = dies.URL
	st, _, got := c.nodes[0].do("GET", path, "", "")
	wantErr := "\r\n],\r\n" + `"errors":[{"from":"` + dies.URL + `/default/_design/d/_view/m","reason":"the node's answer ended before its rows did"}]` + "\r\n}\n"
	if st != 200 || !strings.HasSuffix(got, wantErr) || !json.Valid([]byte(got)) {
		t.Fatalf("a coverer that died part way: %d, want the answer to end with %q:\n%s", st, wantErr, got)
	}
	if n, all := strings.Count(got, `"id":`), strings.Count(want, `"id":`); n >= all || n == 0 {
		t.Fatalf("a coverer that died part way: %d rows of %d", n, all)
	}
	// One whose walk failed says why in its trailer: the reason listed.
	failed := cutProxyWith(t, node2, 3000, nil, "the index file was closed")
	c.urls[2] = failed.URL
	st, _, got = c.nodes[0].do("GET", path, "", "")
	wantErr = `"errors":[{"from":"` + failed.URL + `/default/_design/d/_view/m","reason":"the index file was closed"}]`
	if st != 200 || !strings.Contains(got, wantErr) || !json.Valid([]byte(got)) {
		t.Fatalf("a coverer whose walk failed part way: %d, want %q in:\n%s", st, wantErr, got)
	}
}

// TestViewScatterOddIDs: document ids that need escaping in JSON (quotes,
// backslashes, control characters, non-ASCII) travel in a share and come
// back as one node shows them.
func TestViewScatterOddIDs(t *testing.T) {
	c := newScatterCluster(t)
	b, _ := c.oracle.eng.Bucket("default")
	for _, key := range []string{"q\"uote", `back\slash`, "tab\tnew\nline", "ctl\x01", "é-ü-中", "<&>"} {
		for _, f := range []*fixture{c.oracle, c.nodes[b.PartitionOf(key)%3]} {
			nb, _ := f.eng.Bucket("default")
			if _, err := nb.DefaultCollection().Upsert(context.Background(), key, []byte(`{"g":"odd","n":1}`), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	path := `/default/_design/d/_view/m?stale=false&key=%5B%22odd%22,1%5D`
	_, _, want := c.oracle.do("GET", path, "", "")
	for i, n := range c.nodes {
		if _, _, got := n.do("GET", path, "", ""); got != want || !strings.Contains(want, `"q\"uote"`) {
			t.Errorf("node %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// notCurrent is a Replicator whose copies can never be made current (as
// a cluster node's whose partitions have no leader): its MakeCurrent
// fails, and it takes no writes.
type notCurrent struct{}

func (notCurrent) Replicate(context.Context, int, []byte) (engine.ReplicatedResult, error) {
	return engine.ReplicatedResult{}, engine.ErrTempFail
}
func (notCurrent) Writable(context.Context, int) error { return engine.ErrTempFail }
func (notCurrent) MakeCurrent(_ context.Context, parts []int) error {
	return fmt.Errorf("%w: partition %d: it has no leader at the moment", engine.ErrNotCurrent, parts[0])
}

// TestViewScatterStaleFalseNotCurrent: a coverer whose copy of its
// partitions cannot be made current (engine.ErrNotCurrent) gives no rows
// for a stale=false query, and is named in the answer's errors, whether
// it is the node asked (its own share) or another; the other coverers'
// rows are there. A query without stale=false does not ask.
func TestViewScatterStaleFalseNotCurrent(t *testing.T) {
	c := newScatterCluster(t)
	b1, _ := c.nodes[1].eng.Bucket("default")
	b1.SetReplicator(notCurrent{})
	_, _, ok := c.nodes[0].do("GET", "/default/_design/d/_view/m?limit=1000&stale=ok", "", "")
	if strings.Contains(ok, `"errors"`) {
		t.Fatalf("stale=ok took the barrier: %s", ok)
	}
	for _, asked := range []int{1, 0} {
		st, _, got := c.nodes[asked].do("GET", "/default/_design/d/_view/m?limit=1000&stale=false", "", "")
		wantErr := `"errors":[{"from":"` + c.urls[1] + `/default/_design/d/_view/m","reason":"stale=false: temporary failure: this node's copy of a partition could not be made current: partition 1: it has no leader at the moment`
		if st != 200 || !strings.Contains(got, wantErr) {
			t.Fatalf("asked node %d: %d %s\nwant errors with %s", asked, st, got, wantErr)
		}
		if got == ok || !strings.Contains(got, `"rows":[`) || strings.Count(got, `"id":`) == 0 {
			t.Fatalf("asked node %d: the other coverers' rows are missing: %s", asked, got)
		}
		for _, line := range strings.Split(got, "\r\n") {
			var id string
			if i := strings.Index(line, `"id":"`); i >= 0 {
				id = line[i+6:]
				id = id[:strings.IndexByte(id, '"')]
				if p := b1.PartitionOf(id); p%3 == 1 {
					t.Fatalf("asked node %d: a row of partition %d, covered by the failed node: %s", asked, p, line)
				}
			}
		}
	}
}

// TestViewScatterSharesNotRefusedUnderSaturation: with one request slot a
// node, each node's slot held by a merger waiting for a slow coverer,
// every share the nodes ask of each other is still answered (share
// requests have a pool of their own): the three answers have every row and
// no errors. Refused for want of a slot, as before, each merger's answer
// would name its peers in "errors" (a self-block across the cluster).
func TestViewScatterSharesNotRefusedUnderSaturation(t *testing.T) {
	c := newScatterClusterOpts(t, 1)
	// Each node is reached through a proxy that counts the share requests
	// the node has answered, whatever the answer.
	var answered atomic.Int64
	for i, u := range c.urls {
		target, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		rp := &httputil.ReverseProxy{
			Rewrite:        func(pr *httputil.ProxyRequest) { pr.SetURL(target) }, // the node's Host too
			ModifyResponse: func(*http.Response) error { answered.Add(1); return nil },
		}
		proxy := httptest.NewServer(rp)
		t.Cleanup(proxy.Close)
		c.urls[i] = proxy.URL
	}
	// The slow coverer answers an empty share once every merger asked it
	// and the six shares between the nodes were answered.
	var asked atomic.Int64
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asked.Add(1) == 3 {
			go func() {
				// A deadline only to catch a hang.
				for deadline := time.Now().Add(time.Minute); answered.Load() < 6 && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
				close(release)
			}()
		}
		select {
		case <-release:
			w.Write([]byte(`{"total_rows":0,"rows":[]}`))
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	c.extra = []httpapi.Coverer{{Name: "slow", URL: slow.URL}}
	const q = "/default/_design/d/_view/m?limit=1000&connection_timeout=60000"
	_, _, want := c.oracle.do("GET", q, "", "")
	type answer struct {
		st   int
		body string
	}
	answers := make([]answer, 3)
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() {
			st, _, body := n.do("GET", q, "", "")
			answers[i] = answer{st, body}
		})
	}
	wg.Wait()
	for i, a := range answers {
		if a.st != 200 || revs.ReplaceAllString(a.body, "") != revs.ReplaceAllString(want, "") {
			t.Errorf("node %d, its slot held while it waited: %d\n got %s\nwant %s", i, a.st, a.body, want)
		}
	}

	// Rounds of as many concurrent queries as each node has slots: a
	// query the node lets in answers every row, no share refused.
	c.extra = nil
	for round := range 30 {
		for i, n := range c.nodes {
			wg.Go(func() {
				st, _, body := n.do("GET", "/default/_design/d/_view/s?group_level=1", "", "")
				answers[i] = answer{st, body}
			})
		}
		wg.Wait()
		_, _, want := c.oracle.do("GET", "/default/_design/d/_view/s?group_level=1", "", "")
		for i, a := range answers {
			if a.st == http.StatusServiceUnavailable && strings.Contains(a.body, "too_many_requests") {
				continue // the node's one slot not yet given back by the round before
			}
			if a.st != 200 || a.body != want {
				t.Fatalf("round %d node %d: %d\n got %s\nwant %s", round, i, a.st, a.body, want)
			}
		}
	}
}

// TestShareRoutesTakeNoSlot: with a node's one slot held by a merger, a
// share request of each route a node merges (a view, _all_docs, the
// document listing) is still answered, while a client's request is
// refused 503.
func TestShareRoutesTakeNoSlot(t *testing.T) {
	c := newScatterClusterOpts(t, 1)
	asked := make(chan struct{}, 1)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked <- struct{}{}
		select {
		case <-release:
			w.Write([]byte(`{"total_rows":0,"rows":[]}`))
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	c.extra = []httpapi.Coverer{{Name: "slow", URL: slow.URL}}
	done := make(chan int)
	go func() {
		st, _, _ := c.nodes[1].do("GET", "/default/_design/d/_view/m?limit=5", "", "")
		done <- st
	}()
	<-asked // node 1's merger holds its slot until the slow coverer answers
	if st, _, body := c.nodes[1].do("GET", "/default/_all_docs?limit=1", "", ""); st != http.StatusServiceUnavailable {
		t.Fatalf("a client's request with the slot held: %d %s, want 503", st, body)
	}
	const share = "_share_rev=7&_share_now=1&_share_partitions=1,4"
	for _, path := range []string{
		"/default/_design/d/_view/m?limit=5&" + share,
		"/default/_all_docs?limit=5&" + share,
		"/pools/default/buckets/default/scopes/_default/collections/_default/docs?limit=5&" + share,
	} {
		if st, _, body := c.nodes[1].do("GET", path, "", ""); st != 200 || !strings.Contains(body, `"rows"`) {
			t.Errorf("%s with the slot held: %d %s", path, st, body)
		}
	}
	close(release)
	if st := <-done; st != 200 {
		t.Fatalf("the merger: %d", st)
	}
}

// TestShareCoverageMovedDuringQuery: a coverer's share is checked against
// its coverage before the query and again after it: when its coverage
// moved meanwhile (its coverage agent then drops the partitions it no
// longer covers from its indexes, views.Service.Cover, possibly before
// the query read them), the share is refused coverage_changed, for the
// querying node to ask again, rather than answered without their rows.
func TestShareCoverageMovedDuringQuery(t *testing.T) {
	ctx := context.Background()
	var rev atomic.Int64
	rev.Store(7)
	var move atomic.Bool
	var f *fixture
	f = newFixtureOpts(t, &httpapi.Options{ViewCoverage: func(ctx context.Context, bucket string, atLeast int64) (*httpapi.ViewCoverage, error) {
		r := rev.Load()
		if r == 7 && atLeast == 7 && move.Load() {
			// The revision this share was asked under is read; at once
			// the coverage moves on and the agent applies it: this node
			// covers nothing any more.
			if err := f.views.Cover(ctx, bucket, make([]bool, 16)); err != nil {
				return nil, err
			}
			rev.Store(8)
		}
		all := make([]int, 16)
		for p := range all {
			all[p] = p
		}
		cov := &httpapi.ViewCoverage{Rev: r, Nodes: []httpapi.Coverer{{Name: "n0", Self: true, Partitions: all}}}
		if r > 7 {
			cov.Nodes[0].Name, cov.Nodes[0].Self = "n1", false
		}
		return cov, nil
	}}, nil)
	if st, _, body := f.do("PUT", "/default/_design/d", "application/json", scatterDDoc); st != 201 {
		t.Fatalf("PUT ddoc: %d %s", st, body)
	}
	b, _ := f.eng.Bucket("default")
	for i := range 40 {
		if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprintf("k%03d", i), []byte(`{"g":"a","n":1}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	share := "/default/_design/d/_view/m?reduce=false&stale=false&_share_rev=7&_share_now=1&_share_partitions=0-15"
	if st, _, body := f.do("GET", share, "", ""); st != 200 || !strings.Contains(body, `"total_rows":40`) {
		t.Fatalf("a share while the coverage stays: %d %s, want the 40 rows", st, body)
	}
	move.Store(true)
	st, _, body := f.do("GET", share, "", "")
	if st != http.StatusConflict || !strings.Contains(body, "coverage_changed") {
		t.Fatalf("a share whose coverage moved while it was read: %d %s, want 409 coverage_changed", st, body)
	}
}

// cutProxy passes requests on to target and its answers back, but only
// the first after bytes of a share's answer (a request with _share_rev):
// then it waits for hold to close and passes the rest on, or, with hold
// nil, drops the connection, as a coverer that dies part way through its
// share. Other requests pass whole.
func cutProxy(t *testing.T, target string, after int, hold chan struct{}) *httptest.Server {
	return cutProxyWith(t, target, after, hold, "")
}

// cutProxyWith is cutProxy; with hold nil and a reason, the share's answer
// ends there as a coverer's whose walk failed: without its closing
// bracket, the reason in its trailer.
func cutProxyWith(t *testing.T, target string, after int, hold chan struct{}, reason string) *httptest.Server {
	t.Helper()
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp := passOn(t, w, r, target)
		if resp == nil {
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		if r.URL.Query().Has("_share_rev") {
			if _, err := io.CopyN(w, resp.Body, int64(after)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			if hold == nil && reason != "" {
				w.Header().Set(http.TrailerPrefix+"X-Mayfly-Share-Error", strconv.Quote(reason))
				return
			}
			if hold == nil {
				panic(http.ErrAbortHandler) // the connection drops
			}
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		io.Copy(w, resp.Body)
		for k, v := range resp.Trailer {
			w.Header()[http.TrailerPrefix+k] = v
		}
	}))
	t.Cleanup(p.Close)
	return p
}

// passOn sends a test proxy's request r on to target, as it came, and
// returns the answer; nil when it could not (r answered 502 then, or the
// test told).
func passOn(t *testing.T, w http.ResponseWriter, r *http.Request, target string) *http.Response {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), r.Body)
	if err != nil {
		t.Error(err)
		return nil
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return nil
	}
	return resp
}

// readRows reads body until it holds n rows ("id" members) or the answer
// ends, and returns what it read; a guard of a minute only catches a hang.
func readRows(t *testing.T, body io.Reader, n int) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		var b strings.Builder
		buf := make([]byte, 512)
		for strings.Count(b.String(), `"id":`) < n {
			k, err := body.Read(buf)
			b.Write(buf[:k])
			if err != nil {
				break
			}
		}
		got <- b.String()
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(time.Minute):
		t.Fatalf("no %d rows within a minute", n)
		return ""
	}
}

// readsWhileHeld asks node 0 for path with node 2's share held after its
// first 3,000 bytes (its head and a few rows): the client reads want's head
// and at least 10 rows while it is held, and, once it is let go, the whole
// of want (both with norm's matches left out). Node 2 is asked through the
// proxy from then on.
func readsWhileHeld(t *testing.T, c *scatterCluster, path, want string, norm *regexp.Regexp) {
	t.Helper()
	hold := make(chan struct{})
	c.urls[2] = cutProxy(t, c.urls[2], 3000, hold).URL
	req, err := http.NewRequest("GET", c.urls[0]+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(adminUser, adminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := readRows(t, resp.Body, 10)
	head := want[:strings.Index(want, `"rows":[`)] // total_rows: every node's
	if n := strings.Count(first, `"id":`); n < 10 || !strings.HasPrefix(first, head) {
		t.Fatalf("with node 2's share held, the client read %d rows: %.300s", n, first)
	}
	close(hold)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := first + string(rest); norm.ReplaceAllString(got, "") != norm.ReplaceAllString(want, "") {
		t.Fatalf("once let go:\n got %s\nwant %s", got, want)
	}
}
