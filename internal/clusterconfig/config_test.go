package clusterconfig_test

import (
	"context"
	"encoding/json"
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
