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
)

// TestClusterBucketTakesItsReplicaNumber: a bucket created over REST on a
// cluster node with replicaNumber (Couchbase's parameter, as the console
// and the SDKs' bucket managers send it) is defined with that many
// replicas, and the bucket's REST answer says how many it has. Today the
// parameter is accepted and dropped: every bucket created on a cluster
// gets replicaNumber 2 (three copies), and GET /pools/default/buckets/NAME
// has no replicaNumber (an SDK's GetBucket reads 0).
func TestClusterBucketTakesItsReplicaNumber(t *testing.T) {
	t.Skip("bug: replicaNumber given at a bucket's creation on a cluster is dropped (defined with 2), and the bucket's REST answer has no replicaNumber")
	t.Setenv("MAYFLY_ADMIN_PASSWORD", "password")
	peers := fmt.Sprintf("n1=127.0.0.1:%d", freeTriple(t))
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	var wg sync.WaitGroup
	var serveErr error
	wg.Go(func() {
		serveErr = runServe(ctx, []string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--memcached", "", "--kv", "",
			"--views", "", "--search", "", "--log-level", "error", "--memory-overhead-mb", "-1", "--heap-ratio", "0",
			"--node", "n1", "--peers", peers, "--cluster-lease", "3s"}, out, io.Discard)
	})
	defer func() {
		cancel()
		wg.Wait()
		if serveErr != nil {
			t.Errorf("serve: %v", serveErr)
		}
	}()
	addr := served(t, out, "serving HTTP on http://", "mayfly: cluster node ")[0]
	req := func(method, path, body string) (int, []byte) {
		t.Helper()
		r, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		if body != "" {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		r.SetBasicAuth("Administrator", "password")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, body := req(http.MethodPost, "/pools/default/buckets", "name=one&ramQuotaMB=100&replicaNumber=1"); code != http.StatusAccepted {
		t.Fatalf("create bucket: %d %s", code, body)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) { // wall clock: a hang guard
		code, o, errOut := runCmd("cluster", "status", "--peers", peers)
		if code == 0 && strings.Contains(o, "bucket one (replicaNumber ") {
			if !strings.Contains(o, "bucket one (replicaNumber 1)") {
				t.Errorf("cluster status: %s; want bucket one with replicaNumber 1", o)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster status lacks the bucket: %d %q %q", code, o, errOut)
		}
	}
	code, body := req(http.MethodGet, "/pools/default/buckets/one", "")
	var got struct {
		ReplicaNumber *int `json:"replicaNumber"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &got) != nil {
		t.Fatalf("GET the bucket: %d %.300s", code, body)
	}
	if got.ReplicaNumber == nil || *got.ReplicaNumber != 1 {
		t.Errorf("GET the bucket: replicaNumber %v; want 1", got.ReplicaNumber)
	}
}
