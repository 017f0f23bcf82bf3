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
// replicas, and the bucket's REST answer says how many it has. On the old
// code the parameter was accepted and dropped: every bucket created on a
// cluster got replicaNumber 2 (three copies), and GET
// /pools/default/buckets/NAME had no replicaNumber (an SDK's GetBucket
// read 0).
func TestClusterBucketTakesItsReplicaNumber(t *testing.T) {
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

	// One beyond 3 is refused, changing nothing; lowering it goes through
	// (the orchestrator sheds copies where there are more: this cluster
	// has one node), as do an update repeating it (an SDK's UpdateBucket
	// sends the settings it read) and raising it (the orchestrator adds
	// copies where it has nodes).
	if code, body := req(http.MethodPost, "/pools/default/buckets/one", "replicaNumber=4&maxTTL=30"); code != http.StatusBadRequest || !strings.Contains(string(body), "replicaNumber") {
		t.Errorf("replicaNumber=4: %d %s; want 400 naming replicaNumber", code, body)
	}
	if code, body := req(http.MethodPost, "/pools/default/buckets/one", "replicaNumber=0&maxTTL=35"); code != http.StatusOK || !strings.Contains(string(body), `"replicaNumber":0`) {
		t.Errorf("lowering replicaNumber: %d %s", code, body)
	}
	if code, body := req(http.MethodPost, "/pools/default/buckets/one", "replicaNumber=1&maxTTL=40"); code != http.StatusOK {
		t.Errorf("raising replicaNumber again: %d %s", code, body)
	}
	if code, body := req(http.MethodPost, "/pools/default/buckets/one", "replicaNumber=1"); code != http.StatusOK {
		t.Errorf("an update repeating replicaNumber: %d %s", code, body)
	}
	if code, body := req(http.MethodPost, "/pools/default/buckets/one", "replicaNumber=3"); code != http.StatusOK {
		t.Errorf("raising replicaNumber: %d %s", code, body)
	}
	// Without replicaNumber a bucket has the cluster's default, 2.
	if code, body := req(http.MethodPost, "/pools/default/buckets", "name=two&ramQuotaMB=100"); code != http.StatusAccepted {
		t.Fatalf("create bucket two: %d %s", code, body)
	}
	code, o, errOut := runCmd("cluster", "status", "--peers", peers)
	if code != 0 || !strings.Contains(o, "bucket one (replicaNumber 3)") || !strings.Contains(o, "bucket two (replicaNumber 2)") {
		t.Errorf("cluster status: %d %q %q; want bucket one with replicaNumber 3, two with 2", code, o, errOut)
	}
	for name, want := range map[string]int{"one": 3, "two": 2} {
		code, body := req(http.MethodGet, "/pools/default/buckets/"+name, "")
		var got struct {
			ReplicaNumber *int  `json:"replicaNumber"`
			MaxTTL        int64 `json:"maxTTL"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &got) != nil || got.ReplicaNumber == nil || *got.ReplicaNumber != want {
			t.Errorf("GET bucket %s: %d %.300s; want replicaNumber %d", name, code, body, want)
		}
		if name == "one" && got.MaxTTL != 40 {
			t.Errorf("bucket one's maxTTL %d, want 40 (the refused change left it, the later ones set it)", got.MaxTTL)
		}
	}
}
