package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/couchbase/gocbcore/v10"
)

// TestClusterConfigTheSameOnEveryNode: three processes; every node's
// configuration (/pools/default/b/default, nodeServices) lists every node
// with all its services (kv, mgmt, capi, fts), two nodes' configurations
// at one rev are the same but for thisNode, every node shows the
// bucket's one uuid (its definition's), and a Couchbase SDK seeded at one
// node, with a bucket open or none, has every node's views and search
// endpoints. Before, a node listed the others with kv and mgmt (and capi)
// only, nodeServices and the configuration without a bucket listed the
// node asked alone (an SDK ran every search on the node it was seeded
// at, timing out while that node was down), and each node showed its own
// per-node history UUID as the bucket's uuid. /pools/default lists every
// node with its own couchApiBase, hostname, KV port and services on
// every node asked; before, the others had no couchApiBase nor services.
func TestClusterConfigTheSameOnEveryNode(t *testing.T) {
	nodes, peers := startedKVCluster(t)
	eventuallyT(t, "the default bucket placed", func() error {
		_, err := readDefaultMap(peers)
		return err
	})

	// The bucket's uuid: one, its definition's, on every node.
	var uuids []string
	for _, n := range nodes {
		var b struct {
			UUID  string `json:"uuid"`
			Nodes []struct {
				CouchAPIBase string `json:"couchApiBase"`
			} `json:"nodes"`
		}
		if err := nodeReq(n, "GET", "/pools/default/buckets/default", &b); err != nil {
			t.Fatal(err)
		}
		uuids = append(uuids, b.UUID)
		for _, nd := range b.Nodes {
			if nd.CouchAPIBase != "" && !strings.HasSuffix(nd.CouchAPIBase, "/default%2B"+b.UUID) {
				t.Errorf("%s: couchApiBase %q does not end with the bucket's uuid %s", n.name, nd.CouchAPIBase, b.UUID)
			}
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(uuids[0]) || uuids[1] != uuids[0] || uuids[2] != uuids[0] {
		t.Errorf("the default bucket's uuid on n1, n2, n3: %q: want the one definition's (32 hex digits) on each", uuids)
	}

	// nodeServices: every node, each with all its services.
	for _, n := range nodes {
		var ns struct {
			NodesExt []map[string]any `json:"nodesExt"`
		}
		if err := nodeReq(n, "GET", "/pools/default/nodeServices", &ns); err != nil {
			t.Fatal(err)
		}
		if err := allServices(ns.NodesExt); err != nil {
			t.Errorf("%s's nodeServices: %v", n.name, err)
		}
	}

	// /pools/default: every node, on every node asked, with its own
	// couchApiBase (its views' base URL), hostname, KV port and
	// services; each node's entries alike on the three nodes.
	var firstNodes map[string]string
	for _, n := range nodes {
		var pd struct {
			Nodes []struct {
				CouchAPIBase string         `json:"couchApiBase"`
				Hostname     string         `json:"hostname"`
				Ports        map[string]int `json:"ports"`
				Services     []string       `json:"services"`
			} `json:"nodes"`
		}
		if err := nodeReq(n, "GET", "/pools/default", &pd); err != nil {
			t.Fatal(err)
		}
		if len(pd.Nodes) != 3 {
			t.Fatalf("%s's /pools/default lists %d nodes, want 3", n.name, len(pd.Nodes))
		}
		bases := map[string]string{}
		for _, nd := range pd.Nodes {
			if nd.CouchAPIBase == "" || nd.Hostname == "" || nd.Ports["direct"] == 0 || !slices.Contains(nd.Services, "kv") {
				t.Errorf("%s's /pools/default: node %+v lacks its couchApiBase, hostname, KV port or services", n.name, nd)
			}
			bases[nd.Hostname] = nd.CouchAPIBase
		}
		if len(bases) != 3 || len(slices.Compact(slices.Sorted(maps.Values(bases)))) != 3 {
			t.Errorf("%s's /pools/default: hostnames to couchApiBase %v, want three nodes each with its own", n.name, bases)
		}
		if firstNodes == nil {
			firstNodes = bases
		} else if !maps.Equal(bases, firstNodes) {
			t.Errorf("/pools/default's nodes on n1 %v and on %s %v differ", firstNodes, n.name, bases)
		}
	}

	// The bucket's configuration: every node with all its services, the
	// same on two nodes at one rev (polled until the nodes are at one rev:
	// right after the cluster forms, the groups' elections are recorded
	// one after the other, and a node's mirror may not have the latest
	// record yet).
	eventuallyT(t, "the nodes' bucket configurations alike at one rev", func() error {
		var first map[string]any
		for _, n := range nodes {
			var c map[string]any
			if err := nodeReq(n, "GET", "/pools/default/b/default", &c); err != nil {
				return err
			}
			raw, _ := json.Marshal(c["nodesExt"])
			var ext []map[string]any
			if err := json.Unmarshal(raw, &ext); err != nil {
				return err
			}
			if err := allServices(ext); err != nil {
				t.Fatalf("%s's configuration: %v", n.name, err)
			}
			dropThisNode(c)
			if first == nil {
				first = c
				continue
			}
			if c["rev"] == first["rev"] && !reflect.DeepEqual(c, first) {
				a, _ := json.Marshal(first)
				b, _ := json.Marshal(c)
				return fmt.Errorf("n1's and %s's configurations at rev %v differ:\n%s\n%s", n.name, c["rev"], a, b)
			}
			if c["rev"] != first["rev"] {
				return fmt.Errorf("revs %v and %v", first["rev"], c["rev"])
			}
		}
		return nil
	})

	// An SDK seeded at n1, without a bucket (its cluster-level
	// configuration) and with one, knows every node's search and views.
	for _, bucket := range []string{"", "default"} {
		agent, err := gocbcore.CreateAgent(&gocbcore.AgentConfig{
			BucketName:     bucket,
			SeedConfig:     gocbcore.SeedConfig{MemdAddrs: []string{nodes[0].kv}},
			SecurityConfig: gocbcore.SecurityConfig{Auth: gocbcore.PasswordAuthProvider{Username: "Administrator", Password: "password"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		eventuallyT(t, fmt.Sprintf("the SDK (bucket %q) knowing three search endpoints", bucket), func() error {
			fts, capi := agent.FtsEps(), agent.CapiEps()
			if len(fts) != 3 || bucket != "" && len(capi) != 3 {
				return fmt.Errorf("search endpoints %v, views endpoints %v", fts, capi)
			}
			return nil
		})
		agent.Close()
	}
}

// allServices says whether each nodesExt entry of ext (three expected)
// carries kv, mgmt, capi and fts.
func allServices(ext []map[string]any) error {
	if len(ext) != 3 {
		return fmt.Errorf("%d nodes in nodesExt, want 3: %v", len(ext), ext)
	}
	for _, e := range ext {
		svc, _ := e["services"].(map[string]any)
		for _, name := range []string{"kv", "mgmt", "capi", "fts"} {
			if p, _ := svc[name].(float64); p == 0 {
				return fmt.Errorf("%v lacks %s", e, name)
			}
		}
	}
	return nil
}

// dropThisNode takes thisNode out of a configuration's nodes and nodesExt
// (the one field that names the node asked) and the nodes' statuses
// (warm-up is each node's own).
func dropThisNode(c map[string]any) {
	for _, key := range []string{"nodes", "nodesExt"} {
		list, _ := c[key].([]any)
		for _, e := range list {
			if m, ok := e.(map[string]any); ok {
				delete(m, "thisNode")
				delete(m, "status")
			}
		}
	}
}
