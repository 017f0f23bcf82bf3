package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdDir is where a member keeps its data, under the node's data
// directory.
func etcdDir(data string) string { return filepath.Join(data, "cluster", "etcd") }

// bindURL is u with its host resolved to an IP, as etcd binds only to IPs
// (or localhost).
func bindURL(ctx context.Context, u url.URL) (url.URL, error) {
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return u, err
	}
	if host == "localhost" || net.ParseIP(host) != nil {
		return u, nil
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return u, fmt.Errorf("resolving %q: %w", host, err)
	}
	u.Host = net.JoinHostPort(ips[0].IP.String(), port)
	return u, nil
}

// The etcd members' limits on one transaction: its operations and its
// request's size (the clients send up to maxRequestBytes too).
const (
	maxTxnOps       = 16384
	maxRequestBytes = 8 << 20
)

// startMember starts the embedded etcd member of self, one of members,
// keeping its data under data/cluster/etcd (a restart finds it there and
// rejoins with it). It does not wait for the cluster to form.
func (c *Config) startMember(ctx context.Context, self Peer, members []Peer, lg *zap.Logger) (*embed.Etcd, error) {
	ec := embed.NewConfig()
	ec.Name = self.Name
	ec.Dir = etcdDir(c.DataDir)
	peerURL, clientURL := self.url(c.scheme(), c.EtcdPeerOffset), self.url(c.scheme(), c.EtcdClientOffset)
	lp, err := bindURL(ctx, peerURL)
	if err != nil {
		return nil, err
	}
	lc, err := bindURL(ctx, clientURL)
	if err != nil {
		return nil, err
	}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{lp}, []url.URL{peerURL}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{lc}, []url.URL{clientURL}
	var initial []string
	for _, m := range members {
		u := m.url(c.scheme(), c.EtcdPeerOffset)
		initial = append(initial, m.Name+"="+u.String())
	}
	ec.InitialCluster = strings.Join(initial, ",")
	ec.InitialClusterToken = "mayfly"
	ec.ClusterState = embed.ClusterStateFlagNew
	ec.Logger = "zap"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	// The cluster state is small; keep an hour of history.
	ec.AutoCompactionMode = "periodic"
	ec.AutoCompactionRetention = "1h"
	// A bucket's deletion takes its roles from the cluster's users in its
	// own transaction, one write per user holding one (buckets.go): etcd's
	// defaults (128 operations, 1.5 MiB a request) refused it past about
	// 120 such users. A user's entry is about 1 KiB, so these bound it at
	// about 8000.
	ec.MaxTxnOps = maxTxnOps
	ec.MaxRequestBytes = maxRequestBytes
	// Nodes speak gRPC only: no JSON gateway on the client port.
	ec.EnableGRPCGateway = false
	ec.UnsafeNoFsync = c.test.noFsync
	if c.TLS != nil {
		// Mutual TLS on both ports: a member or client without a
		// certificate of the cluster's CA is refused at the handshake.
		info := transport.TLSInfo{CertFile: c.TLS.CertFile(), KeyFile: c.TLS.KeyFile(), TrustedCAFile: c.TLS.CAFile(),
			ClientCertAuth: true, MinVersion: tls.VersionTLS13}
		ec.PeerTLSInfo, ec.ClientTLSInfo = info, info
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("cluster: starting the etcd member %s (peer %s, client %s, data %s): %w",
			self.Name, peerURL.Host, clientURL.Host, ec.Dir, err)
	}
	return e, nil
}

// waitMember waits until e has joined a quorum, ctx ends or e fails.
func waitMember(ctx context.Context, e *embed.Etcd, timeout time.Duration) error {
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("cluster: the etcd member stopped: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("%w within %v: this member found no quorum (are the other members started, their etcd peer ports reachable, and all of them %s?): %w",
			ErrNotFormed, timeout, tlsMode(e.Config().PeerTLSInfo.Empty()), context.Cause(ctx))
	}
}

// tlsMode says what every node of the cluster must share with one
// started without (plain) or with the cluster's mutual TLS: a node of
// each kind cannot speak to the other.
func tlsMode(plain bool) string {
	if plain {
		return "without --cluster-tls as this one"
	}
	return "with --cluster-tls and its CA as this one"
}
