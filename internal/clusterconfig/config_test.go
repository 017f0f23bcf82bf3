package clusterconfig_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
)

// The terse configuration maps every partition to this one server, lists
// its services, and its rev follows the collections manifest.
func TestTerse(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("b"))
	if err != nil {
		t.Fatal(err)
	}
	p := clusterconfig.Ports{KV: 11210, Mgmt: 8091, Capi: 8092, FTS: 8094}
	c := clusterconfig.Terse(b, clusterconfig.CCCPHost, p)
	if c.NodeLocator != "vbucket" || len(c.VBucketServerMap.VBucketMap) != b.NumPartitions() ||
		!slices.Equal(c.VBucketServerMap.ServerList, []string{"$HOST:11210"}) || c.VBucketServerMap.HashAlgorithm != "CRC" {
		t.Fatalf("terse config %+v", c)
	}
	raw, _ := json.Marshal(c)
	for _, want := range []string{`"services":{"kv":11210,"mgmt":8091,"capi":8092,"fts":8094}`, `"couchApiBase":"http://$HOST:8092/b%2B`, `"collectionsManifestUid":"0"`} {
		if !strings.Contains(string(raw), want) {
			t.Fatalf("%s lacks %s", raw, want)
		}
	}
	rev := c.Rev
	if err := b.CreateScope(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if c2 := clusterconfig.Terse(b, "h", p); c2.Rev <= rev {
		t.Fatalf("rev %d after a scope was made, was %d", c2.Rev, rev)
	}
	if got := clusterconfig.ScopeUIDs(b.Scopes()); !slices.Equal(got, []uint32{0, 8}) {
		t.Fatalf("scope uids %v", got)
	}
	if g := clusterconfig.Cluster("h", p); g.Name != "" || g.VBucketServerMap != nil || len(g.NodesExt) != 1 {
		t.Fatalf("cluster config %+v", g)
	}
}

// With TLS, nodesExt lists the TLS twins of the ports (kvSSL, mgmtSSL, ...)
// beside the others; without it, none.
func TestNodesExtTLS(t *testing.T) {
	raw, _ := json.Marshal(clusterconfig.NodesExt("h", clusterconfig.Ports{KV: 11210, Mgmt: 8091, KVSSL: 11207, MgmtSSL: 18091, CapiSSL: 18091, FTSSSL: 18091}))
	want := `"services":{"kv":11210,"mgmt":8091,"kvSSL":11207,"mgmtSSL":18091,"capiSSL":18091,"ftsSSL":18091}`
	if !strings.Contains(string(raw), want) {
		t.Fatalf("%s lacks %s", raw, want)
	}
	raw, _ = json.Marshal(clusterconfig.NodesExt("h", clusterconfig.Ports{KV: 11210, Mgmt: 8091}))
	if strings.Contains(string(raw), "SSL") {
		t.Fatalf("without TLS: %s", raw)
	}
}

// threeNodes is a three-node topology of a bucket of partitions partitions,
// each node serving views and search on its HTTP port (n3 published no
// services: an older node).
func threeNodes(self string, partitions int) *clusterconfig.Topology {
	svc := func(kv, mgmt int) *clusterconfig.Services {
		return clusterconfig.ServicesOf(clusterconfig.ServiceMap(clusterconfig.Ports{KV: kv, Mgmt: mgmt, Capi: mgmt, FTS: mgmt}))
	}
	t := &clusterconfig.Topology{Rev: 7, Replicas: 1, Servers: []clusterconfig.Server{
		{Name: "n1", KV: "10.0.0.1:11210", HTTP: "10.0.0.1:8091", Services: svc(11210, 8091)},
		{Name: "n2", KV: "10.0.0.2:11210", HTTP: "10.0.0.2:8091", Services: svc(11210, 8091)},
		{Name: "n3", KV: "10.0.0.3:11210", HTTP: "10.0.0.3:8091", Services: svc(11210, 8091)},
	}}
	for i := range t.Servers {
		t.Servers[i].ThisNode = t.Servers[i].Name == self
	}
	for p := range partitions {
		t.Map = append(t.Map, []int{p % 3, (p + 1) % 3})
	}
	return t
}

// A cluster node's configuration lists every node with all its services
// (capi and fts too, the TLS twins when published), the configuration
// without a bucket and nodeServices list every node, and two nodes'
// configurations at one rev are alike but for thisNode; the bucket's uuid
// is its settings' (its definition's on a cluster). Before, the other
// nodes had kv and mgmt (and capi only when this node served views on its
// HTTP port), the bucketless configuration and nodeServices this node
// alone, and the uuid was the node's own history UUID.
func TestTopologyListsEveryNodesServices(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	s := engine.DefaultBucketSettings("b")
	s.UUID = "0123456789abcdef0123456789abcdef"
	b, err := eng.CreateBucket(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	p := clusterconfig.Ports{KV: 11210, Mgmt: 8091, Capi: 8091, FTS: 8091}
	cfg := func(self, host string) *clusterconfig.Bucket {
		return clusterconfig.Terse(b, host, p).WithTopology(threeNodes(self, b.NumPartitions()), host, p)
	}
	c1, c2 := cfg("n1", "10.0.0.1"), cfg("n2", "10.0.0.2")
	if c1.UUID != s.UUID || !strings.Contains(c1.URI, s.UUID) {
		t.Fatalf("uuid %q, uri %q: want the bucket's settings' uuid %s", c1.UUID, c1.URI, s.UUID)
	}
	want := clusterconfig.Services{KV: 11210, Mgmt: 8091, Capi: 8091, FTS: 8091}
	for _, c := range []*clusterconfig.Bucket{c1, c2} {
		if len(c.NodesExt) != 3 || len(c.Nodes) != 3 {
			t.Fatalf("%d nodesExt, %d nodes: want 3", len(c.NodesExt), len(c.Nodes))
		}
		for i, e := range c.NodesExt {
			if e.Services != want || e.Hostname != fmt.Sprintf("10.0.0.%d", i+1) {
				t.Fatalf("nodesExt[%d] %+v: want %s with %+v", i, e, fmt.Sprintf("10.0.0.%d", i+1), want)
			}
			base := fmt.Sprintf("http://10.0.0.%d:8091/b%%2B%s", i+1, s.UUID)
			if c.Nodes[i].CouchAPIBase != base || !slices.Contains(c.Nodes[i].Services, "fts") {
				t.Fatalf("nodes[%d] %+v: want couchApiBase %s and fts", i, c.Nodes[i], base)
			}
		}
	}
	if c1.Rev != c2.Rev {
		t.Fatalf("revs %d and %d", c1.Rev, c2.Rev)
	}
	norm := func(c *clusterconfig.Bucket) string {
		out := *c
		out.NodesExt = slices.Clone(c.NodesExt)
		out.Nodes = slices.Clone(c.Nodes)
		for i := range out.NodesExt {
			out.NodesExt[i].ThisNode = false
		}
		for i := range out.Nodes {
			out.Nodes[i].ThisNode = false
		}
		raw, _ := json.Marshal(out)
		return string(raw)
	}
	if a, b := norm(c1), norm(c2); a != b {
		t.Fatalf("n1's and n2's configurations at rev %d differ beyond thisNode:\n%s\n%s", c1.Rev, a, b)
	}

	// Without a bucket, and nodeServices: every node.
	g := clusterconfig.ClusterOf(threeNodes("n2", 0), "10.0.0.2", p)
	if len(g.NodesExt) != 3 || g.Rev != 8 || !g.NodesExt[1].ThisNode {
		t.Fatalf("cluster config %+v: want 3 nodes at rev 8, n2 this node", g)
	}
	for i, e := range g.NodesExt {
		if e.Services != want {
			t.Fatalf("cluster config's nodesExt[%d] %+v: want %+v", i, e, want)
		}
	}
	ns := clusterconfig.NodeServices(threeNodes("n2", 0), "10.0.0.2", p)
	if ext, _ := ns["nodesExt"].([]clusterconfig.NodeExt); len(ext) != 3 {
		t.Fatalf("nodeServices %+v: want 3 nodes", ns)
	}

	// TLS twins a node published are listed; a node that published no
	// services (an older one) is listed with its KV and HTTP ports.
	top := threeNodes("n1", b.NumPartitions())
	top.Servers[1].Services.KVSSL, top.Servers[1].Services.FTSSSL = 11207, 18091
	top.Servers[2].Services = nil
	c := clusterconfig.Terse(b, "10.0.0.1", p).WithTopology(top, "10.0.0.1", p)
	if s := c.NodesExt[1].Services; s.KVSSL != 11207 || s.FTSSSL != 18091 {
		t.Fatalf("n2's services %+v: want kvSSL and ftsSSL", s)
	}
	if s := c.NodesExt[2].Services; s.KV != 11210 || s.Mgmt != 8091 || s.FTS != 0 {
		t.Fatalf("n3 (no services published) %+v: want kv and mgmt", s)
	}
}

// TestPoolNode: GET /pools/default lists another cluster node with its
// own couchApiBase (at the capi port it published, or its HTTP port when
// it published none and this node answers views on its HTTP port), its
// HTTP address as hostname, its KV port as ports.direct and its services;
// a node down is "unhealthy". Before, the others had no couchApiBase nor
// services.
func TestPoolNode(t *testing.T) {
	p := clusterconfig.Ports{KV: 11210, Mgmt: 8091, Capi: 8091, FTS: 8091}
	published := clusterconfig.Server{Name: "n2", KV: "10.0.0.2:11210", HTTP: "10.0.0.2:8091",
		Services: &clusterconfig.Services{KV: 11210, Mgmt: 8091, Capi: 8092, FTS: 8094}}
	n := clusterconfig.PoolNode(published, p)
	if n.CouchAPIBase != "http://10.0.0.2:8092/" || n.Hostname != "10.0.0.2:8091" || n.Ports["direct"] != 11210 ||
		!slices.Equal(n.Services, []string{"kv", "fts"}) || n.Status != "healthy" || n.ThisNode {
		t.Fatalf("a node that published its services: %+v", n)
	}
	older := clusterconfig.Server{Name: "n3", KV: "10.0.0.3:11210", HTTP: "10.0.0.3:8091", Down: true}
	n = clusterconfig.PoolNode(older, p)
	if n.CouchAPIBase != "http://10.0.0.3:8091/" || n.Hostname != "10.0.0.3:8091" || n.Ports["direct"] != 11210 || n.Status != "unhealthy" {
		t.Fatalf("a node down that published no services: %+v", n)
	}
	if n := clusterconfig.PoolNode(clusterconfig.Server{Name: "n4", Down: true}, p); n.Hostname != "n4" || n.CouchAPIBase != "" {
		t.Fatalf("a node that published nothing: %+v", n)
	}
}
