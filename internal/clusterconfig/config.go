// Package clusterconfig builds the cluster configuration Couchbase SDKs
// bootstrap from: the terse bucket configuration (served over the binary KV
// port by GET_CLUSTER_CONFIG, and over HTTP at /pools/default/b/{bucket}),
// the node services list and the /pools documents. A single node's
// configuration lists this one server and maps every partition (vBucket)
// to it; a cluster node's lists every node with all its services
// (Bucket.WithTopology, ClusterOf). The KV port and the HTTP API both
// build their answers here, so they never disagree.
package clusterconfig

import (
	"net"
	"net/url"
	"slices"
	"strconv"

	"github.com/mayflydb/mayfly/engine"
)

// Version is the Couchbase Server version Mayfly reports where a
// configuration names one: SDKs read capabilities from the version
// string's major and minor numbers.
const Version = "7.6.0-0000-mayfly"

// CCCPHost is the host name a configuration served over the KV port
// carries; SDKs replace it with the address they connected to.
const CCCPHost = "$HOST"

// Ports are the ports this node serves, as a configuration lists them; 0
// leaves a service out.
type Ports struct {
	// KV is the binary KV port (Couchbase's 11210).
	KV int
	// Mgmt is the HTTP API's port (Couchbase's 8091).
	Mgmt int
	// Capi is where views are queried (Couchbase's 8092); Mayfly serves
	// them on the HTTP API's port unless told otherwise.
	Capi int
	// FTS is where full-text search is served (Couchbase's 8094).
	FTS int
	// KVSSL, MgmtSSL, CapiSSL and FTSSSL are the TLS twins of the above
	// (Couchbase's 11207, 18091, 18092, 18094), which SDKs connecting
	// with couchbases:// use.
	KVSSL, MgmtSSL, CapiSSL, FTSSSL int
}

// Services is a node's services and ports, as nodesExt lists them.
type Services struct {
	KV   int `json:"kv,omitempty"`
	Mgmt int `json:"mgmt,omitempty"`
	Capi int `json:"capi,omitempty"`
	FTS  int `json:"fts,omitempty"`

	KVSSL   int `json:"kvSSL,omitempty"`
	MgmtSSL int `json:"mgmtSSL,omitempty"`
	CapiSSL int `json:"capiSSL,omitempty"`
	FTSSSL  int `json:"ftsSSL,omitempty"`
}

// NodeExt is one entry of nodesExt.
type NodeExt struct {
	Services Services `json:"services"`
	ThisNode bool     `json:"thisNode"`
	Hostname string   `json:"hostname"`
}

// Node is one entry of a bucket configuration's nodes.
type Node struct {
	CouchAPIBase      string         `json:"couchApiBase,omitempty"`
	Hostname          string         `json:"hostname"`
	Ports             map[string]int `json:"ports"`
	ClusterMembership string         `json:"clusterMembership"`
	Status            string         `json:"status"`
	ThisNode          bool           `json:"thisNode"`
	Version           string         `json:"version"`
	Services          []string       `json:"services"`
}

// VBucketServerMap maps each partition to its servers.
type VBucketServerMap struct {
	HashAlgorithm string   `json:"hashAlgorithm"`
	NumReplicas   int      `json:"numReplicas"`
	ServerList    []string `json:"serverList"`
	VBucketMap    [][]int  `json:"vBucketMap"`
}

// Bucket is the terse bucket configuration. Without a bucket (a
// connection that selected none asks for the cluster's configuration) only
// Rev, NodesExt and the cluster capabilities are set.
type Bucket struct {
	Rev                    int64               `json:"rev"`
	RevEpoch               int64               `json:"revEpoch,omitempty"`
	Name                   string              `json:"name,omitempty"`
	UUID                   string              `json:"uuid,omitempty"`
	URI                    string              `json:"uri,omitempty"`
	StreamingURI           string              `json:"streamingUri,omitempty"`
	NodeLocator            string              `json:"nodeLocator,omitempty"`
	BucketCapabilitiesVer  string              `json:"bucketCapabilitiesVer,omitempty"`
	BucketCapabilities     []string            `json:"bucketCapabilities,omitempty"`
	CollectionsManifestUID string              `json:"collectionsManifestUid,omitempty"`
	DDocs                  *URI                `json:"ddocs,omitempty"`
	VBucketServerMap       *VBucketServerMap   `json:"vBucketServerMap,omitempty"`
	Nodes                  []Node              `json:"nodes,omitempty"`
	NodesExt               []NodeExt           `json:"nodesExt"`
	ClusterCapabilitiesVer []int               `json:"clusterCapabilitiesVer"`
	ClusterCapabilities    map[string][]string `json:"clusterCapabilities"`
}

// URI is an object holding one URI, as Couchbase nests them.
type URI struct {
	URI string `json:"uri"`
}

// bucketCapabilities are what a Mayfly bucket offers an SDK.
var bucketCapabilities = []string{"collections", "xattr", "cbhello", "touch", "cccp", "nodesExt", "couchapi"}

// HostPort joins host and port, bracketing an IPv6 host.
func HostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// NodesExt lists this node's services.
func NodesExt(host string, p Ports) []NodeExt {
	return []NodeExt{{Services: Services{
		KV: p.KV, Mgmt: p.Mgmt, Capi: p.Capi, FTS: p.FTS,
		KVSSL: p.KVSSL, MgmtSSL: p.MgmtSSL, CapiSSL: p.CapiSSL, FTSSSL: p.FTSSSL,
	}, ThisNode: true, Hostname: host}}
}

// Cluster is the configuration of a connection that selected no bucket
// (Couchbase's global configuration): this node's services.
func Cluster(host string, p Ports) *Bucket {
	return &Bucket{
		Rev:                    1,
		NodesExt:               NodesExt(host, p),
		ClusterCapabilitiesVer: []int{1, 0},
		// Search indexes on a bucket's scope (the REST API's
		// /api/bucket/{b}/scope/{s}/index paths): without it the SDKs
		// refuse a scope's Search and SearchIndexes (gocb:
		// ErrFeatureNotAvailable, "scoped search indexes are not
		// supported by this cluster version").
		ClusterCapabilities: map[string][]string{"search": {"scopedSearchIndex"}},
	}
}

// ClusterOf is the configuration of a connection that selected no bucket
// on a cluster node: every server of t (its Servers and Rev; its Map is
// not read) with all its services, in t's order, as nodesExt lists them;
// Cluster's when t is nil. SDKs run their search, query and management
// requests on the nodes it lists.
func ClusterOf(t *Topology, host string, p Ports) *Bucket {
	c := Cluster(host, p)
	if t == nil {
		return c
	}
	c.Rev = 1 + t.Rev
	c.NodesExt = nodesExtOf(t.Servers, host, p)
	return c
}

// nodesExtOf lists servers in nodesExt: this node with host and p, the
// others at what they published.
func nodesExtOf(servers []Server, host string, p Ports) []NodeExt {
	out := make([]NodeExt, 0, len(servers))
	for _, s := range servers {
		if s.ThisNode {
			out = append(out, NodesExt(host, p)[0])
			continue
		}
		h, svc := s.services(p)
		out = append(out, NodeExt{Services: svc, Hostname: h})
	}
	return out
}

// services is the host and services another node s is listed with: the
// ports it published (Services), else its KV and HTTP addresses' ports,
// with views on its HTTP port when this node (serving p) serves them on
// its own HTTP port (what a node publishing no Services did).
func (s Server) services(p Ports) (string, Services) {
	h, kv := splitAddr(s.KV)
	mh, mgmt := splitAddr(s.HTTP)
	if h == "" {
		h = mh
	}
	if s.Services != nil {
		return h, *s.Services
	}
	svc := Services{KV: kv, Mgmt: mgmt}
	if p.Capi != 0 && p.Capi == p.Mgmt {
		svc.Capi = mgmt // views answered on the HTTP API's port, as here
	}
	return h, svc
}

// ServicesOf reads a node's published services (named as nodesExt names
// them: "kv", "mgmt", "capi", "fts", "kvSSL", ...) into Services; nil
// when m is nil (not published: not known).
func ServicesOf(m map[string]int) *Services {
	if m == nil {
		return nil
	}
	return &Services{KV: m["kv"], Mgmt: m["mgmt"], Capi: m["capi"], FTS: m["fts"],
		KVSSL: m["kvSSL"], MgmtSSL: m["mgmtSSL"], CapiSSL: m["capiSSL"], FTSSSL: m["ftsSSL"]}
}

// ServiceMap is p as a node publishes it for the others (ServicesOf reads
// it back): each service's port by its nodesExt name, the zero ones left
// out.
func ServiceMap(p Ports) map[string]int {
	m := map[string]int{}
	for name, port := range map[string]int{"kv": p.KV, "mgmt": p.Mgmt, "capi": p.Capi, "fts": p.FTS,
		"kvSSL": p.KVSSL, "mgmtSSL": p.MgmtSSL, "capiSSL": p.CapiSSL, "ftsSSL": p.FTSSSL} {
		if port != 0 {
			m[name] = port
		}
	}
	return m
}

// BucketUUID is the bucket's uuid as clients are shown it: its
// incarnation's (engine.BucketSettings.UUID, the same on every node of a
// cluster, which defines the bucket by it), or, for a bucket created
// before buckets had one, its history's UUID in hexadecimal.
func BucketUUID(b *engine.Bucket) string {
	if u := b.Settings().UUID; u != "" {
		return u
	}
	return strconv.FormatUint(b.UUID(), 16)
}

// Terse is b's terse bucket configuration as served from host. Its rev
// follows the bucket's collections manifest, so an SDK that holds an older
// one takes the new one. Its uuid is BucketUUID's.
func Terse(b *engine.Bucket, host string, p Ports) *Bucket {
	manifest := b.ManifestUID()
	name := url.PathEscape(b.Name())
	uuid := BucketUUID(b)
	c := Cluster(host, p)
	c.Rev = int64(manifest) + 1
	c.Name = b.Name()
	c.UUID = uuid
	c.URI = "/pools/default/buckets/" + name + "?bucket_uuid=" + uuid
	c.StreamingURI = "/pools/default/bucketsStreaming/" + name + "?bucket_uuid=" + uuid
	c.NodeLocator = "vbucket"
	c.BucketCapabilitiesVer = ""
	c.BucketCapabilities = bucketCapabilities
	if b.Settings().Type != engine.Memcached {
		// The KV port takes a write's durability requirement (its
		// flexible-framing frame); SDKs send one only to a bucket that
		// says so. Memcached buckets take none, as Couchbase's.
		// Sub-document lookups read a replica's copy when flagged so
		// (Couchbase 7.6's "subdoc.ReplicaRead"): without it the SDKs
		// refuse LookupInAnyReplica and LookupInAllReplicas before
		// sending anything (gocb: ErrFeatureNotAvailable).
		c.BucketCapabilities = append(slices.Clip(bucketCapabilities), "durableWrite", "subdoc.ReplicaRead")
	}
	c.CollectionsManifestUID = strconv.FormatUint(manifest, 16)
	c.DDocs = &URI{URI: "/pools/default/buckets/" + name + "/ddocs"}
	vbm := make([][]int, b.NumPartitions())
	for i := range vbm {
		vbm[i] = []int{0}
	}
	var servers []string
	if p.KV != 0 {
		servers = []string{HostPort(host, p.KV)}
	}
	c.VBucketServerMap = &VBucketServerMap{HashAlgorithm: "CRC", NumReplicas: 0, ServerList: servers, VBucketMap: vbm}
	node := Node{
		Hostname: HostPort(host, p.Mgmt), Ports: map[string]int{"direct": p.KV},
		ClusterMembership: "active", Status: NodeStatus(b), ThisNode: true, Version: Version,
		Services: services(p),
	}
	if p.Capi != 0 {
		node.CouchAPIBase = "http://" + HostPort(host, p.Capi) + "/" + name + "%2B" + uuid
	}
	c.Nodes = []Node{node}
	return c
}

// NodeStatus is the node's status for bucket b, as Couchbase reports it
// per bucket: "warmup" while b loads its documents, then "healthy".
func NodeStatus(b *engine.Bucket) string {
	if b.Warm() {
		return "healthy"
	}
	return "warmup"
}

// services names the services a node runs, as Couchbase lists them.
func services(p Ports) []string {
	var s []string
	if p.KV != 0 {
		s = append(s, "kv")
	}
	if p.FTS != 0 {
		s = append(s, "fts")
	}
	return s
}

// NodeServices is GET /pools/default/nodeServices: this node's services,
// or on a cluster node (t not nil) every server's, as ClusterOf lists
// them.
func NodeServices(t *Topology, host string, p Ports) map[string]any {
	c := ClusterOf(t, host, p)
	return map[string]any{"rev": c.Rev, "nodesExt": c.NodesExt, "clusterCapabilitiesVer": c.ClusterCapabilitiesVer, "clusterCapabilities": c.ClusterCapabilities}
}

// Pools is GET /pools.
func Pools(isAdmin bool) map[string]any {
	return map[string]any{
		"isAdminCreds":          isAdmin,
		"isROAdminCreds":        false,
		"isEnterprise":          false,
		"allowedServices":       []string{"kv", "fts"},
		"implementationVersion": Version,
		"componentsVersion":     map[string]string{"ns_server": Version},
		"uuid":                  "mayfly",
		"pools":                 []map[string]string{{"name": "default", "uri": "/pools/default", "streamingUri": "/poolsStreaming/default"}},
	}
}

// Default is GET /pools/default: the cluster and its one node.
func Default(host string, p Ports) map[string]any {
	node := Node{
		Hostname: HostPort(host, p.Mgmt), Ports: map[string]int{"direct": p.KV},
		ClusterMembership: "active", Status: "healthy", ThisNode: true, Version: Version,
		Services: services(p),
	}
	if p.Capi != 0 {
		node.CouchAPIBase = "http://" + HostPort(host, p.Capi) + "/"
	}
	return map[string]any{
		"name":            "default",
		"clusterName":     "mayfly",
		"balanced":        true,
		"rebalanceStatus": "none",
		"nodes":           []Node{node},
		"buckets":         URI{URI: "/pools/default/buckets"},
		"nodeStatusesUri": "/nodeStatuses",
	}
}

// PoolNode is another cluster node s as GET /pools/default lists it
// after this one (Default's), with what Couchbase gives every node: its
// HTTP API's address as hostname (its name when it published none), its
// KV port as ports.direct, the base URL of its views as couchApiBase (at
// the capi port it published, or at its HTTP port when it published no
// services and this node, serving p, answers views on its own HTTP port),
// and its services; "healthy", or "unhealthy" while it is down.
func PoolNode(s Server, p Ports) Node {
	h, svc := s.services(p)
	node := Node{Hostname: s.HTTP, Ports: map[string]int{}, ClusterMembership: "active", Status: "healthy", Version: Version,
		Services: services(Ports{KV: svc.KV, FTS: svc.FTS})}
	if node.Hostname == "" {
		node.Hostname = s.Name
	}
	if svc.KV != 0 {
		node.Ports["direct"] = svc.KV
	}
	if svc.Capi != 0 && h != "" {
		node.CouchAPIBase = "http://" + HostPort(h, svc.Capi) + "/"
	}
	if s.Down {
		node.Status = "unhealthy"
	}
	return node
}

// ScopeUIDs numbers scopes as a collections manifest shows them: Mayfly's
// scopes have no IDs of their own, so _default is 0 and the others are
// numbered from 8 in the order given (Scopes lists them by name).
func ScopeUIDs(scopes []engine.ScopeInfo) []uint32 {
	out := make([]uint32, len(scopes))
	next := uint32(8)
	for i, s := range scopes {
		if s.Name != "_default" {
			out[i], next = next, next+1
		}
	}
	return out
}

// Topology is a cluster's layout of a bucket's partitions, for the
// configuration a cluster node serves (issue 22 step 3): SDKs send each
// key's requests to its partition's leader, the first server of its
// vBucketMap row.
type Topology struct {
	// Servers are the cluster's nodes, in a stable order (by name): the
	// vBucketServerMap's serverList and nodesExt list them in this order.
	Servers []Server
	// Map has a row per partition: the index in Servers of its leader,
	// then of its other copies; -1 where a copy's node is not known.
	Map [][]int
	// Replicas is how many copies each partition has besides its leader.
	Replicas int
	// Rev says how far the layout has moved (the partition map's changes,
	// the partitions' leadership changes and the nodes' registrations);
	// it only grows, every node reads it alike, and it is added to the
	// configuration's rev so an SDK holding an older layout takes this
	// one.
	Rev int64
}

// Server is one node of a Topology.
type Server struct {
	// Name is the node's name.
	Name string
	// KV and HTTP are its binary KV port's and HTTP API's addresses
	// (host:port), empty when it serves none or is down.
	KV, HTTP string
	// ThisNode says it is the node serving the configuration: it is
	// listed with the configuration's host and ports.
	ThisNode bool
	// Down says the node is down (its lease expired): it is listed at
	// the addresses it published last, "unhealthy".
	Down bool
	// Services are the ports it published for its services (ServicesOf),
	// nil when it published none (a node of an older version): it is then
	// listed with its KV and HTTP ports only (and views on the HTTP port
	// when this node serves them on its own).
	Services *Services
}

// WithTopology returns c (a Terse configuration served from host with
// this node's ports p) laid out over t: serverList, vBucketMap, nodes and
// nodesExt list every server of t in its order.
func (c *Bucket) WithTopology(t *Topology, host string, p Ports) *Bucket {
	if t == nil {
		return c
	}
	out := *c
	out.Rev = c.Rev + 1 + t.Rev // above the single node's and an older layout's, so an SDK takes it
	servers := make([]string, len(t.Servers))
	out.Nodes = nil
	var this Node
	if len(c.Nodes) > 0 {
		this = c.Nodes[0]
	}
	out.NodesExt = nodesExtOf(t.Servers, host, p)
	for i, s := range t.Servers {
		if s.ThisNode {
			servers[i] = HostPort(host, p.KV)
			out.Nodes = append(out.Nodes, this)
			continue
		}
		h, svc := s.services(p)
		_, kv := splitAddr(s.KV)
		servers[i] = s.KV
		node := Node{Hostname: s.HTTP, Ports: map[string]int{"direct": kv}, ClusterMembership: "active", Status: "healthy", Version: Version, Services: services(Ports{KV: kv, FTS: svc.FTS})}
		if svc.Capi != 0 && c.Name != "" {
			node.CouchAPIBase = "http://" + HostPort(h, svc.Capi) + "/" + url.PathEscape(c.Name) + "%2B" + c.UUID
		}
		if s.KV == "" || s.Down {
			node.Status = "unhealthy"
		}
		out.Nodes = append(out.Nodes, node)
	}
	vbm := make([][]int, len(t.Map))
	for i, row := range t.Map {
		vbm[i] = slices.Clone(row)
	}
	out.VBucketServerMap = &VBucketServerMap{HashAlgorithm: "CRC", NumReplicas: t.Replicas, ServerList: servers, VBucketMap: vbm}
	return &out
}

// splitAddr splits host:port, "" and 0 when addr is not one.
func splitAddr(addr string) (string, int) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return "", 0
	}
	return h, n
}
