package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
)

// TestRouterAvoidsAPreferredLeaderThatIsDown: on a node holding no copy of
// a partition, whose map's preferred leader has no live lease (its
// registration gone, as when it is cut off or dead, before any failover),
// the router sends the partition's requests to another live voter of it
// (before, to the node that is down: refused, its address unknown); it
// follows a leader a refusal names (Reroute), remembers it for the
// partition until the bucket's layout revision moves, never takes a name
// it cannot use (a node down, itself), and a voter a forward could not
// reach is avoided for the next.
func TestRouterAvoidsAPreferredLeaderThatIsDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, mirror := oneNodeClusterWith(t, ctx, func(c *cluster.Config) {
		c.FailoverTimeout, c.LeaderSettle = time.Hour, time.Hour // the map stays as placed
	})
	cli := node.Client()
	// Three more nodes registered (no process behind them: the router only
	// names them), so that n1 holds no copy of a quarter of the partitions.
	for _, n := range []string{"v2", "v3", "v4"} {
		info := fmt.Sprintf(`{"name":%q,"http":"127.0.0.1:1%s","memcached":"127.0.0.1:2%s"}`, n, n[1:], n[1:])
		if _, err := cli.Put(ctx, "/mayfly/nodes/"+n, info); err != nil {
			t.Fatal(err)
		}
	}
	h, eng, b := routerHostAndBucket(t, ctx, 64)
	def := cluster.BucketDef{BucketSettings: b.Settings()}
	def.ReplicaNumber = engine.Replicas(2)
	if err := cluster.DefineBucket(ctx, cli, def); err != nil {
		t.Fatal(err)
	}
	var m *cluster.PartitionMap
	for m == nil {
		if m, _, _, _ = mirror.Map("b"); m != nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the bucket's map was not placed")
		case <-mirror.Changed():
		}
	}
	// A key of a partition n1 holds no copy of.
	key, part := "", -1
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		p := b.PartitionOf(k)
		if !slices.Contains(m.Partitions[p].Voters, "n1") {
			key, part = k, p
		}
		if i > 10000 {
			t.Fatalf("no key of a partition without n1 in %+v", m.Partitions[:64])
		}
	}
	p := m.Partitions[part]
	pref := p.Leader
	var others []string // its other voters, in the map's order
	for _, v := range p.Voters {
		if v != pref {
			others = append(others, v)
		}
	}
	if len(others) != 2 {
		t.Fatalf("partition %d: %+v; want three voters", part, p)
	}
	r := &router{eng: eng, h: h, self: "n1", mirror: mirror}
	go r.followNodes(ctx)
	routeNode := func() string {
		t.Helper()
		rt, err := r.httpRoute(ctx, "b", key)
		if err != nil {
			t.Fatalf("HTTP route of %q: %v", key, err)
		}
		return rt.Node
	}
	if got := routeNode(); got != pref {
		t.Fatalf("with every voter up the request goes to %q; want the preferred leader %q", got, pref)
	}

	// The preferred leader's registration goes (its lease expired).
	if _, err := cli.Delete(ctx, "/mayfly/nodes/"+pref); err != nil {
		t.Fatal(err)
	}
	for {
		ch := mirror.Changed()
		if _, err := mirror.Node(pref); err != nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the mirror kept the node whose registration was deleted")
		case <-ch:
		}
	}
	hr, err := r.httpRoute(ctx, "b", key)
	if err != nil || hr.Node != others[0] || hr.Addr != "127.0.0.1:1"+others[0][1:] || hr.Reroute == nil {
		t.Fatalf("HTTP route with the preferred leader %s down: %+v, %v; want voter %s, with a Reroute", pref, hr, err, others[0])
	}
	mr, err := r.memcachedRoute("b")(ctx, key)
	if err != nil || mr.Node != others[0] || mr.Addr != "127.0.0.1:2"+others[0][1:] || mr.Reroute == nil {
		t.Fatalf("memcached route with the preferred leader %s down: %+v, %v; want voter %s, with a Reroute", pref, mr, err, others[0])
	}

	// Names a refusal may give that cannot be used: the node down, this
	// node, the refusing node itself.
	for _, name := range []string{pref, "n1", others[0]} {
		if rt, ok := hr.Reroute(ctx, name); ok {
			t.Fatalf("Reroute naming %s: %+v; want nowhere", name, rt)
		}
	}
	// The voter reached names the other as the leader: followed, and
	// remembered for the partition (the memcached port's too).
	next, ok := hr.Reroute(ctx, others[1])
	if !ok || next.Node != others[1] || next.Addr != "127.0.0.1:1"+others[1][1:] {
		t.Fatalf("Reroute naming %s: %+v, %v", others[1], next, ok)
	}
	if got := routeNode(); got != others[1] {
		t.Fatalf("after %s was named the leader the request goes to %q", others[1], got)
	}
	if mr, err := r.memcachedRoute("b")(ctx, key); err != nil || mr.Node != others[1] {
		t.Fatalf("memcached route after %s was named the leader: %+v, %v", others[1], mr, err)
	}

	// A change of leadership anywhere (the layout revision moves) drops
	// what was learned.
	before := mirror.LayoutRevision("b")
	if _, err := cluster.BumpLayout(ctx, cli, "b", "n1"); err != nil {
		t.Fatal(err)
	}
	for mirror.LayoutRevision("b") == before {
		select {
		case <-ctx.Done():
			t.Fatal("the layout revision did not move")
		case <-mirror.Changed():
		}
	}
	if got := routeNode(); got != others[0] {
		t.Fatalf("after a layout change the request goes to %q; want the first live voter %s again", got, others[0])
	}

	// A voter a forward could not reach is avoided: the key goes to the
	// last live voter; when that one cannot be reached either there is
	// nowhere else.
	hr, _ = r.httpRoute(ctx, "b", key)
	next, ok = hr.Reroute(ctx, "")
	if !ok || next.Node != others[1] {
		t.Fatalf("Reroute after %s could not be reached: %+v, %v; want %s", others[0], next, ok, others[1])
	}
	if got := routeNode(); got != others[1] {
		t.Fatalf("after %s could not be reached the request goes to %q", others[0], got)
	}
	if rt, ok := next.Reroute(ctx, ""); ok {
		t.Fatalf("Reroute with every voter unreachable or down: %+v; want nowhere", rt)
	}

	// A node leaving the mirror (its lease expired) closes its routes'
	// Gone, so that forwards in flight to it are abandoned.
	to, err := r.httpRouteTo("b", key, part, others[1])
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-to.Gone:
		t.Fatalf("the route to %s, which is up, says it is gone", others[1])
	default:
	}
	if _, err := cli.Delete(ctx, "/mayfly/nodes/"+others[1]); err != nil {
		t.Fatal(err)
	}
	select {
	case <-to.Gone:
	case <-ctx.Done():
		t.Fatalf("the route to %s was not told that its registration went", others[1])
	}
}

// TestNonVoterWritesWhileThePreferredLeaderIsCutOff runs four `mayfly
// serve --peers` processes and freezes one (SIGSTOP: alive, connections
// open, silent, as a node cut off), the preferred leader of a quarter of
// the partitions, with failover ten minutes away. Once its lease expired
// and its partitions' other voters elected leaders among themselves,
// every write through a node that holds no copy of such a partition,
// HTTP and memcached, is acknowledged at the first try by the partition's
// new leader, and read back through that node, whose KV configuration
// names that leader as the voters' do; the map still names the frozen
// node. Before, such a node forwarded to the map's preferred
// leader, and each write was refused (its address unknown once its lease
// expired, a dial's timeout before) until the failover.
func TestNonVoterWritesWhileThePreferredLeaderIsCutOff(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four server processes")
	}
	// Beside the package's other four-process tests: each mostly waits
	// out timeouts and elections, and this package is make test's longest.
	t.Parallel()
	nodes, peers, _, m := startFourWithDocs(t)
	victim, live := nodes[3], nodes[:3]
	eventuallyT(t, "every group led by the map's preferred leader", func() error { return leadersFollowMap(nodes, m) })

	// 36 keys of partitions the victim leads, each with the live node
	// that holds no copy of its partition (24 written over HTTP, 12 over
	// memcached).
	type target struct {
		key     string
		through *procNode
		voters  []string // the partition's live voters
	}
	var targets []target
	for i := 0; len(targets) < 36; i++ {
		if i > 1e6 {
			t.Fatalf("%d keys of partitions %s leads that a live node holds no copy of", len(targets), victim.name)
		}
		k := fmt.Sprintf("cut%d", i)
		p := m.Partitions[partitionOfKey(k)]
		if p.Leader != victim.name {
			continue
		}
		for _, n := range live {
			if !slices.Contains(p.Voters, n.name) {
				targets = append(targets, target{key: k, through: n, voters: slices.DeleteFunc(slices.Clone(p.Voters), func(v string) bool { return v == victim.name })})
			}
		}
	}

	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.cmd.Process.Signal(syscall.SIGCONT) }) // before the fixture's stop
	eventuallyT(t, victim.name+"'s lease expired", func() error {
		st, err := clusterStatus(peers)
		if err != nil {
			return err
		}
		if ns, ok := st.Node(victim.name); !ok || ns.Up {
			return fmt.Errorf("%s still up: %+v", victim.name, ns)
		}
		return nil
	})
	// The precondition, read from the voters' own configurations (the
	// leader their groups know): each partition written elected a leader
	// among its live voters.
	eventuallyT(t, "new leaders among the live voters", func() error {
		for _, tg := range targets {
			for _, v := range tg.voters {
				n := nodes[v[1]-'1']
				var cfg kvConfig
				if err := nodeReq(n, http.MethodGet, "/pools/default/b/default", &cfg); err != nil {
					return err
				}
				row := cfg.VBucketServerMap.VBucketMap[partitionOfKey(tg.key)]
				if len(row) == 0 || row[0] < 0 || !slices.Contains(tg.voters, fmt.Sprintf("n%d", row[0]+1)) {
					return fmt.Errorf("%s: %s's partition led by server %v", n.name, tg.key, row)
				}
			}
		}
		return nil
	})

	// The KV configuration of the node holding no copy names the leader
	// the voters' configurations name, under the same rev (the leader's
	// own record of its partitions), not the frozen node: an SDK that
	// took it sends the keys to the leader. Before, it named the frozen
	// node (with no address once its lease expired) until the failover.
	eventuallyT(t, "the configurations of the nodes holding no copy name the new leaders", func() error {
		for _, tg := range targets {
			var cfg, vcfg kvConfig
			if err := nodeReq(tg.through, http.MethodGet, "/pools/default/b/default", &cfg); err != nil {
				return err
			}
			if err := nodeReq(nodes[tg.voters[0][1]-'1'], http.MethodGet, "/pools/default/b/default", &vcfg); err != nil {
				return err
			}
			p := partitionOfKey(tg.key)
			row, vrow := cfg.VBucketServerMap.VBucketMap[p], vcfg.VBucketServerMap.VBucketMap[p]
			if len(row) == 0 || row[0] < 0 || !slices.Contains(tg.voters, fmt.Sprintf("n%d", row[0]+1)) || len(vrow) == 0 || vrow[0] != row[0] || cfg.Rev != vcfg.Rev {
				return fmt.Errorf("%s's partition: %s names server %v under rev %d, %s server %v under rev %d", tg.key, tg.through.name, row, cfg.Rev, tg.voters[0], vrow, vcfg.Rev)
			}
		}
		return nil
	})

	// Each write once: no retry.
	var failed []string
	for i, tg := range targets {
		value := fmt.Sprintf(`{"v":%d}`, i)
		if i%3 == 2 {
			reply, err := memcachedCmd(tg.through.mc, fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", tg.key, len(value), value))
			if err != nil || reply != "STORED" {
				failed = append(failed, fmt.Sprintf("memcached set %s through %s: %q, %v", tg.key, tg.through.name, reply, err))
			}
			continue
		}
		code, h, body, err := docReqH(http.MethodPut, tg.through.http, tg.key, value)
		if err != nil || code != http.StatusOK && code != http.StatusCreated {
			failed = append(failed, fmt.Sprintf("PUT %s through %s: %d %s %v", tg.key, tg.through.name, code, body, err))
		} else if by := h.Get(httpapi.RoutedToHeader); !slices.Contains(tg.voters, by) {
			failed = append(failed, fmt.Sprintf("PUT %s through %s acknowledged by %q, not a live voter of %v", tg.key, tg.through.name, by, tg.voters))
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d writes through a node holding no copy failed:\n%s", len(failed), len(targets), strings.Join(failed, "\n"))
	}
	for i, tg := range targets {
		value := fmt.Sprintf(`{"v":%d}`, i)
		if code, body, err := getDoc(tg.through.http, tg.key); err != nil || code != http.StatusOK || !strings.Contains(string(body), value) {
			t.Fatalf("GET %s through %s: %d %s %v; want %s", tg.key, tg.through.name, code, body, err, value)
		}
		reply, err := memcachedReply(tg.through.mc, "get "+tg.key+"\r\n")
		if err != nil || !strings.Contains(reply, value) {
			t.Fatalf("memcached get %s through %s: %q, %v; want %s", tg.key, tg.through.name, reply, err, value)
		}
	}
	now, err := readDefaultMap(peers)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		if p := now.Partitions[partitionOfKey(tg.key)]; p.Leader != victim.name {
			t.Fatalf("the map moved %s's partition (%+v) during the test: a failover, not the routing, answered", tg.key, p)
		}
	}
}
