package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestTopologyMirrorSeesMapsAndNodes: the mirror holds a bucket's map as
// written, with the revision of the write, sees a new map and a deleted
// one (telling its waiters), lists the nodes known (up or voters), and a
// node whose lease expires drops out of the nodes up. (Under
// prefixes of the test's own: the node's orchestrator removes maps of
// buckets not defined.)
func TestTopologyMirrorSeesMapsAndNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := startAll(t, ctx, []Config{testConfig(t, testPeers(t, 1), "n1", t.TempDir(), &syncLog{})})
	defer closeAll(nodes)
	cli := nodes[0].Client()
	const maps, ups = "/mayfly-test/maps/", "/mayfly-test/nodes/"

	putMap := func(leader string) int64 {
		t.Helper()
		m := &PartitionMap{Bucket: "b", Copies: 1, Partitions: Place([]string{leader}, 4, 1)}
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Put(ctx, maps+"b", string(data))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	rev1 := putMap("n1")

	if _, err := cli.Put(ctx, ups+"n1", `{"name":"n1"}`); err != nil {
		t.Fatal(err)
	}
	mirror := newTopologyMirror(cli, maps, ups, "/mayfly-test/layout/")
	if _, _, loaded, _ := mirror.Map("b"); loaded {
		t.Fatal("a mirror not yet run says it holds the maps")
	}
	mctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { mirror.Run(mctx) })
	defer func() { stop(); wg.Wait() }()

	mapAt := func(rev int64) *PartitionMap {
		t.Helper()
		if err := mirror.WaitMaps(ctx, rev); err != nil {
			t.Fatal(err)
		}
		m, got, loaded, err := mirror.Map("b")
		if !loaded || err != nil {
			t.Fatalf("Map after WaitMaps: loaded %v, %v", loaded, err)
		}
		if got != rev {
			t.Fatalf("the map's revision: %d, want %d", got, rev)
		}
		return m
	}
	if m := mapAt(rev1); m == nil || m.Partitions[0].Leader != "n1" {
		t.Fatalf("the first map: %+v", m)
	}
	changed := mirror.Changed()
	rev2 := putMap("n7")
	if m := mapAt(rev2); m == nil || m.Partitions[3].Leader != "n7" {
		t.Fatalf("the second map: %+v", m)
	}
	select {
	case <-changed:
	default:
		t.Fatal("the mirror holds a new map and did not tell its waiters")
	}
	// The node list: n1 up (registered), n7 known as a voter, down.
	if err := mirror.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	list := mirror.NodeList()
	if len(list) != 2 || list[0].Name != "n1" || !list[0].Up || list[0].Info == nil ||
		list[1].Name != "n7" || list[1].Up || list[1].Info != nil {
		t.Fatalf("the node list: %+v, want n1 up and n7 down", list)
	}
	if _, err := mirror.Node("n7"); !errors.Is(err, ErrNodeDown) {
		t.Fatalf("Node(n7), a voter not registered: %v, want ErrNodeDown", err)
	}
	del, err := cli.Delete(ctx, maps+"b")
	if err != nil {
		t.Fatal(err)
	}
	if err := mirror.WaitMaps(ctx, del.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if m, rev, _, _ := mirror.Map("b"); m != nil || rev != 0 {
		t.Fatalf("a deleted map: %+v at %d, want none", m, rev)
	}

	// A node registered on a lease nobody keeps alive is up, then gone
	// once the lease expires; the generation moves with each change.
	waitNodes := func(what string, ok func(map[string]NodeInfo) bool) uint64 {
		t.Helper()
		for {
			ns, gen, loaded := mirror.Nodes()
			if loaded && ok(ns) {
				return gen
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the mirror never saw %s: %v", what, ns)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	gen0 := waitNodes("n1 up", func(ns map[string]NodeInfo) bool { return ns["n1"].Name == "n1" })
	lease, err := cli.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(NodeInfo{Name: "n9", HTTP: "127.0.0.1:9"})
	if _, err := cli.Put(ctx, ups+"n9", string(info), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	gen1 := waitNodes("n9 up", func(ns map[string]NodeInfo) bool { return ns["n9"].HTTP == "127.0.0.1:9" })
	gen2 := waitNodes("n9's lease expire", func(ns map[string]NodeInfo) bool { _, up := ns["n9"]; return !up && ns["n1"].Name == "n1" })
	if !(gen0 < gen1 && gen1 < gen2) {
		t.Fatalf("generations %d, %d, %d: want each change to move it", gen0, gen1, gen2)
	}
	// A voter down that the mirror saw up is listed with what it
	// published last (a configuration lists it at its addresses).
	mapAt(putMap("n9"))
	list = mirror.NodeList()
	if i := slices.IndexFunc(list, func(ns NodeStatus) bool { return ns.Name == "n9" }); i < 0 || list[i].Up || list[i].Info == nil || list[i].Info.HTTP != "127.0.0.1:9" {
		t.Fatalf("the node list: %+v, want n9 down with its last addresses", list)
	}
}

// TestFollowPrefixReloadsAfterCompaction: a watch whose history was
// compacted away reads the whole prefix again, changes made meanwhile
// included, then follows it on.
func TestFollowPrefixReloadsAfterCompaction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := startAll(t, ctx, []Config{testConfig(t, testPeers(t, 1), "n1", t.TempDir(), &syncLog{})})
	defer closeAll(nodes)
	cli := nodes[0].Client()
	const prefix = "/mayfly/test-follow/"
	if _, err := cli.Put(ctx, prefix+"a", "1"); err != nil {
		t.Fatal(err)
	}

	type load struct {
		keys map[string]string
		rev  int64
	}
	loads := make(chan load, 4)
	events := make(chan string, 16)
	first := true
	fctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		followPrefix(fctx, cli, prefix, func(kvs []*mvccpb.KeyValue, rev int64) {
			keys := map[string]string{}
			for _, kv := range kvs {
				keys[string(kv.Key)] = string(kv.Value)
			}
			if first {
				// Before the watch starts: a change, then the history
				// after the revision read compacted away (up to a later
				// write elsewhere: etcd keeps the compaction revision's).
				first = false
				_, err := cli.Put(ctx, prefix+"b", "2")
				var resp *clientv3.PutResponse
				if err == nil {
					resp, err = cli.Put(ctx, "/mayfly/test-elsewhere", "x")
				}
				if err == nil {
					_, err = cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
				}
				if err != nil {
					t.Error(err)
				}
			}
			loads <- load{keys, rev}
		}, func(evs []*clientv3.Event, upTo int64) {
			for _, ev := range evs {
				events <- string(ev.Kv.Key) + "=" + string(ev.Kv.Value)
			}
		})
	})
	defer func() { stop(); wg.Wait() }()

	next := func() load {
		t.Helper()
		select {
		case l := <-loads:
			return l
		case <-ctx.Done():
			t.Fatal("no load")
			return load{}
		}
	}
	if l := next(); len(l.keys) != 1 || l.keys[prefix+"a"] != "1" {
		t.Fatalf("the first load: %v", l.keys)
	}
	l := next()
	if len(l.keys) != 2 || l.keys[prefix+"b"] != "2" {
		t.Fatalf("the load after the compaction: %v, want a and b", l.keys)
	}
	select {
	case e := <-events:
		t.Fatalf("an event before the reload: %s (the compacted watch went on)", e)
	default:
	}
	if _, err := cli.Put(ctx, prefix+"c", "3"); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-events:
		if e != prefix+"c=3" {
			t.Fatalf("the event after the reload: %s, want c=3", e)
		}
	case <-ctx.Done():
		t.Fatal("no event after the reload")
	}
}
