package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/httpapi"
	"github.com/mayflydb/mayfly/internal/testport"
)

// freeTriple returns a port P with P, P+1 and P+2 free (a node's cluster
// port and its etcd ports), below the ephemeral range, reserved until t
// ends (parallel tests and other packages' tests pick ports too).
func freeTriple(t *testing.T) int {
	return testport.Consecutive(t, 3)
}

// TestServeCluster starts three `mayfly serve --peers` in this process:
// they form a cluster, `mayfly cluster status` shows every node up, an
// orchestrator and the default bucket's partitions placed, and
// /pools/default lists the three nodes. Without --peers, serve makes no
// cluster directory. The failover timeout is long: the orchestrator
// places the default bucket's partitions on the nodes up once the timeout
// has passed since its term began, and a node that starts a few seconds
// after the first two (a busy machine) must still get its share. The
// nodes run race-built in this process: with 64 partitions (testVBuckets),
// not the default 1,024, whose 3,072 Raft groups cost the race step ~30
// CPU-s; `make chaos` runs its clusters at 1,024.
func TestServeCluster(t *testing.T) {
	// Beside the package's other cluster tests: its three nodes mostly
	// wait out etcd's forming and the groups' elections. The password is
	// a flag, not $MAYFLY_ADMIN_PASSWORD (t.Setenv, not in a parallel test).
	t.Parallel()
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("n%d=127.0.0.1:%d", i+1, freeTriple(t)))
	}
	peerList := strings.Join(peers, ",")
	ctx, cancel := context.WithCancel(context.Background())
	outs := make([]*syncBuffer, 3)
	dirs := make([]string, 3)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		outs[i], dirs[i] = &syncBuffer{}, t.TempDir()
		wg.Go(func() {
			errs[i] = runServe(ctx, []string{"--data", dirs[i], "--http", "127.0.0.1:0", "--memcached", "", "--kv", "127.0.0.1:0",
				"--views", "", "--search", "", "--log-level", "error", "--memory-overhead-mb", "-1", "--heap-ratio", "0",
				"--node", fmt.Sprintf("n%d", i+1), "--peers", peerList, "--cluster-lease", "10s", "--cluster-failover-timeout", "2m",
				"--admin-password", "password", "--num-vbuckets", fmt.Sprint(testVBuckets)},
				outs[i], io.Discard)
		})
	}
	defer func() {
		cancel()
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("serve n%d: %v", i+1, err)
			}
		}
	}()
	var addr string
	for i := range 3 {
		got := served(t, outs[i], "serving HTTP on http://", "mayfly: cluster node ")
		if i == 0 {
			addr = got[0]
		}
		if !strings.Contains(outs[i].String(), "Documents are replicated") {
			t.Fatalf("serve n%d did not say what is replicated:\n%s", i+1, outs[i].String())
		}
		if _, err := os.Stat(filepath.Join(dirs[i], "cluster", "etcd")); err != nil {
			t.Fatalf("n%d's etcd data: %v", i+1, err)
		}
	}

	var out string
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) { // wall clock: a hang guard (race-built at load 25, the whole test took 52 s)
		code, o, errOut := runCmd("cluster", "status", "--peers", peerList)
		out = o
		if code == 0 && strings.Count(o, " up ") == 3 && strings.Contains(o, fmt.Sprintf("bucket default (replicaNumber 2): %d partitions, 0 degraded", testVBuckets)) &&
			strings.Contains(o, "views cover") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster status: %d %q %q", code, o, errOut)
		}
	}
	for _, want := range []string{"Documents are replicated", "orchestrator: n", "n1 ", "leads   2", "holds   64"} {
		if !strings.Contains(out, want) {
			t.Errorf("cluster status lacks %q:\n%s", want, out)
		}
	}
	// The views' coverage: every partition covered by one node, each node
	// covering some.
	if code, o, errOut := runCmd("cluster", "status", "--json", "--peers", peerList); code != 0 {
		t.Fatalf("cluster status --json: %d %s %s", code, o, errOut)
	} else {
		var st struct {
			Buckets []struct {
				Name   string         `json:"name"`
				Covers map[string]int `json:"covers"`
			} `json:"buckets"`
		}
		if err := json.Unmarshal([]byte(o), &st); err != nil || len(st.Buckets) != 1 {
			t.Fatalf("cluster status --json: %v\n%s", err, o)
		}
		sum := 0
		for _, n := range []string{"n1", "n2", "n3"} {
			if st.Buckets[0].Covers[n] == 0 {
				t.Errorf("cluster status: %s covers no partition's views: %v", n, st.Buckets[0].Covers)
			}
			sum += st.Buckets[0].Covers[n]
		}
		if sum != testVBuckets {
			t.Errorf("cluster status: the views cover %d partitions in all, want %d: %v", sum, testVBuckets, st.Buckets[0].Covers)
		}
	}

	// (A busy machine's etcd may not answer the node list within the
	// request's 5 s: an error answer, which a client retries.)
	type poolNode struct {
		Hostname string `json:"hostname"`
		Status   string `json:"status"`
		ThisNode bool   `json:"thisNode"`
	}
	var last string
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) { // wall clock: a hang guard
		if time.Now().After(deadline) { // wall clock: a hang guard
			t.Fatalf("/pools/default: %s", last)
		}
		req, _ := http.NewRequest("GET", "http://"+addr+"/pools/default", nil)
		req.SetBasicAuth("Administrator", "password")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			last = fmt.Sprintf("%d %s %v", resp.StatusCode, body, err)
			continue
		}
		var pools struct {
			Nodes    []poolNode `json:"nodes"`
			Balanced bool       `json:"balanced"`
			Cluster  struct {
				ThisNode     string `json:"thisNode"`
				Orchestrator string `json:"orchestrator"`
				Nodes        []struct {
					Name string `json:"name"`
					Up   bool   `json:"up"`
				} `json:"nodes"`
				Buckets []struct {
					Name     string         `json:"name"`
					Leads    map[string]int `json:"leads"`
					Holds    map[string]int `json:"holds"`
					Degraded []int          `json:"degraded"`
				} `json:"buckets"`
			} `json:"mayflyCluster"`
		}
		if err := json.Unmarshal(body, &pools); err != nil {
			t.Fatal(err)
		}
		if len(pools.Nodes) != 3 || !pools.Nodes[0].ThisNode || pools.Nodes[1].Status != "healthy" || pools.Nodes[2].Status != "healthy" {
			t.Fatalf("/pools/default nodes: %+v", pools.Nodes)
		}
		// The cluster's state for the console: the node asked, an
		// orchestrator, three nodes up, the default bucket's
		// partitions led (each once) and held (three times) by them.
		c := pools.Cluster
		if c.ThisNode != "n1" || c.Orchestrator == "" || len(c.Nodes) != 3 || len(c.Buckets) != 1 {
			t.Fatalf("/pools/default mayflyCluster: %s", body)
		}
		if !pools.Balanced {
			// A replica a moment behind (a busy machine) is reported
			// lagging until it catches up.
			last = "not balanced: " + string(body)
			continue
		}
		led, held := 0, 0
		for _, n := range c.Nodes {
			if !n.Up {
				t.Errorf("mayflyCluster: %s not up: %s", n.Name, body)
			}
			led += c.Buckets[0].Leads[n.Name]
			held += c.Buckets[0].Holds[n.Name]
		}
		if led != testVBuckets || held != 3*testVBuckets || len(c.Buckets[0].Degraded) != 0 {
			t.Errorf("mayflyCluster: bucket default led %d held %d degraded %v, want %d, %d, none", led, held, c.Buckets[0].Degraded, testVBuckets, 3*testVBuckets)
		}
		break
	}
}

// TestServeWithoutPeersStartsNoCluster checks the single node is as
// before: no cluster directory, no cluster line.
func TestServeWithoutPeersStartsNoCluster(t *testing.T) {
	t.Setenv("MAYFLY_ADMIN_PASSWORD", "password")
	dir := t.TempDir()
	var stdout syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--data", dir, "--http", "127.0.0.1:0", "--memcached", "", "--kv", "", "--views", "", "--search", "", "--log-level", "error"}, &stdout, io.Discard)
	}()
	served(t, &stdout, "serving HTTP on http://")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cluster")); !os.IsNotExist(err) {
		t.Fatalf("a single node made %s: %v", filepath.Join(dir, "cluster"), err)
	}
	if strings.Contains(stdout.String(), "cluster") {
		t.Fatalf("a single node spoke of a cluster: %s", stdout.String())
	}
}

func TestServeClusterFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--peers", "n1=127.0.0.1:7000"}, "--peers needs --node"},
		{[]string{"--node", "n1"}, "--node goes with --peers"},
		{[]string{"--node", "n4", "--peers", "n1=127.0.0.1:7000"}, "not in the peer list"},
		{[]string{"--node", "n1", "--peers", "n1=127.0.0.1"}, "HOST:PORT"},
		{[]string{"--node", "n1", "--peers", "n1=192.0.2.1:7000"}, "--cluster-allow-remote"},
	} {
		code, _, errOut := runCmd(append([]string{"serve", "--data", t.TempDir()}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("serve %v: %d %q, want a usage error saying %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, errOut := runCmd("cluster", "status"); code != 2 || !strings.Contains(errOut, "--peers or --endpoints") {
		t.Errorf("cluster status without peers: %d %q", code, errOut)
	}
}

// The other nodes' requests come to a node's advertised HTTP address, whose
// host is its --peers host: a name there is answered as the address is,
// without an --allowed-hosts entry; a single node allows what it was told.
func TestPeerHostsAreAllowed(t *testing.T) {
	got := withPeerHosts([]string{"proxy.example:8091"}, "n1=db1.example:9100,n2=db2.example:9100,n3=10.0.0.3:9100")
	want := []string{"proxy.example:8091", "db1.example", "db2.example", "10.0.0.3"}
	if !slices.Equal(got, want) {
		t.Errorf("allowed hosts %q, want %q", got, want)
	}
	if got := withPeerHosts([]string{"a.example"}, ""); !slices.Equal(got, []string{"a.example"}) {
		t.Errorf("a single node's allowed hosts %q", got)
	}
	// A share request with a peer's name as its Host is answered, not 421.
	eng, err := engine.Open(t.TempDir(), &engine.Options{NumPartitions: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	h := httpapi.New(eng, &httpapi.Options{AllowedHosts: withPeerHosts(nil, "n1=db1.example:9100")})
	req := httptest.NewRequest(http.MethodGet, "http://db1.example:8091/pools", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code == http.StatusMisdirectedRequest {
		t.Errorf("a request to db1.example:8091 was refused as misdirected: %s", rec.Body)
	}
}
