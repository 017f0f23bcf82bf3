package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
)

// docRevs matches the revisions in _all_docs answers (rows' values and
// include_docs documents): separate engines give a document another CAS.
var docRevs = regexp.MustCompile(`"_?rev":"[^"]*"`)

// TestAllDocsScatter: _all_docs at any node of three, each holding a third
// of the partitions, lists exactly what one node holding every document
// lists: ranges both ways, skip and limit, keys (duplicates, a missing key,
// a deleted one, one that is not a string) in the query and in a POST
// body, include_docs, and total_rows counting every node's documents.
func TestAllDocsScatter(t *testing.T) {
	c := newScatterCluster(t)
	b, _ := c.oracle.eng.Bucket("default")
	for _, key := range []string{"k010", "k211"} {
		for _, f := range []*fixture{c.oracle, c.nodes[b.PartitionOf(key)%3]} {
			nb, _ := f.eng.Bucket("default")
			if _, err := nb.DefaultCollection().Delete(context.Background(), key, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	queries := []string{
		"", "?limit=10", "?skip=5&limit=7", "?descending=true&skip=2&limit=9", "?startkey=k100&endkey=k150",
		"?start_key=%22k150%22&end_key=%22k100%22&descending=true&inclusive_end=false", "?key=k042", "?key=k010",
		`?keys=["k001","k299","nope","k001","k010",3]`, `?keys=["k001","k299","nope","k001"]&descending=true&skip=1&limit=2`,
		"?include_docs=true&limit=4&skip=100", "?limit=0", "?skip=3&limit=0", "?startkey=k290", "?skip=1000",
	}
	for _, q := range queries {
		path := "/default/_all_docs" + strings.ReplaceAll(strings.ReplaceAll(q, "[", "%5B"), "]", "%5D")
		st, _, want := c.oracle.do("GET", path, "", "")
		if st != 200 || !strings.Contains(want, `"rows":[`) {
			t.Fatalf("%s on the oracle: %d %s", q, st, want)
		}
		for i, n := range c.nodes {
			st, h, got := n.do("GET", path, "", "")
			if st != 200 || docRevs.ReplaceAllString(got, "") != docRevs.ReplaceAllString(want, "") {
				t.Errorf("%s at node %d: %d\n got %s\nwant %s", q, i, st, got, want)
			}
			if h.Get("X-Mayfly-View-Nodes") != "3" {
				t.Errorf("%s at node %d: X-Mayfly-View-Nodes %q, want 3", q, i, h.Get("X-Mayfly-View-Nodes"))
			}
		}
	}
	body := `{"keys":["k299","k000","k299","zz"]}`
	_, _, want := c.oracle.do("POST", "/default/_all_docs?include_docs=true", "application/json", body)
	if _, _, got := c.nodes[1].do("POST", "/default/_all_docs?include_docs=true", "application/json", body); docRevs.ReplaceAllString(got, "") != docRevs.ReplaceAllString(want, "") {
		t.Errorf("POST keys:\n got %s\nwant %s", got, want)
	}
	// A coverer of the previous build sends its share whole, and a share
	// of keys first key first, with no "desc" in its head: read all the
	// same (turned round for descending keys).
	c.urls[2] = oldShareProxy(t, c.urls[2]).URL
	for _, q := range []string{`?keys=["k001","k299","nope","k001","k010",3,"k002","k003","k004","k005","k006","k007","k008","k009","k011","k012","k013","k014"]&descending=true&include_docs=true`, `?keys=["k002","k005","k006"]&skip=1`, "?descending=true&skip=2&limit=9", "?include_docs=true&limit=4&skip=100"} {
		path := "/default/_all_docs" + strings.ReplaceAll(strings.ReplaceAll(q, "[", "%5B"), "]", "%5D")
		_, _, want := c.oracle.do("GET", path, "", "")
		if st, _, got := c.nodes[0].do("GET", path, "", ""); st != 200 || docRevs.ReplaceAllString(got, "") != docRevs.ReplaceAllString(want, "") {
			t.Errorf("%s with a coverer of the previous build: %d\n got %s\nwant %s", q, st, got, want)
		}
	}
	// The old answer: one node's own documents only.
	_, _, one := c.oracle.do("GET", "/default/_all_docs?limit=0", "", "")
	if !strings.Contains(one, `"total_rows":298`) {
		t.Errorf("the oracle counts %s, want 298 (300 written, 2 deleted; expired ones count until purged)", one)
	}
}

// TestAllDocsScatterFailures: a coverer under another coverage revision is
// asked again, never answered from; a coverer that cannot be reached
// fails the listing (503, naming it) rather than leave its documents out.
func TestAllDocsScatterFailures(t *testing.T) {
	c := newScatterCluster(t)
	_, _, want := c.oracle.do("GET", "/default/_all_docs?limit=50&skip=20", "", "")
	c.stale.Store(6)
	before := c.reads.Load()
	if st, _, got := c.nodes[0].do("GET", "/default/_all_docs?limit=50&skip=20", "", ""); st != 200 || docRevs.ReplaceAllString(got, "") != docRevs.ReplaceAllString(want, "") {
		t.Fatalf("after a coverage change: %d\n got %s\nwant %s", st, got, want)
	}
	if n := c.reads.Load() - before; n != 2 {
		t.Fatalf("node 0 read its coverage %d times, want 2 (the stale one, then the new)", n)
	}
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	c.extra = []httpapi.Coverer{{Name: "dead", URL: deadURL, Partitions: []int{15}}}
	st, _, got := c.nodes[1].do("GET", "/default/_all_docs?limit=5", "", "")
	if st != http.StatusServiceUnavailable || !strings.Contains(got, "node dead") || !strings.Contains(got, "econnrefused") {
		t.Fatalf("a dead coverer: %d %s", st, got)
	}
	c.extra = nil

	// The shares are merged as they arrive: with a coverer's share held
	// after its first rows, the client reads the listing's first rows
	// while it is held, and the whole listing once it is let go.
	const path = "/default/_all_docs?include_docs=true"
	_, _, all := c.oracle.do("GET", path, "", "")
	node2 := c.urls[2]
	readsWhileHeld(t, c, path, all, docRevs)
	head := all[:strings.Index(all, `"rows":[`)] // total_rows: every node's

	// A coverer that dies part way through its share: the listing ends
	// without its closing bracket, as one node's cut short does, never
	// short and whole-looking (CouchDB's clients read no "errors" in
	// _all_docs); before the listing has begun (its skip not passed yet)
	// it fails as a dead coverer does.
	dies := cutProxy(t, node2, 3000, nil)
	c.urls[2] = dies.URL
	st, _, got = c.nodes[0].do("GET", path, "", "")
	if st != 200 || json.Valid([]byte(got)) || strings.HasSuffix(got, "]}\n") || !strings.HasPrefix(got, head) {
		t.Fatalf("a coverer that died part way: %d, want a listing begun and cut off, not valid JSON:\n%s", st, got)
	}
	if n, whole := strings.Count(got, `"id":`), strings.Count(all, `"id":`); n >= whole || n == 0 {
		t.Fatalf("a coverer that died part way: %d rows of %d", n, whole)
	}
	st, _, got = c.nodes[0].do("GET", path+"&skip=250", "", "")
	if st != http.StatusServiceUnavailable || !strings.Contains(got, "ended before its rows did") {
		t.Fatalf("a coverer that died before the listing began: %d %s", st, got)
	}
}

// TestBrowseScatter: the console's document listing (Couchbase's
// .../collections/{c}/docs) at any node of three lists and counts what one
// node holding every document does.
func TestBrowseScatter(t *testing.T) {
	c := newScatterCluster(t)
	cas := regexp.MustCompile(`"cas":[0-9]+`)
	norm := func(s string) string { return cas.ReplaceAllString(docRevs.ReplaceAllString(s, ""), "") }
	for _, q := range []string{"", "?limit=10&skip=5", "?startkey=k100&endkey=k150", "?startkey=%22k2%22&limit=7", "?include_docs=true&limit=3&skip=200", "?skip=1000"} {
		path := "/pools/default/buckets/default/scopes/_default/collections/_default/docs" + q
		st, _, want := c.oracle.do("GET", path, "", "")
		if st != 200 || !strings.Contains(want, `"total_rows"`) {
			t.Fatalf("%s on the oracle: %d %s", q, st, want)
		}
		for i, n := range c.nodes {
			if st, _, got := n.do("GET", path, "", ""); st != 200 || norm(got) != norm(want) {
				t.Errorf("%s at node %d: %d\n got %s\nwant %s", q, i, st, got, want)
			}
		}
	}
}

// TestBucketItemCountScatter: a bucket's basicStats.itemCount (the
// console's Items column) at any node of three counts every node's
// documents once, in the bucket's configuration and in the list of
// buckets, where each node holds a third of them.
func TestBucketItemCountScatter(t *testing.T) {
	c := newScatterCluster(t)
	count := func(f *fixture, path string) string {
		st, _, body := f.do("GET", path, "", "")
		if st != 200 {
			t.Fatalf("%s: %d %s", path, st, body)
		}
		return regexp.MustCompile(`"itemCount":[0-9]+`).FindString(body)
	}
	want := count(c.oracle, "/pools/default/buckets/default")
	if want != `"itemCount":300` {
		t.Fatalf("the oracle's count: %s, want 300", want)
	}
	for i, n := range c.nodes {
		for _, path := range []string{"/pools/default/buckets/default", "/pools/default/buckets"} {
			if got := count(n, path); got != want {
				t.Errorf("%s at node %d: %s, want %s", path, i, got, want)
			}
		}
	}
}

// TestBucketListAsksAtOnce: the list of buckets asks the other nodes for
// every bucket's item count at once, so a node that accepts a share
// request and never answers costs the list one wait, not one per bucket;
// each bucket then shows the asked node's own count.
func TestBucketListAsksAtOnce(t *testing.T) {
	c := newScatterCluster(t)
	names := []string{"default", "b1", "b2", "b3"}
	for _, f := range c.nodes {
		for _, name := range names[1:] {
			if _, err := f.eng.CreateBucket(context.Background(), engine.DefaultBucketSettings(name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	waiting, most := 0, 0
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		waiting++
		most = max(most, waiting)
		mu.Unlock()
		<-r.Context().Done() // the asking node gives up
		mu.Lock()
		waiting--
		mu.Unlock()
	}))
	defer stuck.Close()
	c.extra = []httpapi.Coverer{{Name: "stuck", URL: stuck.URL}}
	st, _, body := c.nodes[0].do("GET", "/pools/default/buckets", "", "")
	if st != 200 {
		t.Fatalf("GET /pools/default/buckets: %d %s", st, body)
	}
	for _, name := range names {
		if !strings.Contains(body, `"name":"`+name+`"`) {
			t.Errorf("bucket %s missing from the list: %s", name, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != len(names) {
		t.Fatalf("the stuck node was asked for %d buckets' counts at once, want %d (one request per bucket, all waiting together)", most, len(names))
	}
}

// TestListingsNotCurrent: a listing reads current documents, as one node's
// does: a coverer whose copies cannot be made current (no leader to ask)
// fails the listing rather than list what may be stale, whether it is the
// node asked or another; a bucket's item count (a statistic) does not wait.
func TestListingsNotCurrent(t *testing.T) {
	c := newScatterCluster(t)
	b1, _ := c.nodes[1].eng.Bucket("default")
	b1.SetReplicator(notCurrent{})
	key := "k000" // a key of a partition node 1 covers
	for i := 0; b1.PartitionOf(key)%3 != 1; i++ {
		key = fmt.Sprintf("k%03d", i)
	}
	for _, asked := range []int{1, 0} {
		for _, path := range []string{"/default/_all_docs?limit=5", `/default/_all_docs?keys=%5B%22` + key + `%22%5D`, "/pools/default/buckets/default/scopes/_default/collections/_default/docs?limit=5"} {
			st, _, got := c.nodes[asked].do("GET", path, "", "")
			if st != http.StatusServiceUnavailable || !strings.Contains(got, "could not be made current") {
				t.Errorf("%s asked at node %d: %d %s, want 503 naming the copy not current", path, asked, st, got)
			}
		}
	}
	if st, _, got := c.nodes[0].do("GET", "/pools/default/buckets/default", "", ""); st != 200 || !strings.Contains(got, `"itemCount":300`) {
		t.Errorf("the item count with a copy not current: %d %s", st, got)
	}
}

// leaderless is a Replicator whose partitions have no leader, as a
// cluster node's read barrier meets it (replica.Host.ReadBarrier): its
// MakeCurrent waits, issuing its rounds again, until ctx ends, then fails.
type leaderless struct{ notCurrent }

func (leaderless) MakeCurrent(ctx context.Context, parts []int) error {
	<-ctx.Done()
	return fmt.Errorf("%w: partition %d: it has no leader at the moment (%w)", engine.ErrNotCurrent, parts[0], ctx.Err())
}

// TestListingNotCurrentBounded: a listing whose coverer's copies cannot be
// made current because its partitions have no leader (the barrier waits
// for one until its ctx ends) fails within the listing's connection
// timeout naming the copy, whether that coverer is the node asked (its
// share runs in process: it would wait as long as the client does) or
// another (it answers before the node asked gives up on it, saying why).
func TestListingNotCurrentBounded(t *testing.T) {
	c := newScatterCluster(t)
	b1, _ := c.nodes[1].eng.Bucket("default")
	b1.SetReplicator(leaderless{})
	// connection_timeout 3 s: the barrier has 2.25 s, the other coverer's
	// answer the rest to arrive on a busy machine.
	for _, asked := range []int{1, 0} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // only to catch a hang
		st, _, got := c.nodes[asked].doWith("GET", "/default/_all_docs?limit=5&connection_timeout=3000", "", "", func(req *http.Request) {
			*req = *req.WithContext(ctx)
			req.SetBasicAuth(adminUser, adminPass)
		})
		cancel()
		if st != http.StatusServiceUnavailable || !strings.Contains(got, "could not be made current") {
			t.Errorf("asked at node %d: %d %s, want 503 naming the copy not current", asked, st, got)
		}
	}
}

// oldShareProxy passes requests on to target and its answers back; a
// share's answer as a node of the previous build sent it: whole, its rows
// of keys in the order of their positions, no "desc" in its head.
func oldShareProxy(t *testing.T, target string) *httptest.Server {
	t.Helper()
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp := passOn(t, w, r, target)
		if resp == nil {
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Error(err)
			return
		}
		if resp.StatusCode == 200 && r.URL.Query().Has("_share_rev") {
			var share struct {
				Total int64             `json:"total_rows"`
				Rows  []json.RawMessage `json:"rows"`
			}
			if err := json.Unmarshal(body, &share); err != nil {
				t.Errorf("a share: %v: %s", err, body)
				return
			}
			pos := func(row json.RawMessage) int {
				var r struct{ I int }
				json.Unmarshal(row, &r)
				return r.I
			}
			slices.SortStableFunc(share.Rows, func(a, b json.RawMessage) int { return pos(a) - pos(b) })
			body, _ = json.Marshal(share)
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.Header().Del("Trailer")
		w.Header().Del("Content-Length")
		w.WriteHeader(resp.StatusCode)
		w.Write(body)
	}))
	t.Cleanup(p.Close)
	return p
}
