package chaostest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/mayflydb/mayfly/cluster"
)

const (
	clients   = 8  // concurrent clients, each on a random node per operation
	mcClients = 2  // of which this many use the memcached port
	keySpace  = 20 // keys: small, so histories conflict
	killEvery = 20 * time.Second
	downFor   = 5 * time.Second
)

// history collects operations from every client.
type history struct {
	mu  sync.Mutex
	ops []porcupine.Operation
}

func (h *history) add(op porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// killWindow is one node's kill and restart.
type killWindow struct {
	node            string
	killed, resumed int64 // ns since the start of the run
	caughtUp        time.Duration
}

// TestChaos runs three nodes under load, kills one with SIGKILL every
// killEvery and restarts it downFor later, then checks that no
// acknowledged write was lost and that every key's history is
// linearizable. MAYFLY_CHAOS is the load's duration (e.g. 2m).
func TestChaos(t *testing.T) {
	spec := os.Getenv("MAYFLY_CHAOS")
	if spec == "" {
		t.Skip("set MAYFLY_CHAOS to a duration (make chaos CHAOS=2m) to run the cluster chaos test")
	}
	dur, err := time.ParseDuration(spec)
	if err != nil || dur <= 0 {
		t.Fatalf("MAYFLY_CHAOS=%q: want a duration such as 2m", spec)
	}
	bin := buildServer(t, t.TempDir())
	logDir, err := os.MkdirTemp("", "mayfly-chaos-logs-")
	if err != nil {
		t.Fatal(err)
	}
	nodes, peers := newCluster(t, bin, logDir)
	ctx := context.Background()
	defer func() {
		for _, n := range nodes {
			n.kill()
		}
		if t.Failed() {
			t.Logf("the nodes' logs are kept in %s", logDir)
		} else {
			os.RemoveAll(logDir)
		}
	}()
	for _, n := range nodes {
		if err := n.start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // a hang, not a busy machine
		err := n.started(sctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Wait until every node takes writes (the partitions elected leaders):
	// keys outside the key space, so the history starts from missing keys.
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	warm := time.Now().Add(2 * time.Minute) // wall clock: a hang guard
	for i, n := range nodes {
		for {
			out, _, err := doHTTP(ctx, cl, n, input{kind: opSet, key: fmt.Sprintf("warm%d", i), value: `{"warm":1}`})
			if err == nil && out.kind == outOK {
				break
			}
			if time.Now().After(warm) { // wall clock: a hang guard
				t.Fatalf("%s takes no write: %+v %v", n.name, out, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	t0 := time.Now() // wall clock: the history's time base (monotonic)
	now := func() int64 { return time.Since(t0).Nanoseconds() }
	var hist history
	var refused atomic.Int64
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	failures := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), uint64(t0.UnixNano())))
			read := map[string]struct {
				value string
				cas   uint64
			}{}
			seq := 0
			for runCtx.Err() == nil {
				n := nodes[rng.IntN(len(nodes))]
				key := fmt.Sprintf("k%d", rng.IntN(keySpace))
				in := input{key: key}
				switch r := rng.IntN(100); {
				case r < 40:
					in.kind = opGet
				case r < 65:
					seq++
					in.kind, in.value = opSet, valueOf(c, seq, false)
				case r < 75:
					seq++
					in.kind, in.value = opSet, valueOf(c, seq, true)
				case r < 90:
					last, ok := read[key]
					if !ok {
						in.kind = opGet
						break
					}
					seq++
					in.kind, in.value, in.expect, in.cas = opCAS, valueOf(c, seq, false), last.value, last.cas
				default:
					in.kind = opDelete
				}
				door := "http"
				var (
					out output
					cas uint64
					err error
				)
				call := now()
				if c < mcClients {
					door = "memcached"
					out, cas, err = doMemcached(runCtx, n, in)
				} else {
					out, cas, err = doHTTP(runCtx, cl, n, in)
				}
				ret := now()
				in.via = n.name + " " + door
				switch {
				case errors.Is(err, errRefused):
					refused.Add(1)
					time.Sleep(20 * time.Millisecond) // the node is down, or electing
					continue
				case err != nil:
					failures <- err
					return
				case out.kind == outUnknown && runCtx.Err() != nil && in.kind == opGet:
					continue
				}
				if in.kind == opGet {
					if out.kind == outUnknown {
						continue // a read that did not answer changed nothing
					}
					if out.kind == outOK {
						read[key] = struct {
							value string
							cas   uint64
						}{out.value, cas}
					} else {
						delete(read, key)
					}
				}
				if out.kind == outUnknown {
					ret = -1 // set to after the end once it is known
				}
				hist.add(porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
			}
		}()
	}

	// The chaos: kill a node every killEvery, restart it downFor later;
	// rotate the victims. Each restart's catch-up is timed.
	var windows []*killWindow
	var catchWG sync.WaitGroup
	end := time.After(dur)
	victim := 0
	func() {
		for {
			select {
			case <-end:
				return
			case err := <-failures:
				stop()
				t.Fatal(err)
			case <-time.After(killEvery):
			}
			n := nodes[victim%len(nodes)]
			victim++
			w := &killWindow{node: n.name, killed: now()}
			windows = append(windows, w)
			n.kill()
			t.Logf("%.1fs: killed %s", float64(w.killed)/1e9, n.name)
			time.Sleep(downFor)
			if err := n.start(); err != nil {
				stop()
				t.Fatal(err)
			}
			sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			err := n.started(sctx)
			cancel()
			if err != nil {
				stop()
				t.Fatal(err)
			}
			w.resumed = now()
			t.Logf("%.1fs: %s serves again", float64(w.resumed)/1e9, n.name)
			catchWG.Add(1)
			go func() {
				defer catchWG.Done()
				for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) { // wall clock: a hang guard
					lags, err := lagging(ctx, peers)
					if err == nil && !slices.ContainsFunc(lags, func(l cluster.Lagging) bool { return l.Follower == n.name }) {
						w.caughtUp = time.Duration(now() - w.resumed)
						return
					}
				}
				w.caughtUp = -1
			}()
		}
	}()
	stop()
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Fatal(err)
	}
	loadEnd := now()
	catchWG.Wait()

	// Every node serves and nothing lags; then every key read through
	// every node: all agree, and each read joins the history.
	for _, n := range nodes {
		if !n.up() {
			t.Fatalf("%s is down at the end", n.name)
		}
	}
	deadline := time.Now().Add(3 * time.Minute) // wall clock: a hang guard
	for {
		lags, err := lagging(ctx, peers)
		if err == nil && len(lags) == 0 {
			break
		}
		if time.Now().After(deadline) { // wall clock: a hang guard
			t.Fatalf("still lagging after the load: %+v %v", lags, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	final := map[string]string{}
	for k := range keySpace {
		key := fmt.Sprintf("k%d", k)
		for i, n := range nodes {
			var out output
			for try := 0; ; try++ {
				call := now()
				var err error
				out, _, err = doHTTP(ctx, cl, n, input{kind: opGet, key: key})
				if err != nil {
					t.Fatalf("the final read of %s through %s: %v", key, n.name, err)
				}
				if out.kind != outUnknown {
					hist.add(porcupine.Operation{ClientId: clients, Input: input{kind: opGet, key: key, via: n.name + " final"}, Call: call, Output: out, Return: now()})
					break
				}
				if try == 100 {
					t.Fatalf("the final read of %s through %s does not answer", key, n.name)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if i == 0 {
				final[key] = out.value
			} else if out.value != final[key] {
				t.Errorf("%s reads %q through %s, %q through %s", key, out.value, n.name, final[key], nodes[0].name)
			}
		}
	}
	after := now() + int64(time.Hour)
	ops := hist.ops
	var acked, unknown, total int
	why := map[string]int{}
	var killLat, calmLat []time.Duration
	for i := range ops {
		in, out := ops[i].Input.(input), ops[i].Output.(output)
		if ops[i].ClientId == clients {
			continue
		}
		total++
		if out.kind == outUnknown {
			ops[i].Return = after // may take effect any time after its call
			unknown++
			why[digits.ReplaceAllString(out.why, "N")]++
			continue
		}
		if in.kind == opGet || out.kind != outOK {
			continue
		}
		acked++
		lat := time.Duration(ops[i].Return - ops[i].Call)
		inKill := false
		for _, w := range windows {
			if ops[i].Call < w.resumed && ops[i].Return > w.killed {
				inKill = true
			}
		}
		if inKill {
			killLat = append(killLat, lat)
		} else {
			calmLat = append(calmLat, lat)
		}
	}
	t.Logf("%d operations in %.1fs (%.0f ops/s, %d clients, %d on memcached), %d writes acknowledged, %d outcomes unknown, %d refused (not applied, left out), %d kills",
		total, float64(loadEnd)/1e9, float64(total)/(float64(loadEnd)/1e9), clients, mcClients, acked, unknown, refused.Load(), len(windows))
	t.Logf("acknowledged write latency, p50/p99/max: across a kill (killed → serving again) %s; otherwise %s", pcts(killLat), pcts(calmLat))
	for w, n := range why {
		t.Logf("unknown outcome: %d × %s", n, w)
	}
	for _, w := range windows {
		t.Logf("kill of %s at %.1fs: write gap per key (kill → first acknowledged write called after it), p50/max over %d keys: %s",
			w.node, float64(w.killed)/1e9, keySpace, writeGaps(ops, w.killed))
	}
	for _, w := range windows {
		t.Logf("kill of %s at %.1fs: down %.1fs (restart until serving included), caught up (nothing lagging) %v after",
			w.node, float64(w.killed)/1e9, float64(w.resumed-w.killed)/1e9, w.caughtUp.Round(10*time.Millisecond))
		if w.caughtUp < 0 {
			t.Errorf("%s did not catch up", w.node)
		}
	}

	if lost := lostWrites(ops, final); len(lost) > 0 {
		t.Errorf("%d keys lost an acknowledged write:\n%s", len(lost), lost)
	}
	model := registerModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, ops, 5*time.Minute)
	switch res {
	case porcupine.Ok:
		t.Logf("the history of %d operations is linearizable", len(ops))
	case porcupine.Illegal:
		for _, s := range staleReads(ops) {
			t.Log(s)
		}
		path := filepath.Join(os.TempDir(), fmt.Sprintf("mayfly-chaos-%d.html", time.Now().UnixNano())) // wall clock: a unique file name
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Errorf("the history is not linearizable (and its visualisation failed: %v)", err)
		} else {
			t.Errorf("the history is not linearizable: see %s", path)
		}
	default:
		t.Errorf("porcupine could not decide within its timeout whether the history is linearizable")
	}
}

// digits are the numbers in an error, left out of the tally.
var digits = regexp.MustCompile(`[0-9]+`)

// staleReads lists the reads that returned a value an acknowledged write
// had replaced before the read was sent, or missed a key an acknowledged
// write had written (no delete in between): the plainest illegal
// operations, named for a person investigating porcupine's verdict.
func staleReads(ops []porcupine.Operation) []string {
	type span struct{ call, ret int64 }
	written := map[string]span{} // value → its acknowledged write
	var acked []porcupine.Operation
	for _, op := range ops {
		in, out := op.Input.(input), op.Output.(output)
		if in.kind != opGet && out.kind == outOK {
			acked = append(acked, op)
			if in.kind != opDelete {
				written[in.value] = span{op.Call, op.Return}
			}
		}
	}
	var lines []string
	for _, op := range ops {
		in, out := op.Input.(input), op.Output.(output)
		if in.kind != opGet || out.kind != outOK {
			continue
		}
		w, ok := written[out.value]
		if !ok {
			continue
		}
		for _, a := range acked {
			ai := a.Input.(input)
			if ai.key == in.key && a.Call > w.ret && a.Return < op.Call && ai.value != out.value {
				lines = append(lines, fmt.Sprintf("stale read at %.3fs–%.3fs: get %s via %s read %s, replaced by %s (acknowledged at %.3fs)",
					float64(op.Call)/1e9, float64(op.Return)/1e9, in.key, in.via, out.value,
					registerModel.DescribeOperation(a.Input, a.Output), float64(a.Return)/1e9))
				break
			}
		}
	}
	return lines
}

// writeGaps sums up, over the keys, the time from a kill until the first
// acknowledged write called after it returned: for a key whose partition
// the killed node led, the time its clients could not write it.
func writeGaps(ops []porcupine.Operation, killed int64) string {
	first := map[string]int64{}
	for _, op := range ops {
		in, out := op.Input.(input), op.Output.(output)
		if in.kind == opGet || out.kind != outOK || op.Call < killed {
			continue
		}
		if f, ok := first[in.key]; !ok || op.Return < f {
			first[in.key] = op.Return
		}
	}
	var gaps []time.Duration
	for _, f := range first {
		gaps = append(gaps, time.Duration(f-killed))
	}
	if len(gaps) == 0 {
		return "no write acknowledged"
	}
	slices.Sort(gaps)
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("%v/%v (%d keys written)", r(gaps[len(gaps)/2]), r(gaps[len(gaps)-1]), len(gaps))
}

// pcts formats p50/p99/max of ds.
func pcts(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	slices.Sort(ds)
	at := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return fmt.Sprintf("%v/%v/%v (%d writes)", r(at(0.5)), r(at(0.99)), r(ds[len(ds)-1]), len(ds))
}
