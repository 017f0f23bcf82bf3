package chaostest

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mayflydb/mayfly/cluster"
)

// partitionFor is how long the partition case keeps its victim cut off:
// 30 s, or a third of the load when that is shorter.
func partitionFor(dur time.Duration) time.Duration { return min(30*time.Second, dur/3) }

// partitionOf is the partition of key among n, as the engine hashes it
// (Couchbase's vBucket hash: CRC32 of the key, bits 16 and up, modulo n).
func partitionOf(key string, n int) int {
	return int((crc32.ChecksumIEEE([]byte(key)) >> 16) % uint32(n))
}

// partitionCut is what the partition case saw of its one cut.
type partitionCut struct {
	victim          *node
	led             map[int]bool // partitions the victim's groups led both just before and just after the cut
	mapLed          int          // partitions the map names the victim the preferred leader of
	parts           int          // the bucket's partitions
	cutAt, healAt   int64        // the victim's cut took effect / healing was asked (ns since the start)
	healed          int64        // every node's cut lifted
	seenLagging     bool         // a leader reported the victim lagging during the cut
	caughtUp        time.Duration
	nothingLagging  time.Duration // from healed until no replica at all lags
	majorityWritten int           // acknowledged writes through the other nodes during the cut
}

// runPartition is the partition case: the register load on three nodes
// for dur, and from the middle of it one node (the one leading the most
// partitions, about a third) cut off from both others' Raft traffic for
// partitionFor(dur), in both directions, connections open; then healed.
// Beyond the register checks: no write acknowledged through the victim,
// while it was cut, for a partition it led (its groups cannot commit);
// the victim seen lagging while cut, and its catch-up time once healed.
// etcd's traffic is not cut (its member keeps its lease): a partition of
// the Raft traffic only.
func runPartition(t *testing.T, bin string, dur time.Duration) {
	logDir := newLogDir(t)
	nodes, peers := newCluster(t, bin, logDir)
	r := startNodes(t, nodes, peers, logDir)
	ctx := context.Background()
	pc, err := partitionVictim(ctx, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	failures := r.startRegisterClients(runCtx, &wg)
	cutFor := partitionFor(dur)
	endAt := time.Now().Add(dur) // wall clock: the load's length
	// wait waits d, failing on a client's error.
	wait := func(d time.Duration) {
		select {
		case err := <-failures:
			stop()
			t.Fatal(err)
		case <-time.After(d):
		}
	}
	wait((dur - cutFor) / 2)

	// The cut: the victim drops its peers' frames and they drop its; the
	// victim's own cut (both directions) is the one that counts.
	var others []string
	for _, n := range nodes {
		if n != pc.victim {
			others = append(others, n.name)
		}
	}
	before, err := r.groupLeads(ctx, pc.victim)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	if err := pc.victim.setCut(ctx, others); err != nil {
		stop()
		t.Fatal(err)
	}
	pc.cutAt = r.now()
	// The partitions whose groups on the victim lead both before and just
	// after the cut (it does not know yet that it leads alone): those a
	// write through it cannot commit while cut. A partition led elsewhere
	// may rightly take writes through it, routed to its leader.
	after, err := r.groupLeads(ctx, pc.victim)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	pc.led = map[int]bool{}
	for p := range before {
		if after[p] {
			pc.led[p] = true
		}
	}
	for _, n := range nodes {
		if n != pc.victim {
			if err := n.setCut(ctx, []string{pc.victim.name}); err != nil {
				stop()
				t.Fatal(err)
			}
		}
	}
	t.Logf("%.1fs: %s cut from %s: its groups led %d of %d partitions before the cut, %d after, %d both (the map: %d)",
		float64(pc.cutAt)/1e9, pc.victim.name, strings.Join(others, ","), len(before), pc.parts, len(after), len(pc.led), pc.mapLed)
	for until := time.Now().Add(cutFor); time.Now().Before(until); { // wall clock: the cut's length
		wait(min(time.Until(until), time.Second))
		if lags, err := lagging(ctx, peers); err == nil && slices.ContainsFunc(lags, func(l cluster.Lagging) bool { return l.Follower == pc.victim.name }) {
			pc.seenLagging = true
		}
	}

	// The heal, then the catch-up: until no leader reports the victim
	// lagging, and until nothing lags at all.
	pc.healAt = r.now()
	for _, n := range nodes {
		if err := n.setCut(ctx, nil); err != nil {
			stop()
			t.Fatal(err)
		}
	}
	pc.healed = r.now()
	t.Logf("%.1fs: healed (every node's cut lifted %.0f ms after asked)", float64(pc.healed)/1e9, float64(pc.healed-pc.healAt)/1e6)
	pc.caughtUp, pc.nothingLagging = -1, -1
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline) && pc.nothingLagging < 0; { // wall clock: a hang guard
		select {
		case err := <-failures:
			stop()
			t.Fatal(err)
		case <-time.After(250 * time.Millisecond):
		}
		lags, err := lagging(ctx, peers)
		if err != nil {
			continue
		}
		if pc.caughtUp < 0 && !slices.ContainsFunc(lags, func(l cluster.Lagging) bool { return l.Follower == pc.victim.name }) {
			pc.caughtUp = time.Duration(r.now() - pc.healed)
		}
		if len(lags) == 0 {
			pc.nothingLagging = time.Duration(r.now() - pc.healed)
		}
	}
	wait(time.Until(endAt))
	stop()
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Fatal(err)
	}
	loadEnd := r.now()
	r.registerChecks(ctx, loadEnd)
	pc.check(r)
}

// partitionVictim picks the node the default bucket's map names preferred
// leader of the most partitions, about a third of them (leadership follows
// the map; the partitions its groups actually lead are read at the cut),
// or pick when not nil.
func partitionVictim(ctx context.Context, r *run, pick *node) (*partitionCut, error) {
	var m *cluster.PartitionMap
	err := withEtcd(ctx, r.peers, func(ctx context.Context, cli *clientv3.Client) (err error) {
		m, _, err = cluster.ReadMap(ctx, cli, "default")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the default bucket's map: %w", err)
	}
	if m == nil || len(m.Partitions) == 0 {
		return nil, fmt.Errorf("the default bucket has no map")
	}
	leads := map[string]map[int]bool{}
	for p, part := range m.Partitions {
		if leads[part.Leader] == nil {
			leads[part.Leader] = map[int]bool{}
		}
		leads[part.Leader][p] = true
	}
	pc := &partitionCut{parts: len(m.Partitions)}
	for _, n := range r.nodes {
		if pick == nil && (pc.victim == nil || len(leads[n.name]) > pc.mapLed) || n == pick {
			pc.victim, pc.mapLed = n, len(leads[n.name])
		}
	}
	return pc, nil
}

// setCut makes the node drop the Raft traffic of peers (none: heal) and
// waits until it says so in its log. The file is replaced whole (a
// rename), so that the node never reads it half written.
func (n *node) setCut(ctx context.Context, peers []string) error {
	tmp := n.cutFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(peers, ",")), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, n.cutFile); err != nil {
		return err
	}
	line := "chaos: Raft traffic cut from nobody\n"
	if len(peers) > 0 {
		sorted := slices.Sorted(slices.Values(peers))
		line = "chaos: Raft traffic cut from " + strings.Join(sorted, ",") + "\n"
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute) // a hang, not a busy machine
	defer cancel()
	for {
		b, _ := os.ReadFile(n.log)
		text := string(b)
		if i := strings.LastIndex(text, "=== start "); i >= 0 && strings.HasSuffix(lastLine(text[i:], "chaos: Raft traffic cut from "), line) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not log %q: %w (log %s)", n.name, strings.TrimSpace(line), ctx.Err(), n.log)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// lastLine is the last line of text beginning with prefix, with its
// newline ("" when none).
func lastLine(text, prefix string) string {
	text = text[:strings.LastIndexByte(text, '\n')+1] // whole lines only
	i := strings.LastIndex(text, prefix)
	if i < 0 {
		return ""
	}
	return text[i : i+strings.IndexByte(text[i:], '\n')+1]
}

// check asserts that nothing was acknowledged through the victim, while
// it was cut, for a partition it led, unless another node carried it out:
// once the victim's groups step down, it sends their partitions' requests
// to the leaders the majority elected (their published lead records), and
// the HTTP answer names that node (X-Mayfly-Routed-To). A memcached answer
// does not say where the write was carried out; the victim's memcached
// writes of such partitions are counted apart and left to the history's
// linearizability. It logs the case's figures.
func (pc *partitionCut) check(r *run) {
	t := r.t
	via := pc.victim.name + " "
	var minority, victimOther, victimUnknown, victimRouted, victimMemcached int
	for _, op := range r.hist.ops {
		in, out := op.Input.(input), op.Output.(output)
		if in.kind == opGet || op.ClientId == clients || op.Call < pc.cutAt || op.Call >= pc.healAt {
			continue
		}
		if !strings.HasPrefix(in.via, via) {
			if out.kind == outOK && op.Return < pc.healAt {
				pc.majorityWritten++
			}
			continue
		}
		switch {
		case out.kind == outUnknown:
			victimUnknown++
		case out.kind != outOK || op.Return >= pc.healAt:
		case pc.led[partitionOf(in.key, pc.parts)] && out.routedTo != "" && out.routedTo != pc.victim.name:
			victimRouted++
		case pc.led[partitionOf(in.key, pc.parts)] && strings.Contains(in.via, "memcached"):
			victimMemcached++
		case pc.led[partitionOf(in.key, pc.parts)]:
			minority++
			t.Errorf("a write acknowledged through the cut %s for partition %d, which it led: %s called at %.3fs, acknowledged at %.3fs (cut %.3fs–%.3fs)",
				pc.victim.name, partitionOf(in.key, pc.parts), registerModel.DescribeOperation(in, out), float64(op.Call)/1e9, float64(op.Return)/1e9, float64(pc.cutAt)/1e9, float64(pc.healAt)/1e9)
		default:
			victimOther++
		}
	}
	t.Logf("partition: %s cut for %.1fs; writes called during the cut: through the other nodes %d acknowledged (%.0f/s); through %s %d acknowledged for partitions it led by itself, %d for them carried out by the majority's new leaders (HTTP, routed), %d for them on its memcached port (where carried out not known), %d for partitions others led (routed to their leaders), %d without an outcome (timed out)",
		pc.victim.name, float64(pc.healAt-pc.cutAt)/1e9, pc.majorityWritten, float64(pc.majorityWritten)/(float64(pc.healAt-pc.cutAt)/1e9), pc.victim.name, minority, victimRouted, victimMemcached, victimOther, victimUnknown)
	ledKey := func(key string) bool { return pc.led[partitionOf(key, pc.parts)] }
	t.Logf("partition: write gap per key after the cut (cut → first acknowledged write called after it), p50/max: keys of partitions %s led %s; the others %s",
		pc.victim.name, writeGaps(r.hist.ops, pc.cutAt, ledKey), writeGaps(r.hist.ops, pc.cutAt, func(key string) bool { return !ledKey(key) }))
	// A key the majority could not write for most of the cut: its
	// partition's groups there did not take over (logged for a person;
	// availability is not this case's assertion).
	for key, f := range firstWrites(r.hist.ops, pc.cutAt, nil) {
		if gap := time.Duration(f - pc.cutAt); gap > time.Duration(pc.healAt-pc.cutAt)/2 {
			t.Logf("partition: %s (partition %d, led by %s's group at the cut: %v) had no write acknowledged for %v after the cut (healed after %.1fs)",
				key, partitionOf(key, pc.parts), pc.victim.name, ledKey(key), gap.Round(time.Millisecond), float64(pc.healAt-pc.cutAt)/1e9)
		}
	}
	t.Logf("partition: after healing, %s caught up (no leader reports it lagging) in %v, nothing lagging at all in %v (lag reports are a few seconds old at most); reported lagging during the cut: %v",
		pc.victim.name, pc.caughtUp.Round(10*time.Millisecond), pc.nothingLagging.Round(10*time.Millisecond), pc.seenLagging)
	if pc.majorityWritten == 0 {
		t.Errorf("no write was acknowledged through the majority during the cut")
	}
	if !pc.seenLagging {
		t.Errorf("no leader reported %s lagging while it was cut off", pc.victim.name)
	}
	if pc.caughtUp < 0 || pc.nothingLagging < 0 {
		t.Errorf("%s did not catch up within 3 minutes of healing", pc.victim.name)
	}
}

// groupLeads returns the partitions whose Raft group on node n names n
// its leader: the bucket configuration n serves (the leader its group
// knows comes first in each partition's row; the server list is the
// nodes', in the order of their names, as r.nodes).
func (r *run) groupLeads(ctx context.Context, n *node) (map[int]bool, error) {
	code, body, err := call(ctx, r.cl, n, http.MethodGet, "/pools/default/b/default", "", "", 10*time.Second)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s: the bucket configuration: %d %s", n.name, code, body)
	}
	var cfg struct {
		VBucketServerMap struct {
			ServerList []string `json:"serverList"`
			VBucketMap [][]int  `json:"vBucketMap"`
		} `json:"vBucketServerMap"`
	}
	if err := json.Unmarshal(body, &cfg); err != nil {
		return nil, fmt.Errorf("%s: the bucket configuration: %w", n.name, err)
	}
	if len(cfg.VBucketServerMap.ServerList) != len(r.nodes) {
		return nil, fmt.Errorf("%s: the bucket configuration lists %d servers, not %d", n.name, len(cfg.VBucketServerMap.ServerList), len(r.nodes))
	}
	self := slices.Index(r.nodes, n)
	led := map[int]bool{}
	for p, row := range cfg.VBucketServerMap.VBucketMap {
		if len(row) > 0 && row[0] == self {
			led[p] = true
		}
	}
	return led, nil
}
