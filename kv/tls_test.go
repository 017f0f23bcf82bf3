package kv_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10/memd"

	"github.com/mayflydb/mayfly/kv"
)

// testCert is a self-signed certificate for 127.0.0.1 and the pool that
// trusts it.
func testCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "mayfly kv test"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Unix(0, 0),
		NotAfter:     time.Unix(4102444800, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// serveTLS serves f's server on a TLS listener too, and returns its
// address and the pool that trusts its certificate.
func (f *fixture) serveTLS(t *testing.T) (string, *x509.CertPool) {
	t.Helper()
	cert, pool := testCert(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- f.srv.Serve(ctx, tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) && !errors.Is(err, kv.ErrServerClosed) {
			t.Errorf("Serve over TLS: %v", err)
		}
	})
	return ln.Addr().String(), pool
}

// The KV port over TLS: a client that trusts the certificate logs in with
// PLAIN and works; the configuration it reads lists this port as kvSSL;
// a client that does not trust it gets no further than the handshake.
func TestTLS(t *testing.T) {
	f := newFixture(t)
	addr, pool := f.serveTLS(t)

	nc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(time.Minute))
	c := &client{t: t, nc: nc, mc: memd.NewConn(nc)}
	c.hello(memd.FeatureXerror, memd.FeatureJSON)
	c.login(adminUser, adminPass)
	c.set(memd.CmdSet, "k", `{"over":"tls"}`, 0, 0, 0, memd.StatusSuccess)
	if r := c.expect(&memd.Packet{Command: memd.CmdGet, Key: []byte("k")}, memd.StatusSuccess); string(r.Value) != `{"over":"tls"}` {
		t.Fatalf("GET over TLS: %s", r.Value)
	}
	r := c.expect(&memd.Packet{Command: memd.CmdGetClusterConfig}, memd.StatusSuccess)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	if !strings.Contains(string(r.Value), `"kvSSL":`+port) {
		t.Fatalf("configuration over TLS lacks kvSSL %s: %s", port, r.Value)
	}

	// The plain port's configuration has no kvSSL of its own invention.
	plain := f.dial(t)
	plain.login(adminUser, adminPass)
	if r := plain.expect(&memd.Packet{Command: memd.CmdGetClusterConfig}, memd.StatusSuccess); strings.Contains(string(r.Value), "kvSSL") {
		t.Fatalf("plain configuration: %s", r.Value)
	}

	if nc, err := tls.Dial("tcp", addr, &tls.Config{}); err == nil {
		nc.Close()
		t.Fatal("a client trusting only the system roots completed the handshake")
	}
}
