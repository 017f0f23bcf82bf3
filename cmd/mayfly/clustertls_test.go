package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/cluster"
	"github.com/mayflydb/mayfly/replica"
)

// TestClusterCerts checks `mayfly cluster certs`: the CA and each node's
// files are written, keys 0600, each node's certificate chains to the CA
// with its hosts (from --peers and --node), a second run keeps the CA and
// a CA key is never replaced untold.
func TestClusterCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, out, errOut := runCmd("cluster", "certs", "--out", dir, "--peers", "n1=127.0.0.1:7000,n2=10.0.0.2:7000", "--node", "n2=db2.example")
	if code != 0 || !strings.Contains(out, "made the cluster's CA") {
		t.Fatalf("certs: %d %q %q", code, out, errOut)
	}
	for f, mode := range map[string]os.FileMode{"ca.pem": 0o644, "ca-key.pem": 0o600, "n1.pem": 0o644, "n1-key.pem": 0o600, "n2.pem": 0o644, "n2-key.pem": 0o600} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", f, fi.Mode().Perm(), mode)
		}
	}
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem holds no certificate")
	}
	for node, host := range map[string]string{"n1": "127.0.0.1", "n2": "db2.example"} {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, node+".pem"), filepath.Join(dir, node+"-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(pair.Certificate[0])
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s's certificate for %s: %v", node, host, err)
		}
	}
	n2, _ := os.ReadFile(filepath.Join(dir, "n2.pem"))
	if b, _ := pem.Decode(n2); b == nil {
		t.Fatal("n2.pem is not PEM")
	} else if leaf, _ := x509.ParseCertificate(b.Bytes); leaf.VerifyHostname("10.0.0.2") != nil {
		t.Error("n2's certificate lacks its --peers address")
	}

	caKey, _ := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	if code, out, errOut := runCmd("cluster", "certs", "--out", dir, "--node", "n4=127.0.0.1"); code != 0 || !strings.Contains(out, "signed with the CA already") {
		t.Fatalf("certs again: %d %q %q", code, out, errOut)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "ca-key.pem")); string(again) != string(caKey) {
		t.Error("a second run replaced the CA key")
	}
	os.Remove(filepath.Join(dir, "ca.pem"))
	if code, _, errOut := runCmd("cluster", "certs", "--out", dir, "--node", "n5=127.0.0.1"); code == 0 || !strings.Contains(errOut, "CA key") {
		t.Errorf("certs over a lone CA key: %d %q", code, errOut)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "ca-key.pem")); string(again) != string(caKey) {
		t.Error("the lone CA key was replaced")
	}

	for _, args := range [][]string{
		{"--node", "n1=h"},
		{"--out", dir},
		{"--out", dir, "--node", "n1"},
		{"--out", dir, "--node", "n1=a,,b"},
	} {
		if code, _, errOut := runCmd(append([]string{"cluster", "certs"}, args...)...); code != 2 {
			t.Errorf("certs %v: %d %q, want a usage error", args, code, errOut)
		}
	}
}

// TestServeClusterTLSFlags checks --cluster-tls's rules: it needs the
// node's certificate in the directory, goes with --peers, and lets a
// node listen beyond loopback without --cluster-allow-remote.
func TestServeClusterTLSFlags(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCmd("cluster", "certs", "--out", dir, "--node", "n1=192.0.2.1"); code != 0 {
		t.Fatal(errOut)
	}
	c := clusterFlags{node: "n1", peers: "n1=192.0.2.1:7000", peerOffset: cluster.DefaultEtcdPeerOffset, clientOffset: cluster.DefaultEtcdClientOffset,
		lease: cluster.DefaultLeaseTTL, failover: cluster.DefaultFailoverTimeout, form: cluster.DefaultFormTimeout, raftTick: replica.DefaultTickInterval, tlsDir: dir}
	if err := c.check(); err != nil {
		t.Errorf("a remote node with --cluster-tls: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster-tls", dir}, "--cluster-tls goes with --peers"},
		{[]string{"--node", "n2", "--peers", "n2=127.0.0.1:7000", "--cluster-tls", dir}, "n2"},
		{[]string{"--node", "n1", "--peers", "n1=192.0.2.1:7000"}, "--cluster-tls"},
	} {
		code, _, errOut := runCmd(append([]string{"serve", "--data", t.TempDir()}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("serve %v: %d %q, want a usage error saying %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, errOut := runCmd("cluster", "status", "--peers", "n1=127.0.0.1:7000", "--node", "n1"); code != 2 || !strings.Contains(errOut, "--cluster-tls") {
		t.Errorf("status --node without --cluster-tls: %d %q", code, errOut)
	}
}

// TestServeClusterTLS starts three nodes with --cluster-tls (certificates
// made by `mayfly cluster certs`): they form a cluster, place the default
// bucket and replicate a write to every node; `mayfly cluster status`
// reads the cluster with a node's certificate, and fails without one.
func TestServeClusterTLS(t *testing.T) {
	// Beside the package's other cluster tests: it mostly waits out
	// elections and timeouts, and this package is make test's longest.
	t.Parallel()
	nodes, peers := procCluster(t, "--memcached", "127.0.0.1:0", "--kv", "")
	dir := t.TempDir()
	if code, _, errOut := runCmd("cluster", "certs", "--out", dir, "--peers", strings.Join(peers, ",")); code != 0 {
		t.Fatal(errOut)
	}
	for _, n := range nodes {
		n.args = append(n.args, "--cluster-tls", dir)
		n.start(t)
	}
	for _, n := range nodes {
		n.started(t)
	}
	peerList := strings.Join(peers, ",")
	eventuallyT(t, "cluster status over TLS: three nodes up, the default bucket placed", func() error {
		code, out, errOut := runCmd("cluster", "status", "--peers", peerList, "--cluster-tls", dir, "--node", "n2")
		if code != 0 || strings.Count(out, " up ") != 3 || !strings.Contains(out, fmt.Sprintf("bucket default (replicaNumber 2): %d partitions, 0 degraded", testVBuckets)) {
			return fmt.Errorf("%d %s %s", code, out, errOut)
		}
		return nil
	})
	acked := writeAnywhere(t, nodes, http.MethodPut, "tls", `{"over":"tls"}`)
	itemCounts(t, nodes, 1)
	for _, n := range nodes {
		if err := readsAcked(n, map[string]ackedDoc{"tls": acked}); err != nil {
			t.Error(err)
		}
	}
	if code, _, _ := runCmd("cluster", "status", "--peers", peerList, "--timeout", "2s"); code == 0 {
		t.Error("cluster status without a certificate read a TLS cluster")
	}
}
