package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/couchbase/gocbcore/v10/memd"
)

// TestServeKVTLS runs `mayfly serve` with --tls-cert: the KV port is also
// served over TLS (--kv-tls), a client trusting the certificate logs in
// there with SASL PLAIN, and the configuration lists kvSSL and, the HTTP
// API being HTTPS, mgmtSSL.
func TestServeKVTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	var stdout syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--memcached", "", "--kv", "127.0.0.1:0",
			"--kv-tls", "127.0.0.1:0", "--views", "127.0.0.1:0", "--search", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile,
			"--admin-password", "password", "--log-level", "error"}, &stdout, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	got := served(t, &stdout, "serving HTTP on https://", "KV port over TLS on ")
	httpAddr, tlsAddr := got[0], got[1]
	nc, err := tls.Dial("tcp", tlsAddr, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	mc, r := kvBootstrap(t, nc)
	_, tlsPort, _ := net.SplitHostPort(tlsAddr)
	_, httpPort, _ := net.SplitHostPort(httpAddr)
	for _, want := range []string{`"kvSSL":` + tlsPort, `"mgmtSSL":` + httpPort} {
		if !strings.Contains(string(r.Value), want) {
			t.Errorf("configuration lacks %s: %s", want, r.Value)
		}
	}
	// STAT answers over TLS too, with the pager's statistics.
	if err := mc.WritePacket(&memd.Packet{Magic: memd.CmdMagicReq, Command: memd.CmdStat}); err != nil {
		t.Fatal(err)
	}
	stats := map[string]string{}
	for {
		r, _, err := mc.ReadPacket()
		if err != nil || r.Status != memd.StatusSuccess {
			t.Fatalf("STAT: %v %v", err, r)
		}
		if len(r.Key) == 0 {
			break
		}
		stats[string(r.Key)] = string(r.Value)
	}
	if stats["ep_expiry_pager_next_run"] == "" || stats["curr_items"] != "0" {
		t.Fatalf("STAT over TLS: %v", stats)
	}
}
