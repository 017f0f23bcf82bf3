package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestServeClusterDefinesCreatedBucket: a bucket created over HTTP on a
// node of a cluster is defined in the cluster's state and its partitions
// placed, as those open at start are (it used to be left out: only the
// buckets open at start were defined), with the numVBuckets it was
// created with.
func TestServeClusterDefinesCreatedBucket(t *testing.T) {
	t.Parallel() // beside the other cluster tests (the password a flag: no t.Setenv)
	peers := fmt.Sprintf("n1=127.0.0.1:%d", freeTriple(t))
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	var wg sync.WaitGroup
	var serveErr error
	wg.Go(func() {
		serveErr = runServe(ctx, []string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--memcached", "", "--kv", "",
			"--views", "", "--search", "", "--log-level", "error", "--memory-overhead-mb", "-1", "--heap-ratio", "0",
			"--node", "n1", "--peers", peers, "--cluster-lease", "3s", "--admin-password", "password", "--num-vbuckets", "16"}, out, io.Discard)
	})
	defer func() {
		cancel()
		wg.Wait()
		if serveErr != nil {
			t.Errorf("serve: %v", serveErr)
		}
	}()
	addr := served(t, out, "serving HTTP on http://", "mayfly: cluster node ")[0]

	req, _ := http.NewRequest("POST", "http://"+addr+"/pools/default/buckets",
		strings.NewReader("name=later&bucketType=ephemeral&ramQuotaMB=100&numVBuckets=40"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("Administrator", "password")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("create bucket: %d %s", resp.StatusCode, body)
	}

	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) { // wall clock: a hang guard
		code, o, errOut := runCmd("cluster", "status", "--peers", peers)
		// Its numVBuckets, and the default bucket the node's --num-vbuckets.
		if code == 0 && strings.Contains(o, "bucket later (replicaNumber 2): 40 partitions") &&
			strings.Contains(o, "bucket default (replicaNumber 2): 16 partitions") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster status lacks the bucket created over HTTP, placed: %d %q %q", code, o, errOut)
		}
	}
}

// TestServeClusterAdvertisesReachableAddress: a node whose HTTP port
// listens on every interface is known to the cluster (cluster status,
// /pools/default on the other nodes) at its host in --peers, not at
// "0.0.0.0:port", which no client can reach it at.
func TestServeClusterAdvertisesReachableAddress(t *testing.T) {
	t.Parallel() // beside the other cluster tests (the password a flag: no t.Setenv)
	peers := fmt.Sprintf("n1=127.0.0.1:%d", freeTriple(t))
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	var wg sync.WaitGroup
	var serveErr error
	wg.Go(func() {
		serveErr = runServe(ctx, []string{"--data", t.TempDir(), "--http", "0.0.0.0:0", "--memcached", "", "--kv", "",
			"--views", "", "--search", "", "--log-level", "error", "--memory-overhead-mb", "-1", "--heap-ratio", "0",
			"--node", "n1", "--peers", peers, "--cluster-lease", "3s", "--admin-password", "password", "--num-vbuckets", "8"}, out, io.Discard)
	})
	defer func() {
		cancel()
		wg.Wait()
		if serveErr != nil {
			t.Errorf("serve: %v", serveErr)
		}
	}()
	addr := served(t, out, "serving HTTP on http://", "mayfly: cluster node ")[0]
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	want := "http " + net.JoinHostPort("127.0.0.1", port)
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) { // wall clock: a hang guard
		code, o, errOut := runCmd("cluster", "status", "--peers", peers)
		if code == 0 && strings.Contains(o, " up ") {
			if !strings.Contains(o, want) {
				t.Fatalf("cluster status lacks %q (serving on %s):\n%s", want, addr, o)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster status: %d %q %q", code, o, errOut)
		}
	}
}

func TestAdvertised(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"0.0.0.0:8091", "db1.example:8091"},
		{"[::]:8091", "db1.example:8091"},
		{":8091", "db1.example:8091"},
		{"127.0.0.1:8091", "127.0.0.1:8091"},
		{"10.0.0.2:11210", "10.0.0.2:11210"},
		{"", ""},
	} {
		if got := advertised(c.addr, "db1.example"); got != c.want {
			t.Errorf("advertised(%q) = %q, want %q", c.addr, got, c.want)
		}
	}
}
