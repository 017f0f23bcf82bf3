package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10/memd"
)

// TestServeKV runs `mayfly serve` with its KV port: a memd client logs in
// as the administrator, selects the default bucket and reads the cluster
// configuration, which lists the KV and HTTP ports serve opened; the HTTP
// API serves the same configuration at /pools/default/b/default.
func TestServeKV(t *testing.T) {
	var stdout syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--memcached", "", "--kv", "127.0.0.1:0",
			"--views", "127.0.0.1:0", "--search", "127.0.0.1:0", "--admin-password", "password", "--log-level", "error"}, &stdout, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	got := served(t, &stdout, "serving HTTP on http://", "KV port for Couchbase SDKs on ",
		"capi port (views) for Couchbase SDKs on http://", "fts port (search) for Couchbase SDKs on http://")
	httpAddr, kvAddr, viewsAddr, searchAddr := got[0], got[1], got[2], got[3]
	nc, err := net.Dial("tcp", kvAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_, r := kvBootstrap(t, nc)
	_, kvPort, _ := net.SplitHostPort(kvAddr)
	_, httpPort, _ := net.SplitHostPort(httpAddr)
	_, viewsPort, _ := net.SplitHostPort(viewsAddr)
	_, searchPort, _ := net.SplitHostPort(searchAddr)
	var cfg struct {
		NodesExt []struct {
			Services map[string]int `json:"services"`
		} `json:"nodesExt"`
	}
	if err := json.Unmarshal(r.Value, &cfg); err != nil || len(cfg.NodesExt) != 1 {
		t.Fatalf("config %s: %v", r.Value, err)
	}
	svc := cfg.NodesExt[0].Services
	if strconv.Itoa(svc["kv"]) != kvPort || strconv.Itoa(svc["mgmt"]) != httpPort || strconv.Itoa(svc["capi"]) != viewsPort || strconv.Itoa(svc["fts"]) != searchPort {
		t.Fatalf("services %v, want kv %s, mgmt %s, capi %s, fts %s", svc, kvPort, httpPort, viewsPort, searchPort)
	}
	// The views and search ports answer their own paths.
	for _, c := range []struct{ addr, path string }{{viewsAddr, "/default/_design/nosuch"}, {searchAddr, "/api/index"}} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+c.addr+c.path, nil)
		req.SetBasicAuth("Administrator", "password")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// A design document that does not exist is the views API's 404
		// (not_found); the search API's index list is a 200.
		if (c.addr == viewsAddr && (resp.StatusCode != 404 || !strings.Contains(string(body), "not_found"))) || (c.addr == searchAddr && resp.StatusCode != 200) {
			t.Fatalf("GET %s%s: %d %s", c.addr, c.path, resp.StatusCode, body)
		}
	}

	req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/pools/default/b/default", nil)
	req.SetBasicAuth("Administrator", "password")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"nodeLocator":"vbucket"`) || !strings.Contains(string(body), `"kv":`+kvPort) {
		t.Fatalf("/pools/default/b/default: %d %s", resp.StatusCode, body)
	}
}

// kvBootstrap logs nc in as the administrator (SASL PLAIN), selects the
// default bucket and asks for the cluster configuration, as an SDK does
// first, and returns the connection's packet reader and writer and the
// configuration's answer. Every answer must succeed; a minute's deadline
// catches a hang.
func kvBootstrap(t *testing.T, nc net.Conn) (*memd.Conn, *memd.Packet) {
	t.Helper()
	nc.SetDeadline(time.Now().Add(time.Minute))
	mc := memd.NewConn(nc)
	do := func(p *memd.Packet) *memd.Packet {
		t.Helper()
		p.Magic = memd.CmdMagicReq
		if err := mc.WritePacket(p); err != nil {
			t.Fatal(err)
		}
		r, _, err := mc.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != memd.StatusSuccess {
			t.Fatalf("%v: status %v", p.Command, r.Status)
		}
		return r
	}
	do(&memd.Packet{Command: memd.CmdSASLAuth, Key: []byte("PLAIN"), Value: []byte("\x00Administrator\x00password")})
	do(&memd.Packet{Command: memd.CmdSelectBucket, Key: []byte("default")})
	return mc, do(&memd.Packet{Command: memd.CmdGetClusterConfig})
}
