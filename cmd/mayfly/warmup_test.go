package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
)

// TestServeAnswersDuringWarmup restarts `mayfly serve` on a data directory
// holding documents, with the bucket's warm-up held after its first
// document: the HTTP port answers reads of documents not loaded yet, and
// reports the bucket warming up (nodes[].status "warmup", the ep_warmup_*
// statistics), before the load completes; once it is let go the bucket
// turns healthy with every document counted.
func TestServeAnswersDuringWarmup(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	eng, err := engine.Open(data, &engine.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.CreateBucket(ctx, engine.DefaultBucketSettings("default"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		if _, err := b.DefaultCollection().Upsert(ctx, fmt.Sprintf("k%03d", i), []byte(fmt.Sprintf(`{"n":%d}`, i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	cfg, err := parseServeFlags([]string{"--data", data, "--http", "127.0.0.1:0", "--memcached", "", "--kv", "",
		"--admin-password", "password", "--log-level", "error"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	gate, held := make(chan struct{}), make(chan struct{})
	var hold, release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	cfg.warmupHook = func(bucket string, loaded int64) { hold.Do(func() { close(held); <-gate }) }
	var stdout syncBuffer
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- serve(sctx, cfg, &stdout, io.Discard) }()
	defer func() {
		open()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	<-held // the warm-up holds: everything below happens before the load completes
	addr := served(t, &stdout, "serving HTTP on http://")[0]
	auth := "Administrator:password"
	if code, out, errOut := runCmd("get", "k123", "--host", addr, "-u", auth); code != 0 || !strings.Contains(out, `{"n":123}`) {
		t.Fatalf("get during the warm-up: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCmd("get", "nope", "--host", addr, "-u", auth); code == 0 || !strings.Contains(errOut, "not") {
		t.Fatalf("get of a missing key during the warm-up: %d %q", code, errOut)
	}
	if got := nodeStatus(t, addr); got != "warmup" {
		t.Fatalf("nodes[].status during the warm-up = %q, want warmup", got)
	}
	if code, out, errOut := runCmd("stats", "--host", addr, "-u", auth, "ep_warmup_running"); code != 0 || out != " ep_warmup_running: 1\n" {
		t.Fatalf("stats during the warm-up: %d %q %q", code, out, errOut)
	}
	open()
	var status string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && status != "healthy"; time.Sleep(10 * time.Millisecond) { // the deadline catches a hang
		status = nodeStatus(t, addr)
	}
	if status != "healthy" {
		t.Fatalf("nodes[].status after the warm-up = %q, want healthy", status)
	}
	code, out, errOut := runCmd("stats", "--host", addr, "-u", auth, "curr_items", "ep_warmup_running", "ep_warmup_key_count")
	if want := fmt.Sprintf(" curr_items:          %d\n ep_warmup_running:   0\n ep_warmup_key_count: %d\n", n, n); code != 0 || out != want {
		t.Fatalf("stats after the warm-up: %d %q %q, want %q", code, out, errOut, want)
	}
}

// nodeStatus returns nodes[0].status of GET /pools/default/buckets/default.
func nodeStatus(t *testing.T, addr string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/pools/default/buckets/default", nil)
	req.SetBasicAuth("Administrator", "password")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Nodes []struct {
			Status string `json:"status"`
		} `json:"nodes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Nodes) == 0 {
		t.Fatalf("GET bucket: %d %v %+v", resp.StatusCode, err, body)
	}
	return body.Nodes[0].Status
}
