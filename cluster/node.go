package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mayflydb/mayfly/internal/clustertls"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Defaults of Config.
const (
	// DefaultLeaseTTL is how long a node stays up without renewing its
	// lease.
	DefaultLeaseTTL = 5 * time.Second
	// DefaultFailoverTimeout is how long a node is down before the
	// orchestrator fails its partitions over.
	DefaultFailoverTimeout = 30 * time.Second
	// DefaultFormTimeout is how long Start waits for the etcd cluster to
	// answer.
	DefaultFormTimeout = time.Minute
	// DefaultReconcileInterval is how often the orchestrator compares the
	// maps with the nodes up.
	DefaultReconcileInterval = time.Second
	// DefaultLeaderSettle is how long a node is up before the orchestrator
	// moves preferred leaderships to it.
	DefaultLeaderSettle = 10 * time.Second
)

// Config is what a node needs to join the cluster.
type Config struct {
	// Node is this node's name; it must be in Peers.
	Node string
	// Peers is the peer list, in the order given: its first EtcdMembers
	// run etcd members.
	Peers []Peer
	// DataDir is the node's data directory; an etcd member keeps its data
	// under DataDir/cluster/etcd.
	DataDir string
	// EtcdPeerOffset and EtcdClientOffset place etcd's peer and client
	// ports above each node's cluster port. The default values are 1 and 2.
	EtcdPeerOffset, EtcdClientOffset int
	// LeaseTTL is how long the node stays up in the others' eyes without
	// renewing its lease; it is rounded up to whole seconds. The default
	// value is 5 s.
	LeaseTTL time.Duration
	// FailoverTimeout is how long a node is down before the orchestrator
	// fails its partitions over. The default value is 30 s.
	FailoverTimeout time.Duration
	// FormTimeout bounds Start's wait for the etcd cluster. The default
	// value is 1 minute.
	FormTimeout time.Duration
	// ReconcileInterval is how often the orchestrator checks the maps.
	// The default value is 1 s.
	ReconcileInterval time.Duration
	// TLS, when set, puts etcd's peer and client ports on mutual TLS 1.3
	// with these credentials (https URLs; a member or client without a
	// certificate of the cluster's CA is refused), and the node's etcd
	// client presents its certificate. Every node must have it, or none.
	TLS *clustertls.Creds
	// LeaderSettle is how long a node is up, as the orchestrator sees it,
	// before preferred leaderships are moved to it to even them out (a
	// node that comes and goes is given none), and how long after a
	// failover of some of a bucket's partitions before its leaderships are
	// evened out. The default value is 10 s.
	LeaderSettle time.Duration
	// HTTP, KV, Memcached, Services and Version are published in the
	// node's NodeInfo.
	HTTP, KV, Memcached, Version string
	Services                     map[string]int
	// Logger receives the node's and etcd's messages (etcd's at warn and
	// above); nil discards them.
	Logger *slog.Logger

	test struct {
		noFsync bool // etcd members skip fsync (tests only)
	}
}

// EnsureDefaults fills the zero fields with their default values.
func (c *Config) EnsureDefaults() {
	if c.EtcdPeerOffset == 0 {
		c.EtcdPeerOffset = DefaultEtcdPeerOffset
	}
	if c.EtcdClientOffset == 0 {
		c.EtcdClientOffset = DefaultEtcdClientOffset
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.FailoverTimeout == 0 {
		c.FailoverTimeout = DefaultFailoverTimeout
	}
	if c.FormTimeout == 0 {
		c.FormTimeout = DefaultFormTimeout
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = DefaultReconcileInterval
	}
	if c.LeaderSettle == 0 {
		c.LeaderSettle = DefaultLeaderSettle
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate checks the configuration (after EnsureDefaults).
func (c *Config) Validate() error {
	if c.EtcdPeerOffset < 1 || c.EtcdClientOffset < 1 || c.EtcdPeerOffset == c.EtcdClientOffset {
		return fmt.Errorf("%w: the etcd port offsets must be positive and differ", ErrBadPeers)
	}
	self := -1
	for i, p := range c.Peers {
		if p.Name == c.Node {
			self = i
		}
		if p.Port+max(c.EtcdPeerOffset, c.EtcdClientOffset) > math.MaxUint16 {
			return fmt.Errorf("%w: %s's port %d leaves no room for its etcd ports", ErrBadPeers, p.Name, p.Port)
		}
	}
	if self < 0 {
		return fmt.Errorf("%w: node %q is not in the peer list", ErrBadPeers, c.Node)
	}
	if c.LeaseTTL < time.Second || c.FailoverTimeout <= 0 || c.FormTimeout <= 0 || c.ReconcileInterval <= 0 || c.LeaderSettle < 0 {
		return fmt.Errorf("cluster: the lease must be at least 1s, the timeouts and interval positive, the leader settle time not negative")
	}
	if c.DataDir == "" {
		return fmt.Errorf("cluster: no data directory")
	}
	return nil
}

// Node is this process's part of the cluster: perhaps an etcd member, an
// etcd client, a lease under /mayfly/nodes/, and a candidate for
// orchestrator.
type Node struct {
	cfg    Config
	self   Peer
	logger *slog.Logger
	zap    *zap.Logger
	etcd   *embed.Etcd // nil on a client-only node
	cli    *clientv3.Client

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	crashing atomic.Bool // stop without revoking leases (tests: a crash)
	closing  atomic.Bool // etcd's logs go at debug level

	mu struct {
		sync.Mutex
		orch    *Orchestrator
		session *concurrency.Session // the membership lease's
	}
}

// Start joins the cluster: it starts this node's etcd member when it is
// one of the first EtcdMembers peers, waits (up to FormTimeout) for the
// etcd cluster to answer, registers the node under /mayfly/nodes/ on a
// lease kept alive in the background, and campaigns for orchestrator.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, logger: cfg.Logger}
	n.zap = zapToSlog(cfg.Logger, &n.closing)
	members := cfg.Peers[:EtcdMembers(len(cfg.Peers))]
	for _, p := range cfg.Peers {
		if p.Name == cfg.Node {
			n.self = p
		}
	}
	formCtx, cancelForm := context.WithTimeoutCause(ctx, cfg.FormTimeout, ErrNotFormed)
	defer cancelForm()
	if slices.Contains(members, n.self) {
		e, err := cfg.startMember(formCtx, n.self, members, n.zap)
		if err != nil {
			return nil, err
		}
		n.etcd = e
		if err := waitMember(formCtx, e, cfg.FormTimeout); err != nil {
			n.closeEtcd()
			return nil, err
		}
	}
	// A member's node talks to its own member only: were it given every
	// member, gRPC's round robin would send a share of its requests (its
	// lease's keepalives among them) to a member it is partitioned from,
	// whose connection hangs without an error (packets dropped, nothing
	// refused): on the majority side of a network partition every node
	// lost its lease and timed out reading the map, and the orchestrator
	// never failed the cut node over (make chaos's isolate case). Its own
	// member forwards to etcd's leader, and is cut off exactly when the
	// node is. Any other node keeps every member, and a keepalive ping
	// (gRPC's least interval, 10 s) closes a connection that stopped
	// answering.
	eps := clientEndpoints(cfg.Peers, cfg.scheme(), cfg.EtcdClientOffset)
	if i := slices.Index(members, n.self); i >= 0 {
		eps = eps[i : i+1]
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            eps,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		MaxCallSendMsgSize:   maxRequestBytes + 64<<10, // a request as large as the members take
		Logger:               n.zap,
		TLS:                  cfg.clientTLS(),
	})
	if err != nil {
		n.closeEtcd()
		return nil, fmt.Errorf("cluster: etcd client: %w", err)
	}
	n.cli = cli
	if err := waitAnswer(formCtx, cli, cfg.FormTimeout, cfg.TLS == nil); err != nil {
		n.closing.Store(true)
		cli.Close()
		n.closeEtcd()
		return nil, err
	}
	bg, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	registered := make(chan error, 1)
	n.wg.Add(2)
	go func() { defer n.wg.Done(); n.keepRegistered(bg, registered) }()
	go func() { defer n.wg.Done(); n.campaign(bg) }()
	select {
	case err := <-registered:
		if err != nil {
			n.Close()
			return nil, err
		}
	case <-formCtx.Done():
		n.Close()
		return nil, fmt.Errorf("%w: registering node %s: %w", ErrNotFormed, cfg.Node, context.Cause(formCtx))
	}
	role := "etcd client"
	if n.etcd != nil {
		role = "etcd member"
	}
	n.logger.Info("cluster: joined",
		"node", cfg.Node, "role", role, "peers", len(cfg.Peers), "etcd_members", len(members))
	return n, nil
}

// scheme is the etcd URLs' scheme: https with TLS.
func (c *Config) scheme() string {
	if c.TLS != nil {
		return "https"
	}
	return "http"
}

// clientTLS is the etcd client's TLS configuration, nil without TLS.
func (c *Config) clientTLS() *tls.Config {
	if c.TLS == nil {
		return nil
	}
	return c.TLS.Config()
}

// waitAnswer waits until the etcd cluster answers a linearizable read
// (it has a quorum and a leader); plain says whether the client is
// without TLS (for the error's hint).
func waitAnswer(ctx context.Context, cli *clientv3.Client, timeout time.Duration, plain bool) error {
	for {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Get(tctx, "/mayfly/health")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w within %v (no quorum of etcd members answered at %v; are they started %s?): last error: %w",
				ErrNotFormed, timeout, cli.Endpoints(), tlsMode(plain), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Client is the node's etcd client.
func (n *Node) Client() *clientv3.Client { return n.cli }

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Node }

// IsMember reports whether the node runs an etcd member.
func (n *Node) IsMember() bool { return n.etcd != nil }

// Orchestrator is the node's orchestration handle while it is the elected
// orchestrator, nil otherwise.
func (n *Node) Orchestrator() *Orchestrator {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.orch
}

// leaseSeconds is the lease TTL in whole seconds, rounded up.
func (n *Node) leaseSeconds() int { return int(math.Ceil(n.cfg.LeaseTTL.Seconds())) }

// keepRegistered holds the node's key under /mayfly/nodes/ on a lease,
// registering again (on a new lease) whenever the lease is lost, until ctx
// ends. The first registration's outcome goes to first.
func (n *Node) keepRegistered(ctx context.Context, first chan<- error) {
	info := NodeInfo{Name: n.cfg.Node, Cluster: n.self.Addr(), HTTP: n.cfg.HTTP, KV: n.cfg.KV, Memcached: n.cfg.Memcached, Version: n.cfg.Version,
		Services: n.cfg.Services, Started: time.Now().UTC()} // wall clock: shown to operators
	if n.etcd != nil {
		pu, cu := n.self.url(n.cfg.scheme(), n.cfg.EtcdPeerOffset), n.self.url(n.cfg.scheme(), n.cfg.EtcdClientOffset)
		info.EtcdPeer, info.EtcdClient = pu.String(), cu.String()
	}
	data, err := json.Marshal(info)
	if err != nil {
		first <- err
		return
	}
	for ctx.Err() == nil {
		s, err := concurrency.NewSession(n.cli, concurrency.WithTTL(n.leaseSeconds()), concurrency.WithContext(ctx))
		if err == nil {
			_, err = n.cli.Put(ctx, nodesPrefix+n.cfg.Node, string(data), clientv3.WithLease(s.Lease()))
			if err != nil {
				s.Orphan()
			}
		}
		if err != nil {
			if first != nil {
				first <- fmt.Errorf("cluster: registering node %s: %w", n.cfg.Node, err)
				return
			}
			n.logger.Warn("cluster: registering the node again failed", "err", err)
			sleepCtx(ctx, time.Second)
			continue
		}
		n.mu.Lock()
		n.mu.session = s
		n.mu.Unlock()
		if first != nil {
			first <- nil
			first = nil
		}
		select {
		case <-s.Done():
			n.logger.Warn("cluster: the node's lease was lost; registering again", "node", n.cfg.Node)
		case <-ctx.Done():
		}
	}
}

// campaign runs for orchestrator until ctx ends: each won term runs the
// reconcile loop until its session's lease is lost.
func (n *Node) campaign(ctx context.Context) {
	for ctx.Err() == nil {
		s, err := concurrency.NewSession(n.cli, concurrency.WithTTL(n.leaseSeconds()), concurrency.WithContext(ctx))
		if err != nil {
			sleepCtx(ctx, time.Second)
			continue
		}
		termCtx, endTerm := context.WithCancel(ctx)
		go func() {
			select {
			case <-s.Done():
			case <-termCtx.Done():
			}
			endTerm()
		}()
		el := concurrency.NewElection(s, orchestratorPrefix)
		if err := el.Campaign(termCtx, n.cfg.Node); err == nil {
			n.orchestrate(termCtx, el)
		}
		endTerm()
		s.Orphan()
		if ctx.Err() != nil {
			// Closing: give the term (or the place in the queue) up at
			// once rather than leaving it until the lease expires.
			if !n.crashing.Load() {
				n.revoke(s.Lease())
			}
			return
		}
	}
}

// orchestrate runs one term: reconcile every ReconcileInterval until ctx
// ends.
func (n *Node) orchestrate(ctx context.Context, el *concurrency.Election) {
	o := &Orchestrator{cli: n.cli, node: n.cfg.Node, key: el.Key(), rev: el.Rev(), failover: n.cfg.FailoverTimeout,
		settle: n.cfg.LeaderSettle, logger: n.logger, downSince: map[string]time.Time{},
		upSince: map[string]time.Time{}, movedAt: map[string]time.Time{},
		started: time.Now()} // wall clock: failover timeouts are real time between nodes
	for _, p := range n.cfg.Peers {
		o.peers = append(o.peers, p.Name)
	}
	n.mu.Lock()
	n.mu.orch = o
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.mu.orch = nil
		n.mu.Unlock()
	}()
	n.logger.Info("cluster: this node is the orchestrator", "node", n.cfg.Node)
	t := time.NewTicker(n.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		if err := o.reconcile(ctx); err != nil && ctx.Err() == nil {
			if errors.Is(err, ErrDeposed) {
				n.logger.Warn("cluster: deposed as orchestrator", "err", err)
				return
			}
			n.logger.Warn("cluster: reconciling the partition maps", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Close leaves the cluster in order: it gives up the orchestrator's term,
// revokes the node's lease (the others see it down at once), closes the
// client and stops the etcd member.
func (n *Node) Close() error {
	return n.stop(true)
}

// stop ends the node's loops; with revoke, it revokes the membership lease
// (a crash leaves it to expire).
func (n *Node) stop(revoke bool) error {
	n.crashing.Store(!revoke)
	n.closing.Store(true)
	if n.cancel != nil {
		n.cancel()
	}
	clientClosed := false
	if !waitGroupFor(&n.wg, stopWait) && n.cli != nil {
		// A loop waits on etcd without a quorum: an election given up
		// while campaigning resigns under the client's own context
		// (concurrency.Election.Campaign), which nothing else ends.
		// Closing the client ends it; the lease then expires by itself.
		n.logger.Warn("cluster: stopping without a quorum; closing the connection to etcd", "node", n.cfg.Node, "waited", stopWait)
		n.cli.Close()
		clientClosed = true
		n.wg.Wait()
	}
	n.mu.Lock()
	s := n.mu.session
	n.mu.Unlock()
	if s != nil {
		s.Orphan()
		if revoke && !clientClosed {
			n.revoke(s.Lease())
		}
	}
	var err error
	if n.cli != nil && !clientClosed {
		err = n.cli.Close()
	}
	n.closeEtcd()
	return err
}

// stopWait bounds how long stop waits for the node's loops before it
// closes the etcd client under them (a quorum answers in milliseconds).
const stopWait = 5 * time.Second

// waitGroupFor waits for wg up to d and reports whether it finished.
func waitGroupFor(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// revoke revokes a lease, waiting a second at most (a quorum answers in
// milliseconds; without one, the lease expires anyway).
func (n *Node) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := n.cli.Revoke(ctx, id); err != nil {
		n.logger.Debug("cluster: revoking a lease", "err", err)
	}
}

// etcdTransferWait bounds the hand-over of etcd's leadership when a
// member that leads it stops (closeEtcd).
const etcdTransferWait = time.Second

// closeEtcd stops the embedded member, if any.
func (n *Node) closeEtcd() {
	n.closing.Store(true)
	if n.etcd != nil {
		select {
		case <-n.etcd.Server.ReadyNotify():
		default:
			// A member that never became ready must be stopped first:
			// Close waits for client servers that only start once ready.
			n.etcd.Server.Stop()
		}
		// Close first hands etcd's leadership on when this member leads,
		// waiting up to etcd's request timeout (7 s here) for the member
		// it picked. When the other members stop at the same moment (a
		// whole cluster shut down) that one never takes it, and the stop
		// took those 7 s. A transfer to a member up takes milliseconds:
		// past etcdTransferWait the member stops without it (the others,
		// if any are left, elect a leader as after a crash).
		hard := time.AfterFunc(etcdTransferWait, n.etcd.Server.HardStop)
		n.etcd.Close()
		hard.Stop()
		n.etcd = nil
	}
}

// Connect is an etcd client of the cluster whose members answer at
// endpoints (etcd client URLs), once the cluster answers a read (up to
// timeout: ErrNotFormed after). For tools such as `mayfly cluster
// status`; logger receives the client's warnings (nil discards them).
func Connect(ctx context.Context, endpoints []string, timeout time.Duration, logger *slog.Logger) (*clientv3.Client, error) {
	return ConnectTLS(ctx, endpoints, nil, timeout, logger)
}

// ConnectTLS is Connect to a cluster on mutual TLS (https endpoints) with
// creds (nil: Connect).
func ConnectTLS(ctx context.Context, endpoints []string, creds *clustertls.Creds, timeout time.Duration, logger *slog.Logger) (*clientv3.Client, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg := Config{TLS: creds}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, MaxCallSendMsgSize: maxRequestBytes + 64<<10,
		Logger: zapToSlog(logger, nil), TLS: cfg.clientTLS()})
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd client: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := waitAnswer(wctx, cli, timeout, creds == nil); err != nil {
		cli.Close()
		return nil, err
	}
	return cli, nil
}
