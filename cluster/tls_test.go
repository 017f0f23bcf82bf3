package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/internal/clustertls"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestTLSClusterRefusesClientsWithoutCert starts three members on mutual
// TLS and checks: they form a cluster and publish https URLs; an etcd
// client with the cluster's credentials reads and writes; a plain client,
// and a TLS client that trusts the CA but presents no certificate, are
// refused at the client port (whoever reaches it could rewrite the
// cluster's state); and a node started without TLS cannot join, saying
// why.
func TestTLSClusterRefusesClientsWithoutCert(t *testing.T) {
	ctx := context.Background()
	peers := testPeers(t, 4)
	dir := t.TempDir()
	var specs []clustertls.Node
	for _, p := range peers {
		specs = append(specs, clustertls.Node{Name: p.Name, Hosts: []string{p.Host}})
	}
	if _, err := clustertls.Generate(dir, specs, clustertls.GenerateOptions{}); err != nil {
		t.Fatal(err)
	}
	logs := &syncLog{}
	var cfgs []Config
	creds := map[string]*clustertls.Creds{}
	for _, p := range peers[:3] {
		c := testConfig(t, peers, p.Name, t.TempDir(), logs)
		cr, err := clustertls.Load(dir, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		c.TLS, creds[p.Name] = cr, cr
		cfgs = append(cfgs, c)
	}
	nodes := startAll(t, ctx, cfgs)
	defer closeAll(nodes)
	info, err := ReadNode(ctx, nodes[0].Client(), "n2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.EtcdClient, "https://") || !strings.HasPrefix(info.EtcdPeer, "https://") {
		t.Errorf("n2's etcd URLs %q %q, want https", info.EtcdPeer, info.EtcdClient)
	}

	eps := TLSClientEndpoints(peers, 0)
	cli, err := ConnectTLS(ctx, eps, creds["n1"], 30*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/mayfly/test", "x"); err != nil {
		t.Errorf("a client with the cluster's certificate cannot write: %v", err)
	}
	cli.Close()

	// Without a certificate: refused (ErrNotFormed after the timeout, as
	// no member answers).
	if cli, err := Connect(ctx, eps, time.Second, nil); !errors.Is(err, ErrNotFormed) {
		if cli != nil {
			cli.Close()
		}
		t.Errorf("a plain client at the TLS client ports: %v, want refused", err)
	}
	if cli, err := Connect(ctx, ClientEndpoints(peers, 0), time.Second, nil); !errors.Is(err, ErrNotFormed) {
		if cli != nil {
			cli.Close()
		}
		t.Errorf("an http client at the TLS client ports: %v, want refused", err)
	}
	nocert, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{RootCAs: creds["n1"].CA, MinVersion: tls.VersionTLS13}})
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = nocert.Put(tctx, "/mayfly/buckets/evil", "{}")
	cancel()
	nocert.Close()
	if err == nil {
		t.Error("a TLS client without a certificate wrote to the cluster's state")
	}

	// A fourth node (an etcd client) without TLS cannot join.
	plain := testConfig(t, peers, "n4", t.TempDir(), logs)
	plain.FormTimeout = 2 * time.Second
	if n, err := Start(ctx, plain); err == nil {
		n.Close()
		t.Fatal("a node without TLS joined a TLS cluster")
	} else if !errors.Is(err, ErrNotFormed) || !strings.Contains(err.Error(), "without --cluster-tls") {
		t.Errorf("a plain node joining a TLS cluster: %v, want ErrNotFormed naming --cluster-tls", err)
	}
}
