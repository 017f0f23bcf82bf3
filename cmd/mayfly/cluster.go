package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/clusterconfig"
	"github.com/mayflydb/mayfly/internal/netaddr"
	"github.com/mayflydb/mayfly/replica"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// replicatedNote is said wherever the cluster shows itself: what step 2b of
// issue 22 does and does not do yet.
const replicatedNote = "Documents are replicated, a Raft group per partition (issue 22 step 2b), and any node takes any document request (step 3): HTTP and memcached requests are forwarded to the leader of the key's partition, the KV port answers NOT_MY_VBUCKET with the cluster's configuration naming it"

// clusterFlags are serve's cluster flags.
type clusterFlags struct {
	node         string
	peers        string
	peerOffset   int
	clientOffset int
	lease        time.Duration
	failover     time.Duration
	form         time.Duration
	remote       bool
	raftTick     time.Duration
	tlsDir       string // --cluster-tls (clustertls.go)
}

// addClusterFlags defines serve's cluster flags on fs.
func addClusterFlags(fs *pflag.FlagSet, c *clusterFlags) {
	fs.StringVar(&c.node, "node", "", "this node's name in --peers (required with --peers)")
	fs.StringVar(&c.peers, "peers", "", "join a cluster: n1=HOST:PORT,n2=HOST:PORT,... each node's cluster port P (replication's transport); the first 3 (5 when 5 or more) run an embedded etcd member on P+1 (peer) and P+2 (client), data in <data>/cluster/etcd. Without it: a single node, no etcd. "+replicatedNote)
	fs.IntVar(&c.peerOffset, "cluster-etcd-peer-offset", cluster.DefaultEtcdPeerOffset, "etcd's peer port is each node's cluster port plus this (the same on every node)")
	fs.IntVar(&c.clientOffset, "cluster-etcd-client-offset", cluster.DefaultEtcdClientOffset, "etcd's client port is each node's cluster port plus this (the same on every node)")
	fs.DurationVar(&c.lease, "cluster-lease", cluster.DefaultLeaseTTL, "a node that has not renewed its lease for this long is down (whole seconds)")
	fs.DurationVar(&c.failover, "cluster-failover-timeout", cluster.DefaultFailoverTimeout, "a node down this long has its partitions failed over (to spare nodes, or marked degraded)")
	fs.DurationVar(&c.form, "cluster-form-timeout", cluster.DefaultFormTimeout, "how long start-up waits for a quorum of etcd members")
	fs.DurationVar(&c.raftTick, "cluster-raft-tick", replica.DefaultTickInterval, "the Raft tick of every partition's group: a leader heartbeats each tick, a follower that hears nothing for 10 to 20 ticks starts an election (a longer tick costs less CPU when idle and fails over later)")
	fs.BoolVar(&c.remote, "cluster-allow-remote", false, "let this node's cluster and etcd ports listen beyond loopback without --cluster-tls (they then have no authentication: whoever reaches them can rewrite the cluster's state)")
	addClusterTLSFlag(fs, c)
}

// check checks the cluster flags.
func (c *clusterFlags) check() error {
	if c.peers == "" {
		if c.node != "" {
			return &usageError{"--node goes with --peers"}
		}
		if c.tlsDir != "" {
			return &usageError{"--cluster-tls goes with --peers"}
		}
		return nil
	}
	if c.node == "" {
		return &usageError{"--peers needs --node (this node's name in the list)"}
	}
	if c.raftTick < time.Millisecond {
		return &usageError{fmt.Sprintf("--cluster-raft-tick %v: at least 1ms", c.raftTick)}
	}
	cfg, err := c.config()
	if err != nil {
		return &usageError{err.Error()}
	}
	cfg.DataDir = "." // checked at start
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return &usageError{err.Error()}
	}
	for i, p := range cfg.Peers {
		if p.Name == c.node && i < cluster.EtcdMembers(len(cfg.Peers)) && !c.remote && cfg.TLS == nil && !netaddr.IsLoopback(p.Addr()) {
			return &usageError{fmt.Sprintf("--peers: %s's etcd ports on %s listen beyond loopback and without --cluster-tls have no authentication: give --cluster-tls DIR (mayfly cluster certs), or add --cluster-allow-remote to mean it", p.Name, p.Host)}
		}
	}
	return nil
}

// config is the cluster configuration the flags give (without the data
// directory, addresses and logger).
func (c *clusterFlags) config() (cluster.Config, error) {
	peers, err := cluster.ParsePeers(c.peers)
	if err != nil {
		return cluster.Config{}, fmt.Errorf("--peers: %w", err)
	}
	creds, err := c.creds()
	if err != nil {
		return cluster.Config{}, err
	}
	return cluster.Config{Node: c.node, Peers: peers, EtcdPeerOffset: c.peerOffset, EtcdClientOffset: c.clientOffset,
		LeaseTTL: c.lease, FailoverTimeout: c.failover, FormTimeout: c.form, TLS: creds}, nil
}

// startClusterNode joins the cluster --peers names and keeps the node's
// buckets in line with the cluster's bucket definitions (clusterbuckets.go):
// at start it drops the buckets the cluster deleted while it was down and
// defines there those it has that the cluster does not; from then on it
// creates, changes and deletes its buckets as the definitions do.
//
// The node publishes its addresses and the ports of its services (ports,
// as its own cluster configuration lists them), so that every node lists
// it with all of them.
func startClusterNode(ctx context.Context, cfg *serveConfig, eng *engine.Engine, httpAddr, kvAddr, mcAddr string, ports clusterconfig.Ports, stdout io.Writer, logger *slog.Logger) (*cluster.Node, *replication, error) {
	cc, err := cfg.cl.config()
	if err != nil {
		return nil, nil, err
	}
	// The addresses the other nodes and clients are told: a port listening
	// on every interface ("[::]:8091") is reached at this node's host in
	// --peers.
	for _, p := range cc.Peers {
		if p.Name == cc.Node {
			httpAddr, kvAddr, mcAddr = advertised(httpAddr, p.Host), advertised(kvAddr, p.Host), advertised(mcAddr, p.Host)
		}
	}
	cc.DataDir, cc.HTTP, cc.KV, cc.Memcached, cc.Version, cc.Logger = cfg.data, httpAddr, kvAddr, mcAddr, clusterconfig.Version, logger
	cc.Services = clusterconfig.ServiceMap(ports)
	logger.Warn("cluster: " + replicatedNote)
	n, err := cluster.Start(ctx, cc)
	if err != nil {
		return nil, nil, err
	}
	repl, err := startReplication(cfg, n, logger)
	if err != nil {
		n.Close()
		return nil, nil, err
	}
	// The buckets open now, and each one created later (over HTTP, or
	// from another node's definition): the orchestrator places the
	// partitions of those the cluster defines, and their writes go
	// through their partitions' Raft groups.
	cb := newClusterBuckets(n, eng, repl, logger)
	if err := cb.dropDeleted(ctx); err != nil {
		repl.Close()
		n.Close()
		return nil, nil, err
	}
	cb.starting.Store(true)
	err = eng.Attach(ctx, cb)
	cb.starting.Store(false)
	if err != nil {
		repl.Close()
		n.Close()
		return nil, nil, err
	}
	if err := eng.Attach(ctx, repl); err != nil {
		repl.Close()
		n.Close()
		return nil, nil, err
	}
	repl.wg.Go(func() { cluster.WatchBuckets(repl.ctx, n.Client(), cb.localNames, cb.follow) })
	role := "an etcd client"
	if n.IsMember() {
		role = "an etcd member"
	}
	fmt.Fprintf(stdout, "mayfly: cluster node %s, %s, in a cluster of %d, replicating on %s. %s\n", cc.Node, role, len(cc.Peers), repl.h.Addr(), replicatedNote)
	return n, repl, nil
}

// clusterView is httpapi.Options.Cluster for node n (nil without one),
// which serves ports: the other nodes for GET /pools/default's "nodes"
// (clusterconfig.PoolNode: each with its own couchApiBase), Couchbase's
// "balanced", and the status `mayfly cluster status` prints, with this
// node's name (Status.ThisNode), as "mayflyCluster" (the console's Cluster page),
// with only the buckets sees reports true for (the caller's: the others'
// names, partitions and health are not theirs to read); "balanced" is the
// whole cluster's, as Couchbase's. A cluster whose etcd has no quorum fails
// the request after a few seconds rather than hang it.
func clusterView(n *cluster.Node, ports clusterconfig.Ports) func(ctx context.Context, sees func(bucket string) bool) (*httpapi.ClusterView, error) {
	if n == nil {
		return nil
	}
	return func(ctx context.Context, sees func(bucket string) bool) (*httpapi.ClusterView, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		st, err := cluster.ReadStatus(ctx, n.Client(), nil)
		if err != nil {
			return nil, err
		}
		st.ThisNode = n.Name()
		out := &httpapi.ClusterView{Balanced: st.Balanced(), Status: st}
		st.Buckets = slices.DeleteFunc(st.Buckets, func(bs cluster.BucketStatus) bool { return !sees(bs.Name) })
		for _, ns := range st.Nodes {
			if ns.Name == n.Name() {
				continue
			}
			s := clusterconfig.Server{Name: ns.Name, Down: ns.Info == nil}
			if ns.Info != nil {
				s.KV, s.HTTP, s.Services = ns.Info.KV, ns.Info.HTTP, clusterconfig.ServicesOf(ns.Info.Services)
			}
			node := clusterconfig.PoolNode(s, ports)
			node.Version = "" // a node down says no version, not this node's
			if ns.Info != nil {
				node.Version = ns.Info.Version
			}
			out.Nodes = append(out.Nodes, node)
		}
		return out, nil
	}
}

// newClusterCmd is `mayfly cluster`.
func newClusterCmd() *cobra.Command {
	return groupCmd("cluster", "The cluster's state (issue 22 step 1)",
		"The cluster's state as its etcd holds it. "+replicatedNote+".", newClusterStatusCmd(), newClusterCertsCmd())
}

// newClusterStatusCmd is `mayfly cluster status`.
func newClusterStatusCmd() *cobra.Command {
	var peers, endpoints string
	var clientOffset int
	var timeout time.Duration
	var asJSON bool
	var st statusTLS
	cmd := &cobra.Command{
		Use:   "status [--peers n1=HOST:PORT,... | --endpoints URL,...] [--cluster-tls DIR --node NAME]",
		Short: "Nodes up and down, the orchestrator, partitions led per node, degraded partitions",
		Long: `Reads the cluster's state from its etcd: each node up or down (its lease),
the elected orchestrator, and per bucket the partitions each node leads and
holds and the degraded ones. Give the peer list serve was given (its etcd
members' client ports are found from it) or etcd's client URLs.
` + replicatedNote + ".",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var eps, names []string
			switch {
			case endpoints != "" && peers != "":
				return &usageError{"give --peers or --endpoints, not both"}
			case endpoints != "":
				eps = strings.Split(endpoints, ",")
			case peers != "":
				ps, err := cluster.ParsePeers(peers)
				if err != nil {
					return &usageError{"--peers: " + err.Error()}
				}
				eps = st.endpoints(ps, clientOffset)
				for _, p := range ps {
					names = append(names, p.Name)
				}
			default:
				return &usageError{"needs --peers or --endpoints"}
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			cli, err := st.connect(ctx, eps, timeout)
			if err != nil {
				return err
			}
			defer cli.Close()
			st, err := cluster.ReadStatus(ctx, cli, names)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return st.WriteText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&peers, "peers", "", "the cluster's peer list, as given to serve")
	f.StringVar(&endpoints, "endpoints", "", "etcd client URLs, comma-separated (http://HOST:P+2)")
	f.IntVar(&clientOffset, "cluster-etcd-client-offset", cluster.DefaultEtcdClientOffset, "as given to serve")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for the cluster's etcd to answer")
	f.BoolVar(&asJSON, "json", false, "print the status as JSON")
	st.addFlags(f)
	return cmd
}

// advertised is the address others reach a listener at, addr, on: addr
// itself, or host with addr's port when addr's host is unspecified (the
// listener takes every interface).
func advertised(addr, host string) string {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(h); h == "" || ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort(host, port)
	}
	return addr
}

// viewCoverage keeps, for the HTTP API, which node answers for which
// partitions of a bucket's views, under a revision (nil before the bucket
// is placed: the node answers alone). Once the orchestrator has written
// the bucket's coverage map (cluster.CoverageMap), each partition's
// coverer there, under the coverage map's mod revision: a coverer that is
// down is named all the same (its share fails, node_down) until the
// orchestrator switches its partitions to a next coverer that caught up.
// Before, as coverageOf computes it from the partition map, under the
// map's revision (every node then indexes every partition it holds).
//
// The maps, the coverage maps and the nodes up come from the node's
// cluster.TopologyMirror (etcd watches, no read per query), and the
// coverage computed is kept per bucket until its revision or the nodes up
// change. A query before the mirror's first load waits for it (up to
// mirrorWait).
//
// Listings and the item count read documents, not view indexes: their
// coverage (copiesFunc) is always coverageOf's, which replaces a node down
// as soon as its lease expires.
type viewCoverage struct {
	self   string
	scheme string
	mirror *cluster.TopologyMirror

	mu         sync.Mutex
	kept       map[string]keptCoverage // by bucket
	keptCopies map[string]keptCoverage // by bucket, coverageOf's (copiesFunc)
}

// keptCoverage is a coverage computed, with what it was computed from.
type keptCoverage struct {
	rev      int64 // the coverage map's revision, or the partition map's
	fromMap  bool  // computed from the partition map (no coverage map)
	nodesGen uint64
	cov      *httpapi.ViewCoverage
}

// shareWait bounds how long a node asked for its share under a revision
// its mirror has not reached waits for it (then it answers
// coverage_changed and the querying node asks again).
const shareWait = 2 * time.Second

// newViewCoverage returns the coverage of the node named self, from its
// mirror.
func newViewCoverage(self string, mirror *cluster.TopologyMirror, scheme string) *viewCoverage {
	return &viewCoverage{self: self, scheme: scheme, mirror: mirror, kept: map[string]keptCoverage{}, keptCopies: map[string]keptCoverage{}}
}

// coverageFunc returns the HTTP API's ViewCoverage; nil without a cluster.
func (v *viewCoverage) coverageFunc() func(context.Context, string, int64) (*httpapi.ViewCoverage, error) {
	if v == nil {
		return nil
	}
	return v.coverage
}

// copiesFunc returns the HTTP API's CopyCoverage; nil without a cluster.
func (v *viewCoverage) copiesFunc() func(context.Context, string, int64) (*httpapi.ViewCoverage, error) {
	if v == nil {
		return nil
	}
	return func(ctx context.Context, bucket string, atLeast int64) (*httpapi.ViewCoverage, error) {
		return v.coverageKind(ctx, bucket, atLeast, true)
	}
}

// coverage returns bucket's views' coverage. atLeast, a share request's
// revision, above the revision the mirror holds waits (up to shareWait)
// for the mirror to reach it.
func (v *viewCoverage) coverage(ctx context.Context, bucket string, atLeast int64) (*httpapi.ViewCoverage, error) {
	return v.coverageKind(ctx, bucket, atLeast, false)
}

// coverageKind is coverage, or with copies the listings' (coverageOf's
// from the partition map, whatever the coverage map says).
func (v *viewCoverage) coverageKind(ctx context.Context, bucket string, atLeast int64, copies bool) (*httpapi.ViewCoverage, error) {
	if !v.mirror.Loaded() {
		wctx, cancel := context.WithTimeout(ctx, mirrorWait)
		err := v.mirror.WaitLoaded(wctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%w: views: %w", engine.ErrTempFail, err)
		}
	}
	m, c, rev, err := v.read(bucket, copies)
	if err == nil && m != nil && atLeast > rev {
		// Until the key the revision is of (the coverage map's, or the
		// partition map's) reaches it in the mirror: each watch moves
		// only with its own keys' changes, so neither can be waited on
		// for the other's revision.
		wctx, cancel := context.WithTimeout(ctx, shareWait)
		for {
			changed := v.mirror.Changed()
			if m, c, rev, err = v.read(bucket, copies); err != nil || m == nil || rev >= atLeast {
				break
			}
			select {
			case <-changed:
				continue
			case <-wctx.Done():
			}
			break
		}
		cancel()
	}
	nodes, gen, _ := v.mirror.Nodes()
	if err != nil || m == nil {
		return nil, err
	}
	kept := v.kept
	if copies {
		kept = v.keptCopies
	}
	v.mu.Lock()
	k, ok := kept[bucket]
	v.mu.Unlock()
	if ok && k.rev == rev && k.fromMap == (c == nil) && k.nodesGen == gen {
		return k.cov, nil
	}
	self := v.self
	up := func(name string) bool { return name == self || nodes[name].HTTP != "" }
	var cov *httpapi.ViewCoverage
	if c != nil {
		cov = coverageFrom(c, rev, self)
	} else {
		cov = coverageOf(m, rev, self, up)
	}
	for i, c := range cov.Nodes {
		if !c.Self && up(c.Name) {
			cov.Nodes[i].URL = v.scheme + "://" + nodes[c.Name].HTTP
		}
	}
	v.mu.Lock()
	if k, ok := kept[bucket]; !ok || k.rev < rev || k.rev == rev && k.nodesGen < gen {
		kept[bucket] = keptCoverage{rev: rev, fromMap: c == nil, nodesGen: gen, cov: cov}
	}
	v.mu.Unlock()
	return cov, nil
}

// read returns bucket's partition map and, when the orchestrator has
// written one for the map's incarnation (and copies is false), its
// coverage map, with the revision the coverage goes by: the coverage
// map's, else the partition map's.
func (v *viewCoverage) read(bucket string, copies bool) (*cluster.PartitionMap, *cluster.CoverageMap, int64, error) {
	m, rev, _, err := v.mirror.Map(bucket)
	if err != nil || m == nil || copies {
		return m, nil, rev, err
	}
	c, crev, _, err := v.mirror.Coverage(bucket)
	if err != nil {
		return nil, nil, 0, err
	}
	if c == nil || c.UUID != m.UUID || len(c.Partitions) != len(m.Partitions) {
		return m, nil, rev, nil
	}
	return m, c, crev, nil
}

// coverageFrom is the coverage a coverage map c at revision rev gives:
// each partition to its coverer (those without one have no copy anywhere
// and no rows); self is this node's name.
func coverageFrom(c *cluster.CoverageMap, rev int64, self string) *httpapi.ViewCoverage {
	cov := &httpapi.ViewCoverage{Rev: rev}
	at := map[string]int{}
	for p, e := range c.Partitions {
		if e.Coverer == "" {
			continue
		}
		i, ok := at[e.Coverer]
		if !ok {
			i = len(cov.Nodes)
			at[e.Coverer] = i
			cov.Nodes = append(cov.Nodes, httpapi.Coverer{Name: e.Coverer, Self: e.Coverer == self})
		}
		cov.Nodes[i].Partitions = append(cov.Nodes[i].Partitions, p)
	}
	return cov
}

// coverageOf gives each partition of m with a leader to that leader if it
// is up, else to a voter of the partition that is up (self, this node's
// name, first; then the one given the fewest partitions so far), else to
// the leader all the same (its share fails: the query names it), under
// revision rev. Partitions without a leader have no copy anywhere and no
// coverer.
func coverageOf(m *cluster.PartitionMap, rev int64, self string, up func(string) bool) *httpapi.ViewCoverage {
	cov := &httpapi.ViewCoverage{Rev: rev}
	at := map[string]int{}
	add := func(node string, p int) {
		i, ok := at[node]
		if !ok {
			i = len(cov.Nodes)
			at[node] = i
			cov.Nodes = append(cov.Nodes, httpapi.Coverer{Name: node, Self: node == self})
		}
		cov.Nodes[i].Partitions = append(cov.Nodes[i].Partitions, p)
	}
	load := func(node string) int {
		if i, ok := at[node]; ok {
			return len(cov.Nodes[i].Partitions)
		}
		return 0
	}
	for p, e := range m.Partitions {
		if e.Leader == "" {
			continue
		}
		by := e.Leader
		if !up(by) {
			best := ""
			for _, v := range e.Voters {
				switch {
				case !up(v):
				case v == self:
					best = v
				case best != self && (best == "" || load(v) < load(best)):
					best = v
				}
			}
			if best != "" {
				by = best
			}
		}
		add(by, p)
	}
	return cov
}
