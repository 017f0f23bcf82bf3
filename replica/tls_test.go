package replica

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/internal/clustertls"
	"github.com/mayflydb/mayfly/internal/logtest"
)

// testCerts makes a CA and certificates for n1..n3 (on 127.0.0.1) in a
// directory of the test's.
func testCerts(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	var nodes []clustertls.Node
	for _, n := range testNodes {
		nodes = append(nodes, clustertls.Node{Name: n, Hosts: []string{"127.0.0.1"}})
	}
	if _, err := clustertls.Generate(dir, nodes, clustertls.GenerateOptions{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func loadCreds(t testing.TB, dir, name string) *clustertls.Creds {
	t.Helper()
	c, err := clustertls.Load(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newTLSCluster is newTestCluster with every host on mutual TLS, logging
// to logs.
func newTLSCluster(t *testing.T, groups int, dir string, logs *logtest.Buffer) *testCluster {
	return newTestCluster(t, groups, func(o *Options) {
		o.TLS = loadCreds(t, dir, o.Node).Config()
		o.Logger = logs.Logger()
	}, false)
}

// TestTLSTransportReplicates checks three hosts on mutual TLS replicate,
// and that with TLS the cluster port may listen beyond loopback.
func TestTLSTransportReplicates(t *testing.T) {
	dir := testCerts(t)
	var logs logtest.Buffer
	c := newTLSCluster(t, 4, dir, &logs)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for g := range GroupID(4) {
		if _, err := c.propose(ctx, testNodes[int(g)%3], g, fmt.Sprintf("k=v%d", g)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every node applied every write", func() error {
		for _, n := range testNodes {
			for g := range GroupID(4) {
				if got, _ := c.sm(n, g).get("k"); got != fmt.Sprintf("v%d", g) {
					return fmt.Errorf("%s group %d: k=%q", n, g, got)
				}
			}
		}
		return nil
	})
	if refused := logs.Records(t, "replica: refused a cluster connection"); len(refused) > 0 {
		t.Errorf("a TLS cluster refused its own nodes: %v", refused)
	}

	h, err := Open(Options{Dir: t.TempDir(), Node: "n1", Listen: "0.0.0.0:0", Resolver: StaticResolver{},
		TLS: loadCreds(t, dir, "n1").Config()})
	if err != nil {
		t.Fatalf("TLS beyond loopback without AllowRemote: %v", err)
	}
	h.Close()
}

// dialAs opens a TLS connection to addr presenting cert (trusting the
// cluster's CA in dir) and sends the hello of node claim.
func dialAs(t *testing.T, addr, dir string, cert tls.Certificate, claim string) net.Conn {
	t.Helper()
	ca := loadCreds(t, dir, "n1").CA
	c, err := tls.Dial("tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: ca, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	c.SetWriteDeadline(time.Now().Add(10 * time.Second)) // wall clock: a hang guard
	if _, err := c.Write(binary.BigEndian.AppendUint64([]byte(helloMagic), NodeID(claim))); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedByServer reports whether the server closes c (or fails it with a
// TLS alert) within a generous deadline, rather than keeping it open. The
// transport never writes on an inbound connection, so a connection kept
// open reads nothing until the deadline.
func closedByServer(c net.Conn, wait time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(wait)) // wall clock: how long a kept connection is watched
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestTLSTransportRefusesStrangers checks the Raft port keeps the
// connection of a node whose certificate names it (the control), and
// refuses: a certificate of another CA, the certificate of n2 sending the
// hello of n3, and a plain connection, each with a warning saying why.
func TestTLSTransportRefusesStrangers(t *testing.T) {
	dir := testCerts(t)
	var logs logtest.Buffer
	c := newTLSCluster(t, 1, dir, &logs)
	addr := c.host("n1").Addr()

	// The control: n3 as n3 is kept.
	ok := dialAs(t, addr, dir, loadCreds(t, dir, "n3").Cert, "n3")
	if closedByServer(ok, 500*time.Millisecond) {
		t.Fatal("n3's own connection was closed")
	}
	ok.Close()

	// n2's certificate speaking as n3.
	imp := dialAs(t, addr, dir, loadCreds(t, dir, "n2").Cert, "n3")
	if !closedByServer(imp, 30*time.Second) {
		t.Error("a certificate of n2 spoke as n3")
	}
	imp.Close()

	// A certificate of another CA (also named n3).
	other := t.TempDir()
	if _, err := clustertls.Generate(other, []clustertls.Node{{Name: "n3", Hosts: []string{"127.0.0.1"}}}, clustertls.GenerateOptions{}); err != nil {
		t.Fatal(err)
	}
	foreign := dialAs(t, addr, dir, loadCreds(t, other, "n3").Cert, "n3")
	if !closedByServer(foreign, 30*time.Second) {
		t.Error("a certificate of another CA was accepted")
	}
	foreign.Close()

	// A plain connection (a node started without TLS).
	plain, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	plain.Write(binary.BigEndian.AppendUint64([]byte(helloMagic), NodeID("n3")))
	if !closedByServer(plain, 30*time.Second) {
		t.Error("a plain connection was accepted on a TLS port")
	}
	plain.Close()

	eventually(t, "three refusals logged", func() error {
		var why []string
		for _, r := range logs.Records(t, "replica: refused a cluster connection") {
			if r["level"] != "WARN" {
				return fmt.Errorf("a refusal logged at %v", r["level"])
			}
			why = append(why, fmt.Sprint(r["err"]))
		}
		all := strings.Join(why, "\n")
		for _, want := range []string{"a certificate of n2 speaks for node ID", "certificate", "does not speak TLS"} {
			if !strings.Contains(all, want) {
				return fmt.Errorf("no refusal says %q:\n%s", want, all)
			}
		}
		if len(why) != 3 {
			return fmt.Errorf("%d refusals, want 3:\n%s", len(why), all)
		}
		return nil
	})
}

// TestTLSDialerChecksTheNodeName checks the dialling side: a node that
// answers at n2's address with n3's certificate is refused (the messages
// for n2 are not sent to it), with a warning; and a TLS node dialling a
// plain one says so in the plain one's log.
func TestTLSDialerChecksTheNodeName(t *testing.T) {
	dir := testCerts(t)
	n3 := loadCreds(t, dir, "n3")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", n3.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- err
			return
		}
		defer c.Close()
		_, err = io.ReadFull(c, make([]byte, helloLen))
		accepted <- err
	}()
	n1 := loadCreds(t, dir, "n1")
	tcp, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := clientHandshake(ctx, tcp, n1.Config(), ln.Addr().String(), "n2"); !errors.Is(err, ErrPeerCert) || !errors.Is(err, errHandshake) {
		t.Fatalf("n3 answering for n2: %v, want ErrPeerCert", err)
	}
	if err := <-accepted; err == nil {
		t.Error("the impostor read a hello")
	}

	// A TLS host dials a plain one: the plain one warns.
	var logs logtest.Buffer
	res := &testResolver{addrs: map[string]string{}}
	plain, err := Open(Options{Dir: filepath.Join(t.TempDir(), "p"), Node: "n2", Listen: "127.0.0.1:0", Resolver: res, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	res.set("n2", plain.Addr())
	var tlsLogs logtest.Buffer
	secure, err := Open(Options{Dir: filepath.Join(t.TempDir(), "s"), Node: "n1", Listen: "127.0.0.1:0", Resolver: res, Logger: tlsLogs.Logger(), TLS: n1.Config()})
	if err != nil {
		t.Fatal(err)
	}
	defer secure.Close()
	if err := secure.AddGroup(1, []string{"n1", "n2"}, newKV()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the plain node warns of a TLS peer", func() error {
		if len(logs.Records(t, "replica: refused a cluster connection: the peer speaks TLS and this node's cluster port does not (is the peer started with --cluster-tls and this node without?)")) == 0 {
			return errors.New("no warning")
		}
		if len(tlsLogs.Records(t, "replica: peer refused")) == 0 {
			return errors.New("the TLS node did not warn")
		}
		return nil
	})
}

// BenchmarkProposeTLS is BenchmarkPropose64Groups (no fsync, so the
// transport weighs most) on plain TCP and on mutual TLS, to compare.
func BenchmarkProposeTLS(b *testing.B) {
	dir := testCerts(b)
	for _, secure := range []bool{false, true} {
		b.Run(fmt.Sprintf("tls=%v", secure), func(b *testing.B) {
			benchPropose(b, 64, 4, true, func(o *Options) {
				if secure {
					o.TLS = loadCreds(b, dir, o.Node).Config()
				}
			})
		})
	}
}
