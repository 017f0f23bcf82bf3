package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10/memd"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mayflydb/mayfly/cluster"
)

// procNode is one `mayfly serve --peers` in its own process (this test
// binary run as mayfly, TestMain), so that it can be killed with SIGKILL.
type procNode struct {
	name, dir string
	args      []string
	cmd       *exec.Cmd
	out       *syncBuffer
	http, mc  string
	kv        string
}

// start starts the process; started waits for it to serve (a node of a
// cluster forming serves once a quorum of etcd members answers).
func (n *procNode) start(t *testing.T) {
	t.Helper()
	if n.out != nil && raceNodes() { // the run before a kill or a stop
		raceReported(t, n.name, n.out.String())
	}
	n.out = &syncBuffer{}
	n.cmd = serverCommand(t, n.args)
	n.cmd.SysProcAttr = serverProcAttr()
	n.cmd.Env = append(n.cmd.Env, "MAYFLY_ADMIN_PASSWORD=password")
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

func (n *procNode) started(t *testing.T) {
	t.Helper()
	markers := []string{"serving HTTP on http://", "serving memcached on ", "replicating on "}
	kvOn := true
	for i, a := range n.args {
		if a == "--kv" && i+1 < len(n.args) && n.args[i+1] == "" {
			kvOn = false
		}
	}
	if kvOn {
		markers = append(markers, "serving the KV port for Couchbase SDKs on ")
	}
	got := served(t, n.out, markers...)
	n.http, n.mc = got[0], strings.Fields(got[1])[0]
	if kvOn {
		n.kv = got[3]
	}
}

// kill ends the process with SIGKILL: nothing is flushed or closed.
func (n *procNode) kill() {
	if n.cmd != nil {
		n.cmd.Process.Kill()
		n.cmd.Wait()
		n.cmd = nil
	}
}

// stop ends the process with SIGTERM (a clean shutdown), or SIGKILL after
// a generous wait.
func (n *procNode) stop() {
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		n.cmd.Process.Kill()
		<-done
	}
	n.cmd = nil
}

// docReq sends an HTTP request for a document of the default bucket.
func docReq(method, addr, key, body string) (int, []byte, error) {
	code, _, b, err := docReqH(method, addr, key, body)
	return code, b, err
}

// docPath is the path of key's document: in the default bucket, or in
// bucket b for a key written "b/key".
func docPath(key string) string {
	if b, k, ok := strings.Cut(key, "/"); ok {
		return "/" + b + "/docs/" + k
	}
	return "/default/docs/" + key
}

// docReqH is docReq with the answer's headers.
func docReqH(method, addr, key, body string) (int, http.Header, []byte, error) {
	req, err := http.NewRequest(method, "http://"+addr+docPath(key), strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.SetBasicAuth("Administrator", "password")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	cl := http.Client{Timeout: time.Minute}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// getDoc reads a document through the node at addr as a client does: an
// answer of a temporary failure (503 "temporary_failure": a partition's
// group is between leaders, a node that started slowly having missed an
// election timeout) is retried, as Couchbase's SDKs retry it, until an
// answer or a hang's deadline. Any other answer is returned.
func getDoc(addr, key string) (int, []byte, error) {
	deadline := time.Now().Add(5 * time.Minute) // a hang, not a busy machine
	for {
		code, body, err := docReq(http.MethodGet, addr, key, "")
		if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(string(body), `"temporary_failure"`) || time.Now().After(deadline) {
			return code, body, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ackedDoc is what a write's answer said.
type ackedDoc struct {
	value    string
	cas, seq uint64
	deleted  bool
	node     string // the node that acknowledged it
}

// writeAnywhere writes key through the first live node: any node takes
// it, forwarding it to its partition's leader (whose name the answer
// carries, X-Mayfly-Routed-To). A partition electing a leader answers 503
// "not my vbucket", a proposal not committed in time (or a leader that
// cannot be reached) 503 "temporary_failure"; each is retried until a
// generous deadline. It returns what the acknowledging node answered.
func writeAnywhere(t *testing.T, nodes []*procNode, method, key, value string) ackedDoc {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute) // a hang, not a busy machine
	var last string
	for {
		for _, n := range nodes {
			if n.cmd == nil {
				continue
			}
			code, h, body, err := docReqH(method, n.http, key, value)
			if err != nil {
				last = err.Error()
				continue
			}
			if code == http.StatusOK || code == http.StatusCreated {
				by := n.name
				if to := h.Get("X-Mayfly-Routed-To"); to != "" {
					by = to
				}
				var res struct {
					CAS uint64 `json:"cas"`
					Seq uint64 `json:"seq"`
				}
				if err := json.Unmarshal(body, &res); err != nil || res.CAS == 0 || res.Seq == 0 {
					t.Fatalf("%s %s on %s: %d %s", method, key, n.name, code, body)
				}
				return ackedDoc{value: value, cas: res.CAS, seq: res.Seq, deleted: method == http.MethodDelete, node: by}
			}
			// No leader yet, or (a loaded machine: the race detector's
			// build) no commit within the proposal's wait, or a leader just
			// killed: not acknowledged, so written again.
			if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "not my vbucket") && !strings.Contains(string(body), "temporary_failure") {
				t.Fatalf("%s %s on %s: %d %s", method, key, n.name, code, body)
			}
			last = string(body)
			break // through the first live node only
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: no node acknowledged it: %s", method, key, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readsAcked checks that node n reads every acknowledged write as it was
// acknowledged: the same value, CAS and sequence number (deleted keys
// missing).
func readsAcked(n *procNode, acked map[string]ackedDoc) error {
	for k, a := range acked {
		code, body, err := getDoc(n.http, k+"?meta=true")
		if err != nil {
			return err
		}
		if a.deleted {
			if code != http.StatusNotFound {
				return fmt.Errorf("%s: deleted %s reads %d %s", n.name, k, code, body)
			}
			continue
		}
		var env struct {
			Meta struct {
				CAS uint64 `json:"cas"`
				Seq uint64 `json:"seq"`
			} `json:"meta"`
			JSON json.RawMessage `json:"json"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &env) != nil {
			return fmt.Errorf("%s: %s reads %d %s", n.name, k, code, body)
		}
		if env.Meta.CAS != a.cas || env.Meta.Seq != a.seq || string(env.JSON) != a.value {
			return fmt.Errorf("%s: %s reads cas %d seq %d %s, acknowledged cas %d seq %d %s",
				n.name, k, env.Meta.CAS, env.Meta.Seq, env.JSON, a.cas, a.seq, a.value)
		}
	}
	return nil
}

// eventuallyT polls cond until it holds or a generous deadline (a hang
// guard, not a speed assertion) passes: five minutes, as race-built
// processes at load 25 took 1m34s for their groups' leaders to follow the
// map in TestFailoverReplicatesAgain.
func eventuallyT(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// memcachedCmd sends one command on the memcached port and returns the
// reply line.
func memcachedCmd(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// memcachedReply sends one command on the memcached port and returns its
// whole reply: a retrieval's lines up to END (or an error line), else one
// line.
func memcachedReply(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	var out strings.Builder
	for {
		line, err := r.ReadString('\n')
		out.WriteString(line)
		if err != nil {
			return out.String(), err
		}
		if !strings.HasPrefix(cmd, "get") || !strings.HasPrefix(line, "VALUE ") {
			return out.String(), nil
		}
		f := strings.Fields(line)
		n, _ := strconv.Atoi(f[3])
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return out.String(), err
		}
		out.Write(buf)
	}
}

// memcachedThrough sends cmd to node n until it answers ok, retrying while
// the partition elects a leader or the write is not committed in time
// (SERVER_ERROR, not acknowledged); any other answer fails the test.
func memcachedThrough(t *testing.T, n *procNode, cmd, ok string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute) // a hang, not a busy machine
	for {
		reply, err := memcachedCmd(n.mc, cmd)
		switch {
		case err != nil:
			t.Fatalf("memcached on %s: %v", n.name, err)
		case reply == ok:
			return
		case !strings.HasPrefix(reply, "SERVER_ERROR not my vbucket") && !strings.HasPrefix(reply, "SERVER_ERROR temporary failure"):
			t.Fatalf("memcached %q on %s: %q", cmd, n.name, reply)
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcached %q on %s: %q", cmd, n.name, reply)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testVBuckets is the partitions of the default bucket of procCluster's
// nodes (--num-vbuckets): 64, as a Raft group each costs a node's CPU,
// and twelve race-built nodes of 1024 groups each on a 2-core machine
// kept their groups electing (TestServeCluster keeps Couchbase's 1024).
const testVBuckets = 64

// partitionOfKey is the partition (of testVBuckets) a key hashes to, as
// Couchbase's SDKs compute it.
func partitionOfKey(key string) int {
	return int((crc32.ChecksumIEEE([]byte(key)) >> 16) % testVBuckets)
}

// kvConfig is the part of a bucket configuration the routing test reads.
type kvConfig struct {
	Rev              int64 `json:"rev"`
	VBucketServerMap struct {
		ServerList []string `json:"serverList"`
		VBucketMap [][]int  `json:"vBucketMap"`
	} `json:"vBucketServerMap"`
}

// leaderKV returns the KV address a configuration served by node n names
// for key's partition's leader ("$HOST" replaced by n's host), or an
// error when it names none (the partition electing).
func (c *kvConfig) leaderKV(n *procNode, key string) (string, error) {
	m := c.VBucketServerMap
	if len(m.ServerList) != 3 || len(m.VBucketMap) != testVBuckets {
		return "", fmt.Errorf("%s's configuration lists %d servers and %d partitions, want 3 and %d: %+v", n.name, len(m.ServerList), len(m.VBucketMap), testVBuckets, m.ServerList)
	}
	row := m.VBucketMap[partitionOfKey(key)]
	if len(row) != 3 || row[0] < 0 {
		return "", fmt.Errorf("%s's configuration: partition of %s maps to %v", n.name, key, row)
	}
	addr := m.ServerList[row[0]]
	if h, p, ok := strings.Cut(addr, ":"); ok && h == "$HOST" {
		nh, _, _ := net.SplitHostPort(n.kv)
		addr = net.JoinHostPort(nh, p)
	}
	return addr, nil
}

// kvClusterConfig is node n's configuration of the default bucket, as
// GET_CLUSTER_CONFIG on its KV port answers it.
func kvClusterConfig(t *testing.T, n *procNode) *kvConfig {
	t.Helper()
	nc, err := net.Dial("tcp", n.kv)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_, r := kvBootstrap(t, nc)
	var cfg kvConfig
	if err := json.Unmarshal(r.Value, &cfg); err != nil {
		t.Fatalf("GET_CLUSTER_CONFIG from %s: %v %q", n.name, err, r.Value)
	}
	return &cfg
}

// kvGet sends a GET of key to node n's KV port and returns the status,
// and the configuration a NOT_MY_VBUCKET answer carries.
func kvGet(t *testing.T, n *procNode, key string) (memd.StatusCode, *kvConfig, error) {
	t.Helper()
	nc, err := net.Dial("tcp", n.kv)
	if err != nil {
		return 0, nil, err
	}
	defer nc.Close()
	mc, _ := kvBootstrap(t, nc)
	if err := mc.WritePacket(&memd.Packet{Magic: memd.CmdMagicReq, Command: memd.CmdGet, Key: []byte(key), Vbucket: uint16(partitionOfKey(key))}); err != nil {
		return 0, nil, err
	}
	r, _, err := mc.ReadPacket()
	if err != nil {
		return 0, nil, err
	}
	if r.Status != memd.StatusNotMyVBucket {
		return r.Status, nil, nil
	}
	var cfg kvConfig
	if err := json.Unmarshal(r.Value, &cfg); err != nil {
		return r.Status, nil, fmt.Errorf("NOT_MY_VBUCKET from %s carries no configuration: %v %q", n.name, err, r.Value)
	}
	return r.Status, &cfg, nil
}

// kvRoutesToLeader checks what an SDK relies on for key: every node of
// nodes that does not lead its partition answers NOT_MY_VBUCKET with a
// configuration naming a node that does, which answers the GET; one node
// does. Leadership may move meanwhile: the caller retries.
func kvRoutesToLeader(t *testing.T, nodes []*procNode, key string) error {
	t.Helper()
	byKV := map[string]*procNode{}
	for _, n := range nodes {
		byKV[n.kv] = n
	}
	leaders := 0
	for _, n := range nodes {
		st, cfg, err := kvGet(t, n, key)
		switch {
		case err != nil:
			return err
		case st == memd.StatusSuccess:
			leaders++
			continue
		case st != memd.StatusNotMyVBucket:
			return fmt.Errorf("GET %s on %s: status %v", key, n.name, st)
		}
		addr, err := cfg.leaderKV(n, key)
		if err != nil {
			return err
		}
		named := byKV[addr]
		if named == nil || named == n {
			return fmt.Errorf("NOT_MY_VBUCKET from %s for %s names %s", n.name, key, addr)
		}
		if st, _, err := kvGet(t, named, key); err != nil || st != memd.StatusSuccess {
			return fmt.Errorf("NOT_MY_VBUCKET from %s for %s names %s, which answers %v (%v)", n.name, key, named.name, st, err)
		}
	}
	if leaders != 1 {
		return fmt.Errorf("%d nodes answer GET %s as its leader", leaders, key)
	}
	return nil
}

// TestReplicatedClusterSurvivesKill runs three `mayfly serve --peers`
// processes on loopback. Writes (HTTP PUT and DELETE, memcached set, add,
// incr, delete) sent through one node are forwarded to each partition's
// leader and acknowledged once committed on a majority and applied there;
// reads through every node are routed to the leader too, so each reads
// every acknowledged write at once with the CAS and sequence number the
// writer was told, and answers exactly as the leader does. The KV port
// does not forward: a node that does not lead a key's partition answers
// NOT_MY_VBUCKET with a configuration naming the leader. A document that expires is expired by its
// partition leader's pager on every node. One node is killed with SIGKILL: its
// partitions elect leaders among the survivors and writes go on, and no
// acknowledged write is lost; restarted on its data, it catches up. Two
// nodes killed, the survivor acknowledges no write.
func TestReplicatedClusterSurvivesKill(t *testing.T) {
	nodes, peers := startedKVCluster(t)

	// Leadership follows the map: every group's leader becomes the map's
	// preferred leader (the writes below then land where the map says).
	started := time.Now()
	pm := placedAndLed(t, nodes, peers)
	t.Logf("leaders follow the map %v after the nodes served", time.Since(started).Round(100*time.Millisecond))

	acked := map[string]ackedDoc{}
	var slowest time.Duration // the longest write, retries included (logged, never asserted)
	write := func(method, key, value string) {
		start := time.Now()
		acked[key] = writeAnywhere(t, nodes, method, key, value)
		slowest = max(slowest, time.Since(start))
	}
	began := time.Now()
	for i := range 60 {
		write(http.MethodPut, fmt.Sprintf("k%d", i), fmt.Sprintf(`{"v":%d}`, i))
	}
	for i := range 10 {
		write(http.MethodPut, fmt.Sprintf("k%d", i), fmt.Sprintf(`{"v":%d,"again":true}`, i))
	}
	for i := 10; i < 15; i++ {
		write(http.MethodDelete, fmt.Sprintf("k%d", i), "")
	}
	t.Logf("75 writes through %s in %v, the longest %v (the first waits for the groups' elections)", nodes[0].name, time.Since(began), slowest)
	leaders := map[string]bool{}
	for _, a := range acked {
		leaders[a.node] = true
	}
	if len(leaders) < 2 {
		// The map spreads preferred leaders evenly.
		t.Fatalf("the writes through %s were all acknowledged by %v: none was forwarded", nodes[0].name, leaders)
	}
	// Reads are routed to the leader too: every node reads every
	// acknowledged write at once (a temporary failure, a group between
	// leaders, retried as a client retries it), and answers exactly as the
	// leader does.
	for _, n := range nodes {
		if err := readsAcked(n, acked); err != nil {
			t.Fatalf("a read right after the acknowledged writes: %v", err)
		}
	}
	for k := range acked {
		var first []byte
		for i, n := range nodes {
			code, body, err := getDoc(n.http, k+"?meta=true")
			if err != nil {
				t.Fatal(err)
			}
			body = append(fmt.Appendf(nil, "%d ", code), body...)
			if i == 0 {
				first = body
			} else if string(body) != string(first) {
				t.Fatalf("%s: %s answers %s, %s %s", k, n.name, body, nodes[0].name, first)
			}
		}
	}

	// The memcached port: every command through one node is carried out
	// by each key's leader, and every node answers reads alike.
	for i := range 9 {
		memcachedThrough(t, nodes[0], fmt.Sprintf("set mc%d 3 0 4\r\n\"m%d\"\r\n", i, i), "STORED")
	}
	memcachedThrough(t, nodes[0], "incr mcn 1\r\n", "NOT_FOUND")
	memcachedThrough(t, nodes[1], "add mc0 0 0 1\r\nx\r\n", "NOT_STORED")
	for i := range 9 {
		k := fmt.Sprintf("mc%d", i)
		var first string
		for j, n := range nodes {
			reply, err := memcachedReply(n.mc, "gets "+k+"\r\n")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(reply, "VALUE "+k+" 3 4 ") {
				t.Fatalf("gets %s through %s: %q", k, n.name, reply)
			}
			if j == 0 {
				first = reply
			} else if reply != first {
				t.Fatalf("gets %s: %s answers %q, %s %q", k, n.name, reply, nodes[0].name, first)
			}
		}
		var env struct {
			Meta struct {
				CAS uint64 `json:"cas"`
			} `json:"meta"`
		}
		code, body, err := getDoc(nodes[2].http, k+"?meta=true")
		if err != nil || code != http.StatusOK || json.Unmarshal(body, &env) != nil || !strings.Contains(first, fmt.Sprintf(" %d\r\n", env.Meta.CAS)) {
			t.Fatalf("%s over HTTP: %d %s %v; gets answered %q", k, code, body, err, first)
		}
	}
	// (A key never written may sit in a partition still electing its
	// first leader on a busy machine: "no leader at the moment", retried.)
	reply, err := memcachedReplyElected(nodes[1].mc, "get mc1 nope mc0 mc2\r\n")
	if err != nil || reply != "VALUE mc1 3 4\r\n\"m1\"\r\nVALUE mc0 3 4\r\n\"m0\"\r\nVALUE mc2 3 4\r\n\"m2\"\r\nEND\r\n" {
		t.Fatalf("a multi-get through %s: %q %v", nodes[1].name, reply, err)
	}
	for i := range 9 {
		memcachedThrough(t, nodes[i%3], fmt.Sprintf("delete mc%d\r\n", i), "DELETED")
		acked[fmt.Sprintf("mc%d", i)] = ackedDoc{deleted: true}
	}
	if reply, err := memcachedReplyElected(nodes[2].mc, "get mc0 mc4\r\n"); err != nil || reply != "END\r\n" {
		t.Fatalf("deleted keys read through %s: %q %v", nodes[2].name, reply, err)
	}

	// _bulk through one node: each line is carried out by its key's
	// leader and answered with the leader's line, in order.
	var bulk strings.Builder
	for i := range 8 {
		fmt.Fprintf(&bulk, `{"op":"upsert","id":"bulk%d","doc":{"v":%d,"bulk":true}}`+"\n", i, 200+i)
	}
	eventuallyT(t, "a _bulk through "+nodes[0].name, func() error {
		req, _ := http.NewRequest(http.MethodPost, "http://"+nodes[0].http+"/default/_bulk", strings.NewReader(bulk.String()))
		req.SetBasicAuth("Administrator", "password")
		req.Header.Set("Content-Type", "application/x-ndjson")
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		lines := strings.Split(strings.TrimSpace(string(body)), "\n")
		if resp.StatusCode != http.StatusOK || len(lines) != 8 {
			t.Fatalf("_bulk: %d %s", resp.StatusCode, body)
		}
		for i, l := range lines {
			var res struct {
				ID       string `json:"id"`
				CAS, Seq uint64
				Error    string `json:"error"`
			}
			if err := json.Unmarshal([]byte(l), &res); err != nil || res.ID != fmt.Sprintf("bulk%d", i) {
				t.Fatalf("_bulk line %d: %s", i, l)
			}
			if res.Error != "" {
				return fmt.Errorf("line %d: %s", i, l) // electing, or not committed in time: written again
			}
			acked[res.ID] = ackedDoc{value: fmt.Sprintf(`{"v":%d,"bulk":true}`, 200+i), cas: res.CAS, seq: res.Seq}
		}
		return nil
	})
	for _, n := range nodes {
		if err := readsAcked(n, acked); err != nil {
			t.Fatalf("after the _bulk: %v", err)
		}
	}

	// The KV port does not forward: a node that does not lead a key's
	// partition answers NOT_MY_VBUCKET with a configuration naming the
	// leader, as Couchbase does, so an SDK sends it there.
	for _, k := range []string{"k1", "k2", "k3", "k4", "k5"} {
		eventuallyT(t, "the KV port sends "+k+" to its leader", func() error { return kvRoutesToLeader(t, nodes, k) })
	}

	// Views: every node answers as one node holding every document.
	viewsAgree(t, nodes, acked)

	expiresOnEveryNode(t, nodes, acked)

	// Kill the node (not the one written through) that leads most of the
	// partitions written; the survivors take over its partitions.
	led := map[string]int{}
	for _, a := range acked {
		led[a.node]++
	}
	victim := nodes[1]
	if led[nodes[2].name] > led[victim.name] {
		victim = nodes[2]
	}
	if led[victim.name] == 0 {
		t.Fatalf("%s acknowledged none of %d writes: it leads none of their partitions", victim.name, len(acked))
	}
	before := kvClusterConfig(t, nodes[0])
	victimKey := ""
	for k, a := range acked {
		if a.node == victim.name {
			victimKey = k
			break
		}
	}
	victim.kill()
	began, slowest = time.Now(), 0
	for i := 60; i < 120; i++ {
		write(http.MethodPut, fmt.Sprintf("k%d", i), fmt.Sprintf(`{"v":%d,"after":"kill"}`, i))
	}
	for i := 20; i < 25; i++ {
		write(http.MethodDelete, fmt.Sprintf("k%d", i), "")
	}
	t.Logf("65 writes after the kill in %v, the longest %v (a partition the killed node led waits for its election)", time.Since(began), slowest)
	// An SDK takes a configuration only with a higher rev than the one it
	// holds: once the survivors lead the dead node's partitions, the
	// configuration names them with a higher rev.
	eventuallyT(t, "the KV configuration names a survivor leading "+victimKey+" with a higher rev", func() error {
		cfg := kvClusterConfig(t, nodes[0])
		row := cfg.VBucketServerMap.VBucketMap[partitionOfKey(victimKey)]
		if row[0] < 0 || cfg.VBucketServerMap.ServerList[row[0]] == victim.kv {
			return fmt.Errorf("partition of %s led by server %d of %v (%s was killed)", victimKey, row[0], cfg.VBucketServerMap.ServerList, victim.kv)
		}
		if cfg.Rev <= before.Rev {
			return fmt.Errorf("rev %d after the leadership moved, %d before", cfg.Rev, before.Rev)
		}
		return nil
	})
	for _, n := range nodes {
		if n != victim {
			eventuallyT(t, n.name+" reads every write acknowledged before and after the kill", func() error { return readsAcked(n, acked) })
		}
	}
	// The cluster's status shows the dead node lagging, as the survivors
	// leading the partitions written since report it.
	eventuallyT(t, "the status shows "+victim.name+" lagging", func() error {
		st, err := clusterStatus(peers)
		if err != nil {
			return err
		}
		bs, _ := st.Bucket("default")
		for _, l := range bs.Lagging {
			if l.Follower == victim.name && l.Why == "down" && len(l.Partitions) > 0 && l.Leader != victim.name {
				return nil
			}
		}
		return fmt.Errorf("lagging: %+v", bs.Lagging)
	})

	// Back on its data, it catches up (and takes writes with the others).
	victim.start(t)
	restarted := time.Now()
	victim.started(t)
	for i := 120; i < 140; i++ {
		write(http.MethodPut, fmt.Sprintf("k%d", i), fmt.Sprintf(`{"v":%d,"after":"restart"}`, i))
	}
	for _, n := range nodes {
		eventuallyT(t, n.name+" reads every acknowledged write after the restart", func() error { return readsAcked(n, acked) })
	}
	eventuallyT(t, victim.name+" caught up: nothing lags", func() error {
		st, err := clusterStatus(peers)
		if err != nil {
			return err
		}
		if bs, _ := st.Bucket("default"); len(bs.Lagging) > 0 {
			return fmt.Errorf("lagging: %+v", bs.Lagging)
		}
		return nil
	})
	// The restarted node's partitions are handed back to it: the map's
	// preferred leaders lead again (no failover: the map did not change).
	eventuallyT(t, "leadership back with the map's preferred leaders after the restart", func() error { return leadersFollowMap(nodes, pm) })
	t.Logf("leaders follow the map again %v after the restart", time.Since(restarted).Round(100*time.Millisecond))

	// A node that lost its majority never acknowledges a write: with two
	// of the three killed, writes through the survivor (to partitions it
	// led, and to those the dead led) fail within their bound, 503 or
	// SERVER_ERROR, and none is acknowledged.
	nodes[1].kill()
	nodes[2].kill()
	survivor := nodes[0]
	type outcome struct {
		what string
		ok   bool
	}
	results := make(chan outcome, 4)
	byLeader := map[string]string{} // a key whose write each node acknowledged
	for k, a := range acked {
		if a.node != "" && strings.HasPrefix(k, "k") {
			byLeader[a.node] = k
		}
	}
	if len(byLeader) < 2 {
		t.Fatalf("the writes were acknowledged by %v", byLeader)
	}
	for _, key := range byLeader {
		go func() {
			code, body, err := docReq(http.MethodPut, survivor.http, key, `{"v":"lost"}`)
			results <- outcome{fmt.Sprintf("PUT %s (led by %s): %d %s %v", key, acked[key].node, code, body, err),
				err == nil && (code == http.StatusOK || code == http.StatusCreated) || err == nil && code != http.StatusServiceUnavailable}
		}()
	}
	go func() {
		reply, err := memcachedCmd(survivor.mc, "set k33 0 0 1\r\nx\r\n")
		results <- outcome{fmt.Sprintf("memcached set k33: %q %v", reply, err), err == nil && !strings.HasPrefix(reply, "SERVER_ERROR")}
	}()
	for range 4 {
		r := <-results
		if r.ok {
			t.Fatalf("a node without its majority acknowledged (or misanswered) a write: %s", r.what)
		}
		t.Logf("refused without a majority: %s", r.what)
	}
	survivor.kill() // its etcd has no quorum either: no clean shutdown to wait for
}

// clusterStatus reads the cluster's status as `mayfly cluster status
// --peers` does.
func clusterStatus(peers []string) (*cluster.Status, error) {
	var st *cluster.Status
	err := withPeersClient(peers, func(ctx context.Context, cli *clientv3.Client) (err error) {
		st, err = cluster.ReadStatus(ctx, cli, nil)
		return err
	})
	return st, err
}

// withPeersClient calls fn with an etcd client of the cluster whose peers
// are given, as `mayfly cluster --peers` connects, within 10 s.
func withPeersClient(peers []string, fn func(context.Context, *clientv3.Client) error) error {
	ps, err := cluster.ParsePeers(strings.Join(peers, ","))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := cluster.Connect(ctx, cluster.ClientEndpoints(ps, cluster.DefaultEtcdClientOffset), 5*time.Second, nil)
	if err != nil {
		return err
	}
	defer cli.Close()
	return fn(ctx, cli)
}

// memcachedReplyElected is memcachedReply, asked again while the answer
// says a partition has no leader yet (an election under way), for up to
// three minutes (a hang guard).
func memcachedReplyElected(addr, cmd string) (string, error) {
	deadline := time.Now().Add(3 * time.Minute) // wall clock: a hang guard
	for {
		reply, err := memcachedReply(addr, cmd)
		if err != nil || !strings.Contains(reply, "no leader at the moment") || time.Now().After(deadline) { // wall clock: a hang guard
			return reply, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startedKVCluster is the three-process cluster of the tests that use its
// memcached and KV ports: skipped under -short, run in parallel with the
// package's other such tests, every node started and serving.
func startedKVCluster(t *testing.T) ([]*procNode, []string) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	t.Parallel()
	nodes, peers := procCluster(t, "--memcached", "127.0.0.1:0", "--kv", "127.0.0.1:0")
	for _, n := range nodes {
		n.start(t)
	}
	for _, n := range nodes {
		n.started(t)
	}
	return nodes, peers
}

// placedAndLed waits until the default bucket's partition map is placed
// and every partition's group is led by the map's preferred leader, and
// returns the map.
func placedAndLed(t *testing.T, nodes []*procNode, peers []string) *cluster.PartitionMap {
	t.Helper()
	var m *cluster.PartitionMap
	eventuallyT(t, "the default bucket placed", func() (err error) {
		m, err = readDefaultMap(peers)
		return err
	})
	eventuallyT(t, "every group led by the map's preferred leader", func() error { return leadersFollowMap(nodes, m) })
	return m
}

// procCluster returns three cluster nodes on loopback, not started (their
// ports below the ephemeral range), with the given flags besides the
// common ones (say which memcached and KV ports: serve's defaults are
// fixed ports), and the peer list; they are stopped when the test ends,
// their output logged if it failed.
func procCluster(t *testing.T, flags ...string) ([]*procNode, []string) {
	t.Helper()
	return procClusterN(t, 3, flags...)
}

// startServing starts nodes ns (all, then each's HTTP address once it
// serves and replicates), so that they elect and join together.
func startServing(t *testing.T, ns ...*procNode) {
	t.Helper()
	for _, n := range ns {
		n.start(t)
	}
	for _, n := range ns {
		n.http = served(t, n.out, "serving HTTP on http://", "replicating on ")[0]
	}
}

// procClusterN is procCluster with n nodes (the first three run etcd
// members). A flag given in flags overrides the common one (the last
// given wins).
func procClusterN(t *testing.T, size int, flags ...string) ([]*procNode, []string) {
	t.Helper()
	// The default 100 ms tick, race-built too: idle groups go quiet, so
	// three processes of 1024 groups each no longer heartbeat each tick
	// (before quiescing, race-built on a shared 2-core machine, heartbeats
	// came later than the election timeout and the groups kept electing:
	// 75 writes not done in 12 min; a 1 s tick was needed there).
	tick := "100ms"
	if raceNodes() {
		// Quiet groups pass at 100 ms under the race detector too (4 runs
		// of 4), but before the groups first go quiet the three processes
		// elect 1024 groups each, and CI runs beside other packages' tests
		// on 2 cores: a longer tick keeps that start from storming there.
		tick = "500ms"
	}
	var peers []string
	for i := range size {
		peers = append(peers, fmt.Sprintf("n%d=127.0.0.1:%d", i+1, freeTriple(t)))
	}
	nodes := make([]*procNode, size)
	for i := range nodes {
		n := &procNode{name: fmt.Sprintf("n%d", i+1), dir: t.TempDir()}
		n.args = append([]string{"serve", "--data", n.dir, "--http", "127.0.0.1:0",
			"--views", "", "--search", "", "--log-level", "error", "--memory-overhead-mb", "-1", "--heap-ratio", "0",
			"--node", n.name, "--peers", strings.Join(peers, ","), "--cluster-lease", "3s", "--cluster-failover-timeout", "10m", "--cluster-raft-tick", tick,
			"--num-vbuckets", fmt.Sprint(testVBuckets)},
			flags...)
		nodes[i] = n
	}
	t.Cleanup(func() {
		// The last first: a node beyond the third (no etcd member) stops
		// while etcd still has its quorum. Stopped after the members, it
		// does not exit on SIGTERM, and stop waits out its minute before
		// the SIGKILL (60 s of each four-node test whose fourth node was
		// alive at its end).
		for _, n := range slices.Backward(nodes) {
			n.stop()
		}
		for _, n := range nodes {
			if n.out != nil && raceNodes() {
				raceReported(t, n.name, n.out.String())
			}
		}
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("%s's output:\n%s", n.name, n.out.String())
			}
		}
	})
	return nodes, peers
}

// nodeReq sends an administrator's request to node n's HTTP port and
// decodes its JSON answer into out.
func nodeReq(n *procNode, method, path string, out any) error {
	req, err := http.NewRequest(method, "http://"+n.http+path, nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth("Administrator", "password")
	cl := http.Client{Timeout: time.Minute}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s on %s: %d %s", method, path, n.name, resp.StatusCode, body)
	}
	return json.Unmarshal(body, out)
}

// itemCounts waits until every node counts want live documents.
func itemCounts(t *testing.T, nodes []*procNode, want int64) {
	t.Helper()
	for _, n := range nodes {
		eventuallyT(t, fmt.Sprintf("%s counts %d items", n.name, want), func() error {
			// The node's own copies (its stats' curr_items), not the
			// bucket's basicStats.itemCount, which counts each document
			// of the cluster once.
			var st struct {
				CurrItems int64 `json:"curr_items"`
			}
			if err := nodeReq(n, http.MethodGet, "/pools/default/buckets/default/stats", &st); err != nil {
				return err
			}
			if st.CurrItems != want {
				return fmt.Errorf("curr_items %d", st.CurrItems)
			}
			return nil
		})
	}
}

// expiresOnEveryNode writes a document that expires in a second and runs
// every node's expiry pager once it has: the partition's leader expires it
// (a replicated write), the others purge nothing, and every node's item
// count drops (acked holds every other document written). The document
// is never read meanwhile (a read on the leader
// would expire it first).
func expiresOnEveryNode(t *testing.T, nodes []*procNode, acked map[string]ackedDoc) {
	t.Helper()
	var items int64
	for _, a := range acked {
		if !a.deleted {
			items++
		}
	}
	itemCounts(t, nodes, items)
	writeAnywhere(t, nodes, http.MethodPut, "exp?expiry=1", `{"v":"expires"}`)
	itemCounts(t, nodes, items+1)
	time.Sleep(2 * time.Second) // past its expiry (the processes' wall clock)
	purged := 0
	eventuallyT(t, "the expiry pagers expire the document", func() error {
		for _, n := range nodes {
			var res struct {
				Purged int `json:"purged"`
			}
			if err := nodeReq(n, http.MethodPost, "/pools/default/buckets/default/controller/runExpiryPager", &res); err != nil {
				return err
			}
			purged += res.Purged
		}
		if purged != 1 {
			return fmt.Errorf("the pagers purged %d", purged)
		}
		return nil
	})
	itemCounts(t, nodes, items)
	for _, n := range nodes {
		if code, body, err := getDoc(n.http, "exp"); err != nil || code != http.StatusNotFound {
			t.Fatalf("%s reads the expired document: %d %s %v", n.name, code, body, err)
		}
	}
}
