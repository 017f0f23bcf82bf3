package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/httpapi"
)

// bulkTrio is a node ("a") that leads a third of the keys and forwards
// the others to two leaders ("b", "c"), by a hash of the key; each
// leader counts the forwarded _bulk requests it gets.
type bulkTrio struct {
	node      *fixture
	leaders   map[string]*fixture // "b", "c"
	forwarded map[string]*atomic.Int64
}

// leaderOf is the node that leads key in a bulkTrio: "a", "b" or "c".
func leaderOf(key string) string {
	return string(rune('a' + crc32.ChecksumIEEE([]byte(key))%3))
}

// newBulkTrio starts the three nodes; leaderOpts are the leaders' options
// (their admission limits).
func newBulkTrio(t *testing.T, leaderOpts *httpapi.Options) *bulkTrio {
	t.Helper()
	tr := &bulkTrio{leaders: map[string]*fixture{}, forwarded: map[string]*atomic.Int64{}}
	addrs := map[string]string{}
	for _, name := range []string{"b", "c"} {
		n := &atomic.Int64{}
		tr.forwarded[name] = n
		count := func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get(httpapi.ForwardedHeader) != "" && strings.HasSuffix(r.URL.Path, "/_bulk") {
					n.Add(1)
				}
				h.ServeHTTP(w, r)
			})
		}
		tr.leaders[name] = newFixtureWrapped(t, nil, leaderOpts, nil, count)
		addrs[name] = strings.TrimPrefix(tr.leaders[name].srv.URL, "http://")
	}
	tr.node = newFixtureOpts(t, &httpapi.Options{Route: func(_ context.Context, _, key string) (httpapi.Route, error) {
		if l := leaderOf(key); l != "a" {
			return httpapi.Route{Node: l, Addr: addrs[l], From: "a"}, nil
		}
		return httpapi.Route{}, nil
	}}, nil)
	return tr
}

// postBulk posts body to f's /default/_bulk and returns its answer lines,
// each checked to be a JSON object.
func postBulk(t *testing.T, f *fixture, body string) []map[string]any {
	t.Helper()
	return postBulkCtx(context.Background(), t, f, body)
}

// postBulkCtx is postBulk, the request bound by ctx.
func postBulkCtx(ctx context.Context, t *testing.T, f *fixture, body string) []map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/default/_bulk", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return nil
	}
	req.SetBasicAuth(adminUser, adminPass)
	req.Header.Set("Content-Type", ndjson)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Errorf("_bulk: %d %s", resp.StatusCode, b)
		return nil
	}
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Errorf("answer line %d is not a JSON object: %q", len(out)+1, sc.Text())
			return nil
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Errorf("reading the answer: %v", err)
	}
	return out
}

// TestForwardedBulkBatched: 3,000 upserts through a node leading a third
// of them, the rest led by two other nodes, are each answered ok, in the
// order of the lines, and each document is on its leader; the leaders get
// far fewer _bulk requests than the lines forwarded to them (one request a
// line before). With the leaders' admission limit small (8 requests at
// once), four such requests at once through the node, as mayfly load
// sends them, get no too_many_requests (before, each forwarded line took a
// slot of its own, 1,024 lines at once).
func TestForwardedBulkBatched(t *testing.T) {
	tr := newBulkTrio(t, &httpapi.Options{MaxRequests: 8})
	ctx := context.Background()
	lines := func(prefix string, n int) (string, []string) {
		var b strings.Builder
		ids := make([]string, n)
		for i := range n {
			ids[i] = fmt.Sprintf("%s%05d", prefix, i)
			fmt.Fprintf(&b, `{"op":"upsert","id":%q,"doc":{"i":%d}}`+"\n", ids[i], i)
		}
		return b.String(), ids
	}
	check := func(ids []string, got []map[string]any) {
		t.Helper()
		if len(got) != len(ids) {
			t.Fatalf("%d answer lines for %d lines", len(got), len(ids))
		}
		for i, id := range ids {
			if got[i]["id"] != id || got[i]["error"] != nil || got[i]["cas"] == nil {
				t.Fatalf("line %d (%s) answered %v", i+1, id, got[i])
			}
		}
	}

	const n = 3000
	body, ids := lines("k", n)
	check(ids, postBulk(t, tr.node, body))
	remote := 0
	for i, id := range ids {
		l := leaderOf(id)
		var on *fixture
		if l == "a" {
			on = tr.node
		} else {
			remote++
			on = tr.leaders[l]
		}
		d, err := on.mustBucket("default").DefaultCollection().Get(ctx, id)
		if err != nil || string(d.Value) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("%s on its leader %s: %+v, %v", id, l, d, err)
		}
	}
	if items := tr.node.mustBucket("default").Stats().CurrItems; int(items) != n-remote {
		t.Fatalf("the node holds %d documents; it leads %d", items, n-remote)
	}
	reqs := tr.forwarded["b"].Load() + tr.forwarded["c"].Load()
	t.Logf("%d lines forwarded in %d requests (b %d, c %d)", remote, reqs, tr.forwarded["b"].Load(), tr.forwarded["c"].Load())
	if remote < n/2 || reqs == 0 || reqs > int64(remote/10) {
		t.Fatalf("%d lines forwarded in %d _bulk requests; want at most one a 10 lines", remote, reqs)
	}

	// Four requests at once: each holds at most 2 of a leader's 8 slots.
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			body, ids := lines(fmt.Sprintf("c%d-", c), 500)
			got := postBulk(t, tr.node, body)
			for i, id := range ids {
				if i >= len(got) || got[i]["id"] != id || got[i]["error"] != nil {
					var ans any
					if i < len(got) {
						ans = got[i]
					}
					t.Errorf("request %d, line %d (%s) answered %v", c, i+1, id, ans)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestForwardedBulkDocumentOrder: the lines of one document, interleaved
// with other documents' lines, are carried out by its leader in their
// order: insert, upsert, replace, delete, insert again each succeed only
// in that order, and each answer's sequence number is above the one
// before.
func TestForwardedBulkDocumentOrder(t *testing.T) {
	tr := newBulkTrio(t, nil)
	ops := []string{
		`{"op":"insert","id":%q,"doc":{"n":0}}`,
		`{"op":"upsert","id":%q,"doc":{"n":1}}`,
		`{"op":"replace","id":%q,"doc":{"n":2}}`,
		`{"op":"delete","id":%q}`,
		`{"op":"insert","id":%q,"doc":{"n":4}}`,
	}
	const docs = 150
	var b strings.Builder
	for _, op := range ops {
		for d := range docs {
			fmt.Fprintf(&b, op+"\n", fmt.Sprintf("d%03d", d))
		}
	}
	got := postBulk(t, tr.node, b.String())
	if len(got) != len(ops)*docs {
		t.Fatalf("%d answer lines for %d lines", len(got), len(ops)*docs)
	}
	lastSeq := map[string]float64{}
	for i, a := range got {
		id := fmt.Sprintf("d%03d", i%docs)
		seq, _ := a["seq"].(float64)
		if a["id"] != id || a["error"] != nil || seq <= lastSeq[id] {
			t.Fatalf("line %d (%s, op %d) answered %v after seq %v", i+1, id, i/docs, a, lastSeq[id])
		}
		lastSeq[id] = seq
	}
	for d := range docs {
		id := fmt.Sprintf("d%03d", d)
		on := tr.node
		if l := leaderOf(id); l != "a" {
			on = tr.leaders[l]
		}
		if doc, err := on.mustBucket("default").DefaultCollection().Get(context.Background(), id); err != nil || string(doc.Value) != `{"n":4}` {
			t.Fatalf("%s on its leader: %+v, %v", id, doc, err)
		}
	}
}

// TestForwardedBulkLeaderDies: a leader whose connection breaks off in the
// middle of answering a batch (it died): the lines it answered keep its
// answers, each line it did not answer answers temporary_failure, and the
// lines of the other leader and of the node itself are answered as usual;
// the answer stream has one JSON line per line, in order.
func TestForwardedBulkLeaderDies(t *testing.T) {
	other := newFixture(t)
	var (
		mu       sync.Mutex
		answered = map[string]float64{} // what the dying leader answered: id → cas
		dead     bool
		requests int
	)
	second := make(chan struct{})
	dying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		var ids []string
		for line := range strings.SplitSeq(strings.TrimSuffix(string(body), "\n"), "\n") {
			var op struct{ ID string }
			if err := json.Unmarshal([]byte(line), &op); err != nil {
				t.Errorf("the leader got a line that is not JSON: %q", line)
			}
			ids = append(ids, op.ID)
		}
		mu.Lock()
		requests++
		nth, wasDead := requests, dead
		die := !dead && len(ids) > 1
		dead = dead || die
		mu.Unlock()
		// The first request waits for the second, so that lines queue
		// up for a batch of several meanwhile.
		switch nth {
		case 1:
			select {
			case <-second:
			case <-time.After(time.Minute): // a hang guard
			}
		case 2:
			close(second)
		}
		if wasDead {
			panic(http.ErrAbortHandler)
		}
		upTo := len(ids)
		if die {
			upTo = len(ids) / 2
		}
		for i, id := range ids[:upTo] {
			cas := float64(1000 + nth*10000 + i)
			mu.Lock()
			answered[id] = cas
			mu.Unlock()
			fmt.Fprintf(w, `{"id":%q,"cas":%d,"seq":1,"expiration":0}`+"\n", id, int64(cas))
		}
		w.(http.Flusher).Flush()
		if die {
			panic(http.ErrAbortHandler) // the connection breaks, the answer unfinished
		}
	}))
	defer dying.Close()
	addrs := map[string]string{"b": strings.TrimPrefix(dying.URL, "http://"), "c": strings.TrimPrefix(other.srv.URL, "http://")}
	node := newFixtureOpts(t, &httpapi.Options{Route: func(_ context.Context, _, key string) (httpapi.Route, error) {
		if l := leaderOf(key); l != "a" {
			return httpapi.Route{Node: l, Addr: addrs[l], From: "a"}, nil
		}
		return httpapi.Route{}, nil
	}}, nil)

	const n = 900
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"op":"upsert","id":"k%05d","doc":{"i":%d}}`+"\n", i, i)
	}
	got := postBulk(t, node, b.String())
	if len(got) != n {
		t.Fatalf("%d answer lines for %d lines", len(got), n)
	}
	mu.Lock()
	defer mu.Unlock()
	if !dead {
		t.Fatalf("the leader got no batch of several lines in %d requests", requests)
	}
	failed := 0
	for i, a := range got {
		id := fmt.Sprintf("k%05d", i)
		if a["id"] != id {
			t.Fatalf("line %d answered for %v; want %s", i+1, a["id"], id)
		}
		switch leaderOf(id) {
		case "b":
			if cas, ok := answered[id]; ok {
				if a["cas"] != cas || a["error"] != nil {
					t.Fatalf("%s: the leader answered cas %v, the client got %v", id, cas, a)
				}
				continue
			}
			if a["error"] != "temporary_failure" || !strings.Contains(fmt.Sprint(a["reason"]), "node b") {
				t.Fatalf("%s, not answered by its dead leader, answered %v", id, a)
			}
			failed++
		default:
			if a["error"] != nil || a["cas"] == nil {
				t.Fatalf("%s, led by a live node, answered %v", id, a)
			}
		}
	}
	if failed == 0 {
		t.Fatal("no line failed though its leader died mid-batch")
	}
	t.Logf("%d lines answered by the leader before it died, %d failed", len(answered), failed)
}

// TestForwardedBulkRetriedWhenTheLeaderIsFull: a batch the leader refuses
// for want of an admission slot (too_many_requests: nothing applied) is
// sent again once a slot is free, and its lines answer the leader's
// answers, not the refusal.
func TestForwardedBulkRetriedWhenTheLeaderIsFull(t *testing.T) {
	var forwarded atomic.Int64
	held, release := io.Pipe()
	defer release.Close()
	wrap := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(httpapi.ForwardedHeader) == "" {
				h.ServeHTTP(w, r)
				return
			}
			h.ServeHTTP(w, r)
			if forwarded.Add(1) == 1 {
				// Refused: the leader's one slot is held. Free it.
				release.Close()
			}
		})
	}
	leader := newFixtureWrapped(t, nil, &httpapi.Options{MaxRequests: 1}, nil, wrap)
	addr := strings.TrimPrefix(leader.srv.URL, "http://")
	node := newFixtureOpts(t, &httpapi.Options{Route: func(_ context.Context, _, key string) (httpapi.Route, error) {
		return httpapi.Route{Node: "lead", Addr: addr, From: "node"}, nil
	}}, nil)

	// A _bulk request whose body stays open holds the leader's slot.
	req, err := http.NewRequest(http.MethodPost, leader.srv.URL+"/default/_bulk", held)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(adminUser, adminPass)
	req.Header.Set("Content-Type", ndjson)
	go func() { _, _ = io.WriteString(release, `{"op":"upsert","id":"holder","doc":{}}`+"\n") }()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.Contains(line, `"cas"`) {
		t.Fatalf("the request holding the slot: %q, %v", line, err)
	}

	got := postBulk(t, node, `{"op":"upsert","id":"far1","doc":{"v":1}}`+"\n")
	if len(got) != 1 || got[0]["id"] != "far1" || got[0]["error"] != nil {
		t.Fatalf("a line whose batch the leader first refused: %v", got)
	}
	if n := forwarded.Load(); n < 2 {
		t.Fatalf("the leader got %d forwarded requests; want the refused one and the one sent again", n)
	}
	if _, err := leader.mustBucket("default").DefaultCollection().Get(context.Background(), "far1"); err != nil {
		t.Fatalf("the leader lacks far1: %v", err)
	}
}

// refusingVoter is a node ("first") whose route sends keys to a voter
// that does not lead them: the voter's own route names "lead", another
// server, which leads every key, so the voter refuses each forwarded
// line naming it. What first's routes' Reroute then says, by the key's
// prefix: "far" the node named (lead), "home" this node (it leads the key
// now), "loop" the voter again (two nodes naming each other); "near" keys
// first leads itself. asked counts Reroute's calls by what it was asked
// ("voter>lead": the voter's refusal named lead).
type refusingVoter struct {
	first, voter, lead *fixture
	mu                 sync.Mutex
	asked              map[string]int
}

func newRefusingVoter(t *testing.T) *refusingVoter {
	t.Helper()
	rv := &refusingVoter{lead: newFixture(t), asked: map[string]int{}}
	leadAddr := strings.TrimPrefix(rv.lead.srv.URL, "http://")
	rv.voter = newFixtureOpts(t, &httpapi.Options{Route: func(context.Context, string, string) (httpapi.Route, error) {
		return httpapi.Route{Node: "lead", Addr: leadAddr, From: "voter"}, nil
	}}, nil)
	voterAddr := strings.TrimPrefix(rv.voter.srv.URL, "http://")
	toVoter := func(next func(leader string) (httpapi.Route, bool)) httpapi.Route {
		return httpapi.Route{Node: "voter", Addr: voterAddr, From: "first", Reroute: func(_ context.Context, leader string) (httpapi.Route, bool) {
			rv.mu.Lock()
			rv.asked["voter>"+leader]++
			rv.mu.Unlock()
			return next(leader)
		}}
	}
	rv.first = newFixtureOpts(t, &httpapi.Options{Route: func(_ context.Context, _, key string) (httpapi.Route, error) {
		switch {
		case strings.HasPrefix(key, "far"):
			return toVoter(func(leader string) (httpapi.Route, bool) {
				if leader != "lead" {
					return httpapi.Route{}, false
				}
				return httpapi.Route{Node: "lead", Addr: leadAddr, From: "first"}, true
			}), nil
		case strings.HasPrefix(key, "home"):
			return toVoter(func(string) (httpapi.Route, bool) { return httpapi.Route{}, true }), nil
		case strings.HasPrefix(key, "loop"):
			var again func(string) (httpapi.Route, bool)
			again = func(string) (httpapi.Route, bool) { return toVoter(again), true }
			return toVoter(again), nil
		}
		return httpapi.Route{}, nil
	}}, nil)
	return rv
}

// reroutes returns what Reroute was asked, and how often.
func (rv *refusingVoter) reroutes() map[string]int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return maps.Clone(rv.asked)
}

// TestForwardedBulkFollowsRefusal: lines sent to a node that refuses them
// as not leading their partition, naming the node that does, are sent
// there (or run here, when the route says this node leads them now), once
// each, and answered as that node answers: every line of the client's
// _bulk answers ok, in order, a document's interleaved lines carried out
// in their order, each document written on the node that leads it alone.
// Before, each such line answered the refusal (the client had to send it
// again).
func TestForwardedBulkFollowsRefusal(t *testing.T) {
	rv := newRefusingVoter(t)
	ops := []string{
		`{"op":"insert","id":%q,"doc":{"n":0}}`,
		`{"op":"replace","id":%q,"doc":{"n":1}}`,
		`{"op":"delete","id":%q}`,
		`{"op":"insert","id":%q,"doc":{"n":3}}`,
	}
	const docs = 100
	var b strings.Builder
	var ids []string
	for _, op := range ops {
		for d := range docs {
			for _, prefix := range []string{"far", "near", "home"} {
				id := fmt.Sprintf("%s%03d", prefix, d)
				fmt.Fprintf(&b, op+"\n", id)
				ids = append(ids, id)
			}
		}
	}
	got := postBulk(t, rv.first, b.String())
	if len(got) != len(ids) {
		t.Fatalf("%d answer lines for %d lines", len(got), len(ids))
	}
	lastSeq := map[string]float64{}
	for i, a := range got {
		seq, _ := a["seq"].(float64)
		if a["id"] != ids[i] || a["error"] != nil || a["cas"] == nil || seq <= lastSeq[ids[i]] {
			t.Fatalf("line %d (%s) answered %v after seq %v (Reroute asked %v)", i+1, ids[i], a, lastSeq[ids[i]], rv.reroutes())
		}
		lastSeq[ids[i]] = seq
	}
	ctx := context.Background()
	holds := func(f *fixture, id string) bool {
		d, err := f.mustBucket("default").DefaultCollection().Get(ctx, id)
		if err == nil && string(d.Value) != `{"n":3}` {
			t.Fatalf("%s holds %s; want the last line's", id, d.Value)
		}
		return err == nil
	}
	for d := range docs {
		for prefix, on := range map[string]*fixture{"far": rv.lead, "near": rv.first, "home": rv.first} {
			id := fmt.Sprintf("%s%03d", prefix, d)
			for _, f := range []*fixture{rv.first, rv.voter, rv.lead} {
				if holds(f, id) != (f == on) {
					t.Fatalf("%s: on node %s %v; want it on %s alone", id, f.srv.URL, holds(f, id), on.srv.URL)
				}
			}
		}
	}
	if got, want := rv.reroutes(), map[string]int{"voter>lead": 2 * len(ops) * docs}; !maps.Equal(got, want) {
		t.Fatalf("Reroute asked %v; want %v (each far and home line once)", got, want)
	}
}

// TestForwardedBulkRefusalFollowedOnce: two nodes that name each other as
// the leader make no loop: each line is sent to the other once, refused
// again, and answers that refusal (temporary_failure, "not my vbucket",
// the leader in "leader"); nothing is written anywhere.
func TestForwardedBulkRefusalFollowedOnce(t *testing.T) {
	rv := newRefusingVoter(t)
	const n = 50
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"op":"upsert","id":"loop%03d","doc":{"i":%d}}`+"\n", i, i)
	}
	got := postBulk(t, rv.first, b.String())
	if len(got) != n {
		t.Fatalf("%d answer lines for %d lines", len(got), n)
	}
	for i, a := range got {
		if a["id"] != fmt.Sprintf("loop%03d", i) || a["error"] != "temporary_failure" || a["leader"] != "lead" ||
			!strings.Contains(fmt.Sprint(a["reason"]), "not my vbucket") {
			t.Fatalf("line %d answered %v", i+1, a)
		}
	}
	if got, want := rv.reroutes(), map[string]int{"voter>lead": n}; !maps.Equal(got, want) {
		t.Fatalf("Reroute asked %v; want %v (each line once)", got, want)
	}
	for _, f := range []*fixture{rv.first, rv.voter, rv.lead} {
		if items := f.mustBucket("default").Stats().CurrItems; items != 0 {
			t.Fatalf("node %s holds %d documents; want none", f.srv.URL, items)
		}
	}
}

// TestForwardedBulkStalledLeader: a leader that answers the first line of
// each batch, then neither answers nor ends its answer (its connection
// and lease holding), has its batches broken off once no further answer
// line came within the node's BulkLineTimeout: the client's _bulk is
// answered, every line in order, the lines the leader answered with its
// answers and the others temporary_failure, their outcome unknown, none
// sent twice. Before, the client waited for as long as it would.
func TestForwardedBulkStalledLeader(t *testing.T) {
	var (
		mu       sync.Mutex
		received = map[string]int{}    // id → times the leader got it
		answered = map[string]string{} // what the leader answered: id → cas
	)
	release := make(chan struct{})
	stalling := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		var first string
		for line := range strings.SplitSeq(strings.TrimSuffix(string(body), "\n"), "\n") {
			var op struct{ ID string }
			if err := json.Unmarshal([]byte(line), &op); err != nil {
				t.Errorf("the leader got a line that is not JSON: %q", line)
			}
			mu.Lock()
			received[op.ID]++
			if first == "" {
				first = op.ID
				answered[first] = fmt.Sprint(1000 + len(answered))
			}
			cas := answered[first]
			mu.Unlock()
			if op.ID == first {
				fmt.Fprintf(w, `{"id":%q,"cas":%s,"seq":1,"expiration":0}`+"\n", first, cas)
				w.(http.Flusher).Flush()
			}
		}
		select { // stalls until the forwarder gives up
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer stalling.Close()
	defer close(release)
	addr := strings.TrimPrefix(stalling.URL, "http://")
	node := newFixtureOpts(t, &httpapi.Options{BulkLineTimeout: 200 * time.Millisecond, Route: func(context.Context, string, string) (httpapi.Route, error) {
		return httpapi.Route{Node: "stalls", Addr: addr, From: "node"}, nil
	}}, nil)

	const n = 40
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"op":"upsert","id":"s%03d","doc":{"i":%d}}`+"\n", i, i)
	}
	// A hang guard: the client's own bound, far above the node's.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := postBulkCtx(ctx, t, node, b.String())
	if len(got) != n {
		t.Fatalf("%d answer lines for %d lines (the client's deadline: %v)", len(got), n, ctx.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	stalled := 0
	for i, a := range got {
		id := fmt.Sprintf("s%03d", i)
		if a["id"] != id || received[id] != 1 {
			t.Fatalf("line %d (%s) answered %v; the leader got it %d times", i+1, id, a, received[id])
		}
		if cas, ok := answered[id]; ok {
			if fmt.Sprint(a["cas"]) != cas || a["error"] != nil {
				t.Fatalf("%s: the leader answered cas %s, the client got %v", id, cas, a)
			}
			continue
		}
		reason := fmt.Sprint(a["reason"])
		if a["error"] != "temporary_failure" || !strings.Contains(reason, "no further answer line") || !strings.Contains(reason, "outcome is unknown") {
			t.Fatalf("%s, not answered by its stalled leader, answered %v", id, a)
		}
		stalled++
	}
	if stalled == 0 {
		t.Fatal("no line was left unanswered by the stalled leader")
	}
	t.Logf("%d lines answered by the leader, %d broken off", len(answered), stalled)
}
