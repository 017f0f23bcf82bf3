package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
)

// movedReplicator is the replication of a node whose route still says it
// leads every partition while its replication group says another node
// does (leadership moved, the map has not caught up). Its mode says how
// each write is refused:
//   - "moved": refused before anything is proposed, naming node "lead"
//     (engine.NotMyVBucketError), as replica.BucketReplicator does;
//   - "electing": refused naming no leader (a partition electing one);
//   - "ambiguous": proposed, and its outcome unknown (engine.ErrAmbiguous),
//     though the error names "lead" too.
type movedReplicator struct {
	mu   sync.Mutex
	mode string
}

func (m *movedReplicator) set(mode string) {
	m.mu.Lock()
	m.mode = mode
	m.mu.Unlock()
}

func (m *movedReplicator) Writable(_ context.Context, part int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch m.mode {
	case "moved":
		return &engine.NotMyVBucketError{Partition: part, Leader: "lead", Where: "http://elsewhere"}
	case "electing":
		return fmt.Errorf("%w: partition %d has no leader at the moment; retry shortly", engine.ErrNotMyVBucket, part)
	}
	return nil
}

func (m *movedReplicator) Replicate(_ context.Context, part int, _ []byte) (engine.ReplicatedResult, error) {
	return engine.ReplicatedResult{}, fmt.Errorf("%w: partition %d: %w", engine.ErrAmbiguous, part,
		&engine.NotMyVBucketError{Partition: part, Leader: "lead"})
}

// movedTrio is three nodes: "lead", which leads every key and writes
// locally; "stale", whose route says it leads every key itself but whose
// replication (movedReplicator) refuses its writes naming lead; and
// "first", whose route sends every key to stale. Each route's Reroute
// names lead's route when asked with "lead"; asked counts what Reroute
// was asked, by node ("stale>lead": stale's route, asked with lead).
type movedTrio struct {
	lead, stale, first *fixture
	repl               *movedReplicator
	mu                 sync.Mutex
	asked              map[string]int
}

func newMovedTrio(t *testing.T) *movedTrio {
	t.Helper()
	m := &movedTrio{lead: newFixture(t), repl: &movedReplicator{mode: "moved"}, asked: map[string]int{}}
	leadAddr := strings.TrimPrefix(m.lead.srv.URL, "http://")
	reroute := func(node, from string) func(context.Context, string) (httpapi.Route, bool) {
		return func(_ context.Context, leader string) (httpapi.Route, bool) {
			m.mu.Lock()
			m.asked[node+">"+leader]++
			m.mu.Unlock()
			if leader != "lead" {
				return httpapi.Route{}, false
			}
			return httpapi.Route{Node: "lead", Addr: leadAddr, From: from}, true
		}
	}
	m.stale = newFixtureOpts(t, &httpapi.Options{Route: func(context.Context, string, string) (httpapi.Route, error) {
		return httpapi.Route{Reroute: reroute("stale", "stale")}, nil
	}}, nil)
	m.stale.mustBucket("default").SetReplicator(m.repl)
	staleAddr := strings.TrimPrefix(m.stale.srv.URL, "http://")
	m.first = newFixtureOpts(t, &httpapi.Options{Route: func(context.Context, string, string) (httpapi.Route, error) {
		return httpapi.Route{Node: "stale", Addr: staleAddr, From: "first", Reroute: reroute("first-to-stale", "first")}, nil
	}}, nil)
	return m
}

func (m *movedTrio) reroutes() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for k, v := range m.asked {
		out[k] = v
	}
	m.asked = map[string]int{}
	return out
}

// holds reports where id is: which of lead, stale and first hold it.
func (m *movedTrio) holds(t *testing.T, id string) string {
	t.Helper()
	var on []string
	for name, f := range map[string]*fixture{"lead": m.lead, "stale": m.stale, "first": m.first} {
		if _, err := f.mustBucket("default").DefaultCollection().Get(context.Background(), id); err == nil {
			on = append(on, name)
		} else if !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("reading %s on %s: %v", id, name, err)
		}
	}
	return strings.Join(on, ",")
}

// TestReplicatorRefusalFollowed: a write that reaches the node its route
// says leads the key's partition, whose replication then refuses it
// naming the leader before proposing anything (leadership moved and the
// map has not caught up), is carried out by that leader: a PUT, DELETE or
// touch the client sent to that node is forwarded by it to the leader
// named, once; one another node forwarded there is refused naming the
// leader in X-Mayfly-Leader, and the forwarding node sends it there. The
// client sees the leader's answer, and the document is on the leader
// alone. Before, the client got 503 "not my vbucket" during every
// leadership move.
func TestReplicatorRefusalFollowed(t *testing.T) {
	m := newMovedTrio(t)
	ctx := context.Background()
	for _, via := range []struct {
		name  string
		f     *fixture
		asked string
	}{{"stale", m.stale, "stale>lead"}, {"first", m.first, "first-to-stale>lead"}} {
		key := "doc-via-" + via.name
		code, h, body := via.f.do(http.MethodPut, "/default/docs/"+key, "application/json", `{"via":"`+via.name+`"}`)
		if code != http.StatusCreated {
			t.Fatalf("PUT through %s: %d %s (Reroute asked %v)", via.name, code, body, m.reroutes())
		}
		if h.Get(httpapi.RoutedToHeader) != "lead" {
			t.Fatalf("PUT through %s answered by %q; want lead", via.name, h.Get(httpapi.RoutedToHeader))
		}
		if got := m.reroutes(); len(got) != 1 || got[via.asked] != 1 {
			t.Fatalf("PUT through %s: Reroute asked %v; want %s once", via.name, got, via.asked)
		}
		d, err := m.lead.mustBucket("default").DefaultCollection().Get(ctx, key)
		if err != nil || string(d.Value) != `{"via":"`+via.name+`"}` {
			t.Fatalf("the leader holds %s as %+v, %v", key, d, err)
		}
		if on := m.holds(t, key); on != "lead" {
			t.Fatalf("%s is on %q; want lead alone", key, on)
		}
		// An insert over it is decided by the leader: 409, not 503.
		if code, _, body := via.f.do(http.MethodPut, "/default/docs/"+key+"?op=insert", "application/json", `{}`); code != http.StatusConflict {
			t.Fatalf("insert over %s through %s: %d %s", key, via.name, code, body)
		}
		if code, _, body := via.f.do(http.MethodPost, "/default/docs/"+key+"/touch?expiry=100", "", ""); code != http.StatusOK {
			t.Fatalf("touch through %s: %d %s", via.name, code, body)
		}
		if d, _ := m.lead.mustBucket("default").DefaultCollection().Get(ctx, key); d == nil || d.Expiration != t0+100 {
			t.Fatalf("the leader's %s after a touch through %s: %+v", key, via.name, d)
		}
		if code, _, body := via.f.do(http.MethodDelete, "/default/docs/"+key, "", ""); code != http.StatusOK {
			t.Fatalf("DELETE through %s: %d %s", via.name, code, body)
		}
		if on := m.holds(t, key); on != "" {
			t.Fatalf("%s is on %q after its delete; want nowhere", key, on)
		}
		m.reroutes()
	}

	// The stale node's refusal of a forwarded request names the leader.
	code, h, body := m.stale.doWith(http.MethodPut, "/default/docs/marked", "application/json", `{}`, func(r *http.Request) {
		r.SetBasicAuth(adminUser, adminPass)
		r.Header.Set(httpapi.ForwardedHeader, "n9")
	})
	if code != http.StatusServiceUnavailable || h.Get(httpapi.LeaderHeader) != "lead" || !strings.Contains(body, "led by node lead") {
		t.Fatalf("a forwarded PUT refused by the stale node's replication: %d %s=%q %s", code, httpapi.LeaderHeader, h.Get(httpapi.LeaderHeader), body)
	}
	if on := m.holds(t, "marked"); on != "" {
		t.Fatalf("a refused forwarded request wrote marked on %q", on)
	}
}

// TestReplicatorRefusalBulkFollowed: _bulk lines that the node running
// them finds refused by its replication, naming the leader, are carried
// out by that leader, once each: sent to the stale node directly (it
// forwards them) or through a node that forwards them to it (the stale
// node answers each with the refusal's "leader", and the first node sends
// it there). Every line answers ok, in order, each document on the leader
// alone. Before, each such line answered temporary_failure.
func TestReplicatorRefusalBulkFollowed(t *testing.T) {
	m := newMovedTrio(t)
	for _, via := range []struct {
		name  string
		f     *fixture
		asked string
	}{{"stale", m.stale, "stale>lead"}, {"first", m.first, "first-to-stale>lead"}} {
		const docs = 40
		ops := []string{
			`{"op":"insert","id":%q,"doc":{"n":0}}`,
			`{"op":"replace","id":%q,"doc":{"n":1}}`,
			`{"op":"delete","id":%q}`,
			`{"op":"insert","id":%q,"doc":{"n":3}}`,
		}
		var b strings.Builder
		var ids []string
		for _, op := range ops {
			for d := range docs {
				id := fmt.Sprintf("bulk-%s-%03d", via.name, d)
				fmt.Fprintf(&b, op+"\n", id)
				ids = append(ids, id)
			}
		}
		got := postBulk(t, via.f, b.String())
		if len(got) != len(ids) {
			t.Fatalf("through %s: %d answer lines for %d lines", via.name, len(got), len(ids))
		}
		lastSeq := map[string]float64{}
		for i, a := range got {
			seq, _ := a["seq"].(float64)
			if a["id"] != ids[i] || a["error"] != nil || seq <= lastSeq[ids[i]] {
				t.Fatalf("through %s: line %d (%s) answered %v after seq %v", via.name, i+1, ids[i], a, lastSeq[ids[i]])
			}
			lastSeq[ids[i]] = seq
		}
		for d := range docs {
			id := fmt.Sprintf("bulk-%s-%03d", via.name, d)
			if on := m.holds(t, id); on != "lead" {
				t.Fatalf("%s is on %q; want lead alone", id, on)
			}
		}
		if got := m.reroutes(); len(got) != 1 || got[via.asked] != len(ids) {
			t.Fatalf("through %s: Reroute asked %v; want %s once a line (%d)", via.name, got, via.asked, len(ids))
		}
	}
}

// TestReplicatorRefusalNotFollowed: a write whose outcome is unknown
// (engine.ErrAmbiguous: proposed, not seen committed), even when its
// error names a leader, and a refusal that names none (the partition
// electing a leader), are answered as they are: 503, nothing sent
// elsewhere, by a single document's request and by a _bulk line, sent to
// the node directly or forwarded to it.
func TestReplicatorRefusalNotFollowed(t *testing.T) {
	m := newMovedTrio(t)
	for _, mode := range []string{"ambiguous", "electing"} {
		m.repl.set(mode)
		want := "outcome is unknown"
		if mode == "electing" {
			want = "no leader at the moment"
		}
		for name, f := range map[string]*fixture{"stale": m.stale, "first": m.first} {
			key := mode + "-" + name
			code, h, body := f.do(http.MethodPut, "/default/docs/"+key, "application/json", `{}`)
			if code != http.StatusServiceUnavailable || !strings.Contains(body, want) || h.Get(httpapi.LeaderHeader) != "" {
				t.Fatalf("%s PUT through %s: %d %s=%q %s; want 503 %q", mode, name, code, httpapi.LeaderHeader, h.Get(httpapi.LeaderHeader), body, want)
			}
			got := postBulk(t, f, `{"op":"upsert","id":"`+key+`-bulk","doc":{}}`+"\n")
			if len(got) != 1 || got[0]["error"] != "temporary_failure" || got[0]["leader"] != nil || !strings.Contains(fmt.Sprint(got[0]["reason"]), want) {
				t.Fatalf("%s _bulk line through %s: %v; want temporary_failure %q", mode, name, got, want)
			}
			for _, id := range []string{key, key + "-bulk"} {
				if on := m.holds(t, id); on != "" {
					t.Fatalf("%s %s is on %q; want it nowhere", mode, id, on)
				}
			}
		}
		if got := m.reroutes(); len(got) != 0 {
			t.Fatalf("%s: Reroute asked %v; want never", mode, got)
		}
	}
}

// TestReadBarrierRefusalFollowed: a read whose barrier (the read index)
// refuses naming the leader is answered by that leader, as a write's
// refusal is.
func TestReadBarrierRefusalFollowed(t *testing.T) {
	lead := newFixture(t)
	leadAddr := strings.TrimPrefix(lead.srv.URL, "http://")
	if code, _, body := lead.do(http.MethodPut, "/default/docs/r", "application/json", `{"on":"lead"}`); code != http.StatusCreated {
		t.Fatalf("PUT on the leader: %d %s", code, body)
	}
	stale := newFixtureOpts(t, &httpapi.Options{Route: func(context.Context, string, string) (httpapi.Route, error) {
		return httpapi.Route{
			Barrier: func(context.Context) error { return &engine.NotMyVBucketError{Partition: 3, Leader: "lead"} },
			Reroute: func(_ context.Context, leader string) (httpapi.Route, bool) {
				return httpapi.Route{Node: "lead", Addr: leadAddr, From: "stale"}, leader == "lead"
			},
		}, nil
	}}, nil)
	code, h, body := stale.do(http.MethodGet, "/default/docs/r", "", "")
	if code != http.StatusOK || !strings.Contains(body, `"on":"lead"`) || h.Get(httpapi.RoutedToHeader) != "lead" {
		t.Fatalf("GET through a node whose barrier names the leader: %d %s (routed to %q)", code, body, h.Get(httpapi.RoutedToHeader))
	}
}
