package httpapi_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
)

// forwardPair is a follower node whose Route sends keys starting with
// "far" to a leader node (another server over another engine), and answers
// the others itself.
func forwardPair(t *testing.T) (follower, leader *fixture) {
	t.Helper()
	leader = newFixture(t)
	addr := strings.TrimPrefix(leader.srv.URL, "http://")
	route := func(_ context.Context, bucket, key string) (httpapi.Route, error) {
		if bucket == "default" && strings.HasPrefix(key, "far") {
			return httpapi.Route{Node: "lead", Addr: addr, From: "follow"}, nil
		}
		return httpapi.Route{}, nil
	}
	follower = newFixtureOpts(t, &httpapi.Options{Route: route}, nil)
	return follower, leader
}

// TestForwardedDocumentRequests: a document request for a key whose
// partition another node leads is answered by that node, its answer
// (status, CAS and other headers, body) returned unchanged, and the
// document lives on the leader alone; a key this node leads is answered
// here. The client's credentials travel with the request (the leader
// authenticates it).
func TestForwardedDocumentRequests(t *testing.T) {
	f, l := forwardPair(t)
	ctx := context.Background()

	code, _, body := f.do(http.MethodPut, "/default/docs/far1", "application/json", `{"v":1}`)
	if code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("PUT through the follower: %d %s", code, body)
	}
	put := jsonOf(t, body)
	if _, h, _ := f.do(http.MethodGet, "/default/docs/far1", "", ""); h.Get(httpapi.RoutedToHeader) != "lead" {
		t.Fatalf("a forwarded answer names %q as the node that answered", h.Get(httpapi.RoutedToHeader))
	}
	d, err := l.mustBucket("default").DefaultCollection().Get(ctx, "far1")
	if err != nil {
		t.Fatalf("the leader lacks the document written through the follower: %v", err)
	}
	if fmt.Sprint(put["cas"]) != fmt.Sprint(float64(d.CAS)) {
		t.Fatalf("the follower answered cas %v, the leader holds %d", put["cas"], d.CAS)
	}
	if _, err := f.mustBucket("default").DefaultCollection().Get(ctx, "far1"); err == nil {
		t.Fatal("the follower wrote the document itself")
	}

	// A read through the follower is the leader's answer, byte for byte.
	for _, path := range []string{"/default/docs/far1", "/default/docs/far1?meta=true"} {
		fc, fh, fb := f.do(http.MethodGet, path, "", "")
		lc, lh, lb := l.do(http.MethodGet, path, "", "")
		if fc != http.StatusOK || fc != lc || fb != lb {
			t.Fatalf("GET %s: follower %d %s, leader %d %s", path, fc, fb, lc, lb)
		}
		for _, h := range []string{"X-Mayfly-Cas", "X-Mayfly-Expiration", "X-Mayfly-Flags", "Content-Type"} {
			if fh.Get(h) != lh.Get(h) || lh.Get(h) == "" && h == "X-Mayfly-Cas" {
				t.Fatalf("GET %s: header %s follower %q, leader %q", path, h, fh.Get(h), lh.Get(h))
			}
		}
	}

	// A key with an escaped "/" reaches the leader as the same key.
	if code, _, body := f.do(http.MethodPut, "/default/docs/far%2Fslash", "application/json", `{"v":2}`); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("PUT far/slash: %d %s", code, body)
	}
	if _, err := l.mustBucket("default").DefaultCollection().Get(ctx, "far/slash"); err != nil {
		t.Fatalf("the leader lacks far/slash: %v", err)
	}

	// touch, then delete, through the follower; a CAS mismatch is the
	// leader's.
	if code, _, body := f.do(http.MethodPost, "/default/docs/far1/touch?expiry=100", "", ""); code != http.StatusOK {
		t.Fatalf("touch: %d %s", code, body)
	}
	if d, _ := l.mustBucket("default").DefaultCollection().Get(ctx, "far1"); d == nil || d.Expiration != t0+100 {
		t.Fatalf("the leader's document after a touch through the follower: %+v", d)
	}
	if code, _, body := f.do(http.MethodPut, "/default/docs/far1?cas=1", "application/json", `{"v":3}`); code != http.StatusConflict {
		t.Fatalf("a stale CAS through the follower: %d %s", code, body)
	}
	if code, _, body := f.do(http.MethodDelete, "/default/docs/far1", "", ""); code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, body)
	}
	if _, err := l.mustBucket("default").DefaultCollection().Get(ctx, "far1"); err == nil {
		t.Fatal("the leader still holds the document deleted through the follower")
	}
	if code, _, body := f.do(http.MethodGet, "/default/docs/far1", "", ""); code != http.StatusNotFound {
		t.Fatalf("a read of the deleted document through the follower: %d %s", code, body)
	}

	// A key this node leads stays here.
	if code, _, body := f.do(http.MethodPut, "/default/docs/near", "application/json", `{}`); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("PUT near: %d %s", code, body)
	}
	if _, err := f.mustBucket("default").DefaultCollection().Get(ctx, "near"); err != nil {
		t.Fatalf("the follower lacks its own key: %v", err)
	}
	if _, err := l.mustBucket("default").DefaultCollection().Get(ctx, "near"); err == nil {
		t.Fatal("a key the follower leads was forwarded")
	}

	// Wrong credentials are refused where they arrive.
	if code, _, _ := f.doAs(adminUser, "wrong", http.MethodGet, "/default/docs/far1", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d", code)
	}
}

// TestForwardedOnce: a request another node forwarded, arriving at a node
// that does not lead the key's partition either, is answered 503 naming
// the leader rather than forwarded again; a leader that cannot be reached
// and a partition without a leader answer 503 too, and nothing is written.
func TestForwardedOnce(t *testing.T) {
	f, l := forwardPair(t)
	code, hdr, body := f.doWith(http.MethodPut, "/default/docs/far2", "application/json", `{}`, func(r *http.Request) {
		r.SetBasicAuth(adminUser, adminPass)
		r.Header.Set(httpapi.ForwardedHeader, "n9")
	})
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "not my vbucket") || !strings.Contains(body, "node lead") {
		t.Fatalf("a forwarded request at a node that does not lead: %d %s", code, body)
	}
	if hdr.Get(httpapi.LeaderHeader) != "lead" {
		t.Fatalf("the refusal names %q in %s; want the leader", hdr.Get(httpapi.LeaderHeader), httpapi.LeaderHeader)
	}
	if _, err := l.mustBucket("default").DefaultCollection().Get(context.Background(), "far2"); err == nil {
		t.Fatal("a request forwarded twice was written")
	}

	// A leader that is gone.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	noLeader := fmt.Errorf("%w: partition 3 has no leader at the moment; retry shortly", engine.ErrNotMyVBucket)
	g := newFixtureOpts(t, &httpapi.Options{Route: func(_ context.Context, _, key string) (httpapi.Route, error) {
		if key == "electing" {
			return httpapi.Route{}, noLeader
		}
		return httpapi.Route{Node: "dead", Addr: gone}, nil
	}}, nil)
	code, _, body = g.do(http.MethodPut, "/default/docs/k", "application/json", `{}`)
	// Nothing was sent: the answer says so, and a client may send an
	// insert or an increment again.
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "temporary_failure") || !strings.Contains(body, "node dead") ||
		!strings.Contains(body, "nothing was applied") {
		t.Fatalf("an unreachable leader: %d %s", code, body)
	}
	code, _, body = g.do(http.MethodGet, "/default/docs/electing", "", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no leader") {
		t.Fatalf("a partition without a leader: %d %s", code, body)
	}
	if n := g.mustBucket("default").Stats().CurrItems; n != 0 {
		t.Fatalf("%d items written on the node that could not forward", n)
	}
}

// TestForwardRerouted: a node whose route's target cannot be reached
// sends the request where the route's Reroute says instead, once; a
// target that refuses a forwarded request naming the leader (a voter that
// follows) has the request sent to that leader, once; each write is
// carried out by the leader alone, its body intact, the client answered
// as by the leader; two nodes naming each other make no loop.
func TestForwardRerouted(t *testing.T) {
	l := newFixture(t)
	leadAddr := strings.TrimPrefix(l.srv.URL, "http://")
	// The voter: keys starting with "far" are led by "lead"; a request
	// for one forwarded here is refused naming it.
	v := newFixtureOpts(t, &httpapi.Options{Route: func(_ context.Context, _, key string) (httpapi.Route, error) {
		return httpapi.Route{Node: "lead", Addr: leadAddr, From: "voter"}, nil
	}}, nil)
	voterAddr := strings.TrimPrefix(v.srv.URL, "http://")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()

	var mu sync.Mutex
	var asked []string // what Reroute was asked, in order
	reroutes := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(asked)
	}
	var routeTo func(node, addr string, reroute func(leader string) (string, string, bool)) httpapi.Route
	routeTo = func(node, addr string, reroute func(leader string) (string, string, bool)) httpapi.Route {
		rt := httpapi.Route{Node: node, Addr: addr, From: "first"}
		rt.Reroute = func(_ context.Context, leader string) (httpapi.Route, bool) {
			mu.Lock()
			asked = append(asked, node+">"+leader)
			mu.Unlock()
			n, a, ok := reroute(leader)
			if !ok {
				return httpapi.Route{}, false
			}
			return routeTo(n, a, reroute), true
		}
		return rt
	}
	// Where "first" sends each key: "dead*" to a node that cannot be
	// reached, which reroutes to the voter; "far*" to the voter; "loop*"
	// to the voter, which names "lead", which is the voter again (a
	// leader that names another).
	byName := map[string]string{"lead": leadAddr, "voter": voterAddr}
	f := newFixtureOpts(t, &httpapi.Options{Route: func(_ context.Context, _, key string) (httpapi.Route, error) {
		named := func(leader string) (string, string, bool) {
			if leader == "" {
				return "voter", voterAddr, true
			}
			a, ok := byName[leader]
			return leader, a, ok
		}
		switch {
		case strings.HasPrefix(key, "bulkdead"):
			return routeTo("dead", gone, func(string) (string, string, bool) { return "lead", leadAddr, true }), nil
		case strings.HasPrefix(key, "dead"):
			return routeTo("dead", gone, named), nil
		case strings.HasPrefix(key, "loop"):
			return routeTo("voter", voterAddr, func(leader string) (string, string, bool) { return "voter", voterAddr, true }), nil
		}
		return routeTo("voter", voterAddr, named), nil
	}}, nil)

	ctx := context.Background()
	for _, key := range []string{"far1", "dead1"} {
		mu.Lock()
		asked = nil
		mu.Unlock()
		code, h, body := f.do(http.MethodPut, "/default/docs/"+key, "application/json", `{"v":"`+key+`"}`)
		if code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("PUT %s through the first node: %d %s (Reroute asked %v)", key, code, body, reroutes())
		}
		if h.Get(httpapi.RoutedToHeader) != "lead" {
			t.Fatalf("PUT %s answered by %q; want lead", key, h.Get(httpapi.RoutedToHeader))
		}
		d, err := l.mustBucket("default").DefaultCollection().Get(ctx, key)
		if err != nil || string(d.Value) != `{"v":"`+key+`"}` {
			t.Fatalf("the leader holds %s as %+v, %v", key, d, err)
		}
		for _, o := range []*fixture{f, v} {
			if _, err := o.mustBucket("default").DefaultCollection().Get(ctx, key); err == nil {
				t.Fatalf("%s written on a node that does not lead it", key)
			}
		}
		want := []string{"voter>lead"}
		if key == "dead1" {
			want = []string{"dead>", "voter>lead"}
		}
		if got := reroutes(); !slices.Equal(got, want) {
			t.Fatalf("PUT %s: Reroute asked %v; want %v", key, got, want)
		}
		code, _, body = f.do(http.MethodGet, "/default/docs/"+key, "", "")
		if code != http.StatusOK || !strings.Contains(body, key) {
			t.Fatalf("GET %s through the first node: %d %s", key, code, body)
		}
	}

	// The voter names lead; "first" follows once to the voter again,
	// which refuses again: the answer is that refusal, no third send.
	mu.Lock()
	asked = nil
	mu.Unlock()
	code, _, body := f.do(http.MethodPut, "/default/docs/loop1", "application/json", `{}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "not my vbucket") {
		t.Fatalf("PUT through nodes naming each other: %d %s", code, body)
	}
	if got := reroutes(); len(got) != 1 {
		t.Fatalf("Reroute asked %v; want once", got)
	}
	if n := l.mustBucket("default").Stats().CurrItems; n != 2 {
		t.Fatalf("the leader holds %d items; want the 2 written", n)
	}

	// A _bulk line whose leader cannot be reached goes where Reroute
	// says, once, as a single document's request does.
	mu.Lock()
	asked = nil
	mu.Unlock()
	code, _, body = f.do(http.MethodPost, "/default/_bulk", "application/x-ndjson", `{"op":"upsert","id":"bulkdead1","doc":{"v":7}}`+"\n")
	if code != http.StatusOK || !strings.Contains(body, `"id":"bulkdead1","cas":`) {
		t.Fatalf("_bulk line for an unreachable leader: %d %s (Reroute asked %v)", code, body, reroutes())
	}
	if got := reroutes(); !slices.Equal(got, []string{"dead>"}) {
		t.Fatalf("_bulk line: Reroute asked %v; want [dead>]", got)
	}
	if d, err := l.mustBucket("default").DefaultCollection().Get(ctx, "bulkdead1"); err != nil || string(d.Value) != `{"v":7}` {
		t.Fatalf("the leader holds bulkdead1 as %+v, %v", d, err)
	}
}

// TestForwardedBulkLines: the lines of a _bulk request whose keys another
// node leads are carried out there, each answered with the leader's own
// answer line, in the order of the lines, beside the lines this node
// answers itself; a forwarded _bulk at a node that does not lead refuses
// such lines rather than forwarding them again.
func TestForwardedBulkLines(t *testing.T) {
	f, l := forwardPair(t)
	ctx := context.Background()
	body := `{"op":"upsert","id":"far1","doc":{"v":1}}
{"op":"upsert","id":"near1","doc":{"v":2}}
{"op":"insert","id":"far2","doc":{"v":3},"expiry":50}
{"op":"insert","id":"far1","doc":{"v":4}}
{"op":"delete","id":"far2"}
`
	code, _, out := f.do(http.MethodPost, "/default/_bulk", "application/x-ndjson", body)
	if code != http.StatusOK {
		t.Fatalf("_bulk: %d %s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("_bulk answered %d lines: %s", len(lines), out)
	}
	far1, err := l.mustBucket("default").DefaultCollection().Get(ctx, "far1")
	if err != nil {
		t.Fatalf("the leader lacks far1: %v", err)
	}
	if !strings.Contains(lines[0], fmt.Sprintf(`"id":"far1","cas":%d`, far1.CAS)) {
		t.Fatalf("line 1 answered %s, the leader holds cas %d", lines[0], far1.CAS)
	}
	if !strings.Contains(lines[1], `"id":"near1","cas":`) || !strings.Contains(lines[2], `"id":"far2","cas":`) ||
		!strings.Contains(lines[3], `"id":"far1","error":"conflict"`) && !strings.Contains(lines[3], `"id":"far1","error":"key_exists"`) ||
		!strings.Contains(lines[4], `"id":"far2","cas":`) {
		t.Fatalf("_bulk answers:\n%s", out)
	}
	if _, err := f.mustBucket("default").DefaultCollection().Get(ctx, "near1"); err != nil {
		t.Fatalf("the follower lacks near1: %v", err)
	}
	if n := f.mustBucket("default").Stats().CurrItems; n != 1 {
		t.Fatalf("the follower holds %d items, want 1 (near1)", n)
	}
	if _, err := l.mustBucket("default").DefaultCollection().Get(ctx, "far2"); err == nil {
		t.Fatal("far2, deleted through the follower's _bulk, is still on the leader")
	}

	code, _, out = f.doWith(http.MethodPost, "/default/_bulk", "application/x-ndjson", `{"op":"upsert","id":"far3","doc":{}}`+"\n", func(r *http.Request) {
		r.SetBasicAuth(adminUser, adminPass)
		r.Header.Set(httpapi.ForwardedHeader, "n9")
	})
	if code != http.StatusOK || !strings.Contains(out, `"id":"far3","error":"temporary_failure"`) || !strings.Contains(out, "not my vbucket") {
		t.Fatalf("a forwarded _bulk line at a node that does not lead: %d %s", code, out)
	}
}

// TestForwardAbandonedWhenTheNodeGoes: a request forwarded to a node that
// holds it without answering (cut off) is answered 503 as soon as the
// route's Gone closes (the node's lease expired), its outcome unknown,
// rather than when the node answers.
func TestForwardAbandonedWhenTheNodeGoes(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	hold := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	}))
	defer hold.Close()
	defer close(release)
	gone := make(chan struct{})
	f := newFixtureOpts(t, &httpapi.Options{Route: func(context.Context, string, string) (httpapi.Route, error) {
		return httpapi.Route{Node: "cut", Addr: strings.TrimPrefix(hold.URL, "http://"), From: "first", Gone: gone}, nil
	}}, nil)
	type answer struct {
		code int
		body string
	}
	answered := make(chan answer, 1)
	go func() {
		code, _, body := f.do(http.MethodPut, "/default/docs/k", "application/json", `{}`)
		answered <- answer{code, body}
	}()
	select {
	case <-entered:
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the request did not reach the node")
	}
	close(gone)
	select {
	case a := <-answered:
		if a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "temporary_failure") || !strings.Contains(a.body, "went down") ||
			!strings.Contains(a.body, "outcome is unknown") {
			t.Fatalf("a forward abandoned as its node went down: %d %s", a.code, a.body)
		}
	case <-time.After(time.Minute): // a hang guard: the node never answers
		t.Fatal("the forward was waited out though its node went down")
	}
}
