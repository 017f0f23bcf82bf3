package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/pager"
)

// doorServer serves the API as `mayfly serve` would (listenHTTP,
// newHTTPServer) with flags args, and returns its address.
func doorServer(t *testing.T, args ...string) (*serveConfig, string) {
	t.Helper()
	cfg, err := parseServeFlags(append([]string{"--http", "127.0.0.1:0", "--admin-password", adminPass}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateBucket(context.Background(), engine.DefaultBucketSettings("default")); err != nil {
		t.Fatal(err)
	}
	pm := pager.New(eng, nil)
	ln, _, err := listenHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(cfg, testHandler(t, eng, pm), slog.New(slog.DiscardHandler), context.Background())
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); pm.Close(context.Background()); eng.Close() })
	return cfg, ln.Addr().String()
}

// selfSigned writes an ECDSA certificate for 127.0.0.1 and its key into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "mayfly test"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Unix(0, 0),
		NotAfter:     time.Unix(4102444800, 0), // 2100
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	_, addr := doorServer(t, "--tls-cert", certFile, "--tls-key", keyFile)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	req, _ := http.NewRequest("PUT", "https://"+addr+"/default/docs/a", strings.NewReader(`{"x":1}`))
	req.SetBasicAuth(adminUser, adminPass)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("PUT over HTTPS: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest("GET", "https://"+addr+"/default/docs/a", nil)
	req.SetBasicAuth(adminUser, "wrong")
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("wrong password over HTTPS: %d", resp.StatusCode)
	}
	// The client sub-commands speak HTTPS too (trusting the system roots, so
	// here the self-signed certificate is refused: no silent downgrade).
	if code, _, errOut := runCmd("stats", "--host", "https://"+addr, "-u", adminU); code != 1 || !strings.Contains(errOut, "certificate") {
		t.Fatalf("stats over HTTPS with an unknown CA: %d %q", code, errOut)
	}
	// Plain HTTP to the HTTPS port gets a JSON 400, not Go's plain text.
	status, body := rawRequest(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if !strings.Contains(status, " 400 ") || !isJSONError(body) {
		t.Fatalf("plain HTTP to HTTPS: %q %q", status, body)
	}
}

// rawRequest writes raw on a new connection and returns the status line and
// body of the answer.
func rawRequest(t *testing.T, addr, raw string) (string, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, raw)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to %.40q: %v", raw, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("answer to %.40q has Content-Type %q", raw, ct)
	}
	return resp.Proto + " " + resp.Status, string(b)
}

func isJSONError(body string) bool {
	var m map[string]string
	return json.Unmarshal([]byte(body), &m) == nil && m["error"] != "" && m["reason"] != ""
}

// net/http's own refusals come out as JSON.
func TestGoErrorsAreJSON(t *testing.T) {
	_, addr := doorServer(t)
	for _, c := range []struct {
		raw, status string
	}{
		{"NOT A REQUEST\r\n\r\n", " 400 "},
		{"GET / HTTP/1.1\r\nHost: " + addr + "\r\nX-Big: " + strings.Repeat("a", maxHeaderBytes+8192) + "\r\n\r\n", " 431 "},
		{"GET / HTTP/1.1\r\nHost: " + addr + "\r\nTransfer-Encoding: gzip\r\n\r\n", " 501 "},
		{"GET / HTTP/1.1\r\n\r\n", " 400 "}, // no Host
	} {
		status, body := rawRequest(t, addr, c.raw)
		if !strings.Contains(status, c.status) || !isJSONError(body) {
			t.Errorf("%.30q: %q %q", c.raw, status, body)
		}
	}
}

// A client that sends its headers and then trickles the body is cut off by
// --read-timeout. Every other timeout of the server is 5 minutes, so an
// answer within the client's deadline of a minute (a bound that catches
// only a server that waits, however busy the machine) can only come from
// --read-timeout.
func TestSlowBodyTimesOut(t *testing.T) {
	_, addr := doorServer(t, "--read-timeout", "300ms", "--read-header-timeout", "5m", "--idle-timeout", "5m", "--write-timeout", "5m")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	auth := "Basic " + b64(adminU)
	fmt.Fprintf(conn, "PUT /default/docs/slow HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\":", addr, auth)
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	t.Logf("cut off after %v", time.Since(start))
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || !isJSONError(string(b)) {
			t.Fatalf("slow body: %d %s", resp.StatusCode, b)
		}
	} else if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Fatalf("the server waited for the slow body past a minute")
	}
}

func b64(s string) string {
	req, _ := http.NewRequest("GET", "http://x", nil)
	u, p, _ := strings.Cut(s, ":")
	req.SetBasicAuth(u, p)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

// Beyond loopback, mayfly serve needs an administrator password; the
// memcached port needs --memcached-allow-remote.
func TestServeRefusesExposure(t *testing.T) {
	t.Setenv("MAYFLY_ADMIN_PASSWORD", "")
	for _, c := range []struct {
		args []string
		want string // "" = accepted
	}{
		{[]string{"--http", "0.0.0.0:8091"}, "--admin-password"},
		{[]string{"--http", ":8091"}, "--admin-password"},
		{[]string{"--http", "db.example:8091"}, "--admin-password"},
		{[]string{"--http", "0.0.0.0:8091", "--admin-password", "s3cret"}, ""},
		{[]string{"--http", "127.0.0.1:8091"}, ""},
		{[]string{"--http", "[::1]:8091"}, ""},
		{[]string{"--http", "localhost:8091"}, ""},
		{[]string{"--memcached", "0.0.0.0:11211"}, "--memcached-allow-remote"},
		{[]string{"--memcached", "0.0.0.0:11211", "--memcached-allow-remote"}, ""},
		{[]string{"--kv", "0.0.0.0:11210"}, "--admin-password"},
		{[]string{"--kv", "0.0.0.0:11210", "--admin-password", "s3cret"}, "--kv-allow-remote"},
		{[]string{"--kv", "0.0.0.0:11210", "--admin-password", "s3cret", "--kv-allow-remote"}, ""},
		// The KV TLS port needs a password beyond loopback, not
		// --kv-allow-remote (PLAIN there is encrypted); without --tls-cert
		// it is off.
		{[]string{"--kv-tls", "0.0.0.0:11207", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "--admin-password"},
		{[]string{"--kv-tls", "0.0.0.0:11207", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--admin-password", "s3cret"}, ""},
		{[]string{"--kv-tls", "0.0.0.0:11207"}, ""},
		{[]string{"--views", "0.0.0.0:8092"}, "--admin-password"},
		{[]string{"--search", "0.0.0.0:8094"}, "--admin-password"},
		{[]string{"--views", "0.0.0.0:8092", "--search", "0.0.0.0:8094", "--admin-password", "s3cret"}, ""},
		{[]string{"--tls-cert", "c.pem"}, "--tls-key"},
		{[]string{"--max-requests", "0"}, "--max-requests"},
		{[]string{"--max-streams-per-user", "0"}, "--max-streams-per-user"},
	} {
		var stderr strings.Builder
		cfg, err := parseServeFlags(c.args, &stderr)
		if c.want == "" {
			if err != nil {
				t.Errorf("%v refused: %s", c.args, stderr.String())
			}
			continue
		}
		if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: %v %q", c.args, err, stderr.String())
		}
		_ = cfg
	}
	// On loopback without a password, one is made up for this start.
	cfg, err := parseServeFlags(nil, io.Discard)
	if err != nil || !cfg.devPassword || len(cfg.adminPassword) < 16 {
		t.Fatalf("loopback without a password: %v %+v", err, cfg)
	}
	t.Setenv("MAYFLY_ADMIN_PASSWORD", "from-env")
	if cfg, err := parseServeFlags([]string{"--http", "0.0.0.0:8091"}, io.Discard); err != nil || cfg.adminPassword != "from-env" {
		t.Fatalf("MAYFLY_ADMIN_PASSWORD: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
// served polls serve's output until it has printed, after each of markers,
// a value (up to the next comma or line end), and returns the values in
// markers' order. serve prints them as it starts; the deadline only catches
// a hang (three minutes: race-built cluster nodes on a busy 2-core machine
// wait for their etcd quorum, each electing 1024 groups, before the last).
func served(t *testing.T, out *syncBuffer, markers ...string) []string {
	t.Helper()
	vals := make([]string, len(markers))
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		text, missing := out.String(), 0
		for i, m := range markers {
			if _, rest, ok := strings.Cut(text, m); ok {
				if end := strings.IndexAny(rest, ",\n"); end >= 0 {
					vals[i] = rest[:end]
					continue
				}
			}
			missing++
		}
		if missing == 0 {
			return vals
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve printed %q", text)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeDevPassword runs `mayfly serve` itself on loopback without a
// password: it prints a password made up for this start, which works, and
// nothing works without it.
func TestServeDevPassword(t *testing.T) {
	t.Setenv("MAYFLY_ADMIN_PASSWORD", "")
	var stdout syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--memcached", "", "--kv", "127.0.0.1:0", "--views", "", "--search", "", "--log-level", "error"}, &stdout, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	got := served(t, &stdout, "serving HTTP on http://", "log in as Administrator / ")
	addr, pass := got[0], got[1]
	if len(pass) < 16 {
		t.Fatalf("serve printed the password %q", pass)
	}
	if code, out, errOut := runCmd("stats", "--host", addr, "-u", "Administrator:"+pass, "curr_items"); code != 0 || out != " curr_items: 0\n" {
		t.Fatalf("stats with the printed password: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCmd("stats", "--host", addr, "-u", "Administrator:password"); code != 1 || !strings.Contains(errOut, "unauthorized") {
		t.Fatalf("stats with another password: %d %q", code, errOut)
	}
}
