package replica

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
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

// viewCluster is three in-process nodes of bucket "b" (one partition,
// replicated on all three), each with a views service holding design
// document _design/d (view "v": emit(doc._id, doc.v)), as a cluster node
// has them; nc cuts their Raft traffic.
func viewCluster(t *testing.T, ctx context.Context) (*netCut, map[string]*viewNode) {
	t.Helper()
	nc := newNetCut()
	res := &testResolver{addrs: map[string]string{}}
	dir := t.TempDir()
	gid := BucketGroup("b", "u", 0)
	nodes := map[string]*viewNode{}
	for _, n := range testNodes {
		o := Options{Dir: filepath.Join(dir, n, "raft"), Node: n, Listen: "127.0.0.1:0", Resolver: res}
		nc.install(&o)
		h, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		res.set(n, h.Addr())
		eng, err := engine.Open(filepath.Join(dir, n, "data"), &engine.Options{NumPartitions: 1, NoSync: true})
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
		if err := h.AddGroup(gid, testNodes, NewBucketMachine(b, 0, nil)); err != nil {
			t.Fatal(err)
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
	nc, vn := viewCluster(t, ctx)
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
