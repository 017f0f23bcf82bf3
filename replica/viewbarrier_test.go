package replica

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/views"
)

// viewNode is one node of viewCluster: its Host, bucket and views.
type viewNode struct {
	h   *Host
	b   *engine.Bucket
	svc *views.Service
}

// viewCluster is three in-process nodes of bucket "b" (parts partitions,
// each replicated on all three), each with a views service holding design
// document _design/d (view "v": emit(meta.id, doc.v)), as a cluster node
// has them; nc cuts their Raft traffic.
func viewCluster(t testing.TB, ctx context.Context, parts int) (*netCut, map[string]*viewNode) {
	t.Helper()
	nc := newNetCut()
	res := &testResolver{addrs: map[string]string{}}
	dir := t.TempDir()
	nodes := map[string]*viewNode{}
	for _, n := range testNodes {
		o := Options{Dir: filepath.Join(dir, n, "raft"), Node: n, Listen: "127.0.0.1:0", Resolver: res}
		nc.install(&o)
		h, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		res.set(n, h.Addr())
		eng, err := engine.Open(filepath.Join(dir, n, "data"), &engine.Options{NumPartitions: parts, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		b, err := eng.CreateBucket(ctx, engine.BucketSettings{Name: "b", Type: engine.Couchbase})
		if err != nil {
			t.Fatal(err)
		}
		svc, err := views.New(ctx, eng, &views.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			h.Close()
			svc.Close()
			eng.Close()
		})
		if _, err := svc.PutDesignDocVersion(ctx, "b", "d", []byte(`{"views":{"v":{"map":"function(doc, meta){ emit(meta.id, doc.v); }"}}}`), 1); err != nil {
			t.Fatal(err)
		}
		b.SetReplicator(&BucketReplicator{Host: h, Bucket: "b", UUID: "u"})
		for p := range parts {
			if err := h.AddGroup(BucketGroup("b", "u", p), testNodes, NewBucketMachine(b, p, nil)); err != nil {
				t.Fatal(err)
			}
		}
		nodes[n] = &viewNode{h: h, b: b, svc: svc}
	}
	return nc, nodes
}

// leaderAmong waits for a node of nodes that leads the bucket's partition.
func leaderAmong(t *testing.T, vn map[string]*viewNode, nodes []string) string {
	t.Helper()
	gid := BucketGroup("b", "u", 0)
	var lead string
	eventually(t, "a leader among "+fmt.Sprint(nodes), func() error {
		for _, n := range nodes {
			if l, ok := vn[n].h.Leader(gid); ok && l == n {
				lead = n
				return nil
			}
		}
		return errors.New("none")
	})
	return lead
}

// share runs view v's stale=false query, with include_docs, as a coverer
// answers its share of the bucket's one partition: "id=doc" per row (the
// document's JSON as include_docs shows it).
func (n *viewNode) share(ctx context.Context, extra url.Values) (string, error) {
	v := url.Values{"stale": {"false"}, "include_docs": {"true"}}
	for k, x := range extra {
		v[k] = x
	}
	p, err := views.ParseParams(v, nil)
	if err != nil {
		return "", err
	}
	q, err := n.svc.Prepare(ctx, "b", "d", "v", p)
	if err != nil {
		return "", err
	}
	part, err := q.Partial(ctx, views.Share{Partitions: []bool{true}})
	if err != nil {
		return "", err
	}
	var rows []string
	for _, r := range part.Rows {
		rows = append(rows, r.ID+"="+gjson.GetBytes(r.Doc, "json").Raw)
	}
	return strings.Join(rows, " "), nil
}

// TestViewStaleFalseOnAFollower: a write acknowledged through the
// partition's leader, then a stale=false query answered by a coverer
// that follows the partition (its preferred leader down or leadership
// moved) and lags (the leader's frames to it dropped, so it has not
// applied the write): the coverer's share includes the write, its
// document as written (include_docs). The code before answered at once
// from the lagging copy, without the write. A coverer that cannot make
// its copy current within the connection timeout (cut off: no leader)
// fails its share with engine.ErrNotCurrent, never answers stale.
func TestViewStaleFalseOnAFollower(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, vn := viewCluster(t, ctx, 1)
	upsert := func(n, key, v string) {
		t.Helper()
		eventually(t, "writing "+key+" through "+n, func() error {
			_, err := vn[n].b.DefaultCollection().Upsert(ctx, key, []byte(v), nil)
			return err
		})
	}
	lead := leaderAmong(t, vn, testNodes)
	f := follower(lead)
	upsert(lead, "a", `{"v":1}`)
	if got, err := vn[f].share(ctx, nil); err != nil || got != `a={"v":1}` {
		t.Fatalf("the follower's share: %q, %v", got, err)
	}

	nc.cutOneWay(lead, f)
	upsert(lead, "b", `{"v":2}`) // acknowledged: the leader and the third node hold it
	if _, err := vn[f].b.DefaultCollection().Get(ctx, "b"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the cut-off follower's copy of b: %v; the case needs it behind", err)
	}
	var healed atomic.Bool
	heal := time.AfterFunc(2*time.Second, func() {
		healed.Store(true)
		nc.heal()
	})
	defer heal.Stop()
	got, err := vn[f].share(ctx, nil)
	if err != nil {
		t.Fatalf("the follower's share: %v", err)
	}
	if want := `a={"v":1} b={"v":2}`; got != want {
		t.Fatalf("the lagging follower's stale=false share: %q (healed %v), want %q: the write acknowledged before the query", got, healed.Load(), want)
	}

	// Cut off from both others: no leader, no current copy.
	nc.isolate(f)
	for _, n := range others(f) {
		vn[f].h.NodeDown(n)
	}
	_, err = vn[f].share(ctx, url.Values{"connection_timeout": {"1000"}})
	if !errors.Is(err, engine.ErrNotCurrent) {
		t.Fatalf("the cut-off follower's share: %v, want engine.ErrNotCurrent", err)
	}
	t.Logf("cut off: %v", err)
}

// noRefresh hides a Replicator's MakeCurrent: the bucket as the code
// before saw it (a stale=false share read its own copy's positions).
type noRefresh struct{ engine.Replicator }

// BenchmarkViewStaleFalse341: a stale=false share of a view query
// (include_docs) over 341 partitions of a 1024-partition bucket that
// another node leads, on three in-process nodes, 3000 documents: with
// the barrier to the partitions' leaders (after) and without it (before,
// the node's own positions), alternated in one run. It reports each
// one's p50 and p99.
func BenchmarkViewStaleFalse341(b *testing.B) {
	const parts, docs = 1024, 3000
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, vn := viewCluster(b, ctx, parts)
	leaderOf := func(p int) (string, bool) { return vn["n1"].h.Leader(BucketGroup("b", "u", p)) }
	// Preferred leaders round robin, as a placed map has them: n1 leads
	// a third.
	for p := range parts {
		for _, n := range testNodes {
			if err := vn[n].h.SetTarget(BucketGroup("b", "u", p), testNodes, testNodes[p%3]); err != nil {
				b.Fatal(err)
			}
		}
	}
	for settled := false; !settled; {
		if ctx.Err() != nil {
			b.Fatal(ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
		settled = true
		for p := range parts {
			if l, ok := leaderOf(p); !ok || l != testNodes[p%3] {
				settled = false
				break
			}
		}
	}
	for i := range docs {
		key := fmt.Sprintf("k%05d", i)
		p := vn["n1"].b.PartitionOf(key)
		for {
			if l, ok := leaderOf(p); ok {
				if _, err := vn[l].b.DefaultCollection().Upsert(ctx, key, []byte(fmt.Sprintf(`{"v":%d}`, i)), nil); err == nil {
					break
				}
			}
			if ctx.Err() != nil {
				b.Fatal(ctx.Err())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	share := make([]bool, parts)
	n := 0
	for p := 0; p < parts && n < 341; p++ {
		if l, ok := leaderOf(p); ok && l != "n1" {
			share[p] = true
			n++
		}
	}
	node := vn["n1"]
	p, err := views.ParseParams(url.Values{"stale": {"false"}, "include_docs": {"true"}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	repl := &BucketReplicator{Host: node.h, Bucket: "b", UUID: "u"}
	query := func(barrier bool) time.Duration {
		if barrier {
			node.b.SetReplicator(repl)
		} else {
			node.b.SetReplicator(noRefresh{repl})
		}
		start := time.Now() // wall clock: a latency
		q, err := node.svc.Prepare(ctx, "b", "d", "v", p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := q.Partial(ctx, views.Share{Partitions: share}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	query(true) // the index built
	var before, after []time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			before, after = append(before, query(false)), append(after, query(true))
		} else {
			after, before = append(after, query(true)), append(before, query(false))
		}
	}
	b.StopTimer()
	node.b.SetReplicator(repl)
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"before", before}, {"after", after}} {
		slices.Sort(m.d)
		b.ReportMetric(float64(m.d[len(m.d)/2].Microseconds())/1000, m.name+"-p50-ms")
		b.ReportMetric(float64(m.d[len(m.d)*99/100].Microseconds())/1000, m.name+"-p99-ms")
	}
	b.ReportMetric(float64(n), "partitions")
}
