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
	"strings"
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

// The cases TestChaos runs, in this order, when MAYFLY_CHAOS_CASES does
// not name some of them.
var allCases = []string{"kill", "etcd", "expiry", "views", "partition", "isolate", "isolate4", "figures"}

// TestChaos runs the cases MAYFLY_CHAOS_CASES names (a comma-separated
// list of kill, etcd, expiry, views, partition and figures; all of them
// when unset), each on a cluster of its own, one after the other, each
// under load for MAYFLY_CHAOS (e.g. 2m). Every case but partition and
// figures kills a node with SIGKILL
// every killEvery and restarts it downFor later, then checks that no
// acknowledged write was lost and that every key's history is
// linearizable, and then what the case itself is about.
func TestChaos(t *testing.T) {
	spec := os.Getenv("MAYFLY_CHAOS")
	if spec == "" {
		t.Skip("set MAYFLY_CHAOS to a duration (make chaos CHAOS=2m) to run the cluster chaos test")
	}
	dur, err := time.ParseDuration(spec)
	if err != nil || dur <= 0 {
		t.Fatalf("MAYFLY_CHAOS=%q: want a duration such as 2m", spec)
	}
	cases, err := parseCases(os.Getenv("MAYFLY_CHAOS_CASES"))
	if err != nil {
		t.Fatal(err)
	}
	bin := buildServer(t)
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			switch name {
			case "kill":
				runScenario(t, bin, dur, base{})
			case "etcd":
				runScenario(t, bin, dur, &etcdCase{})
			case "expiry":
				runScenario(t, bin, dur, &expiryCase{})
			case "views":
				runScenario(t, bin, dur, &viewsCase{})
			case "partition":
				runPartition(t, bin, dur)
			case "isolate":
				runIsolate(t, bin, dur, 3)
			case "isolate4":
				runIsolate(t, bin, dur, 4)
			case "figures":
				runFigures(t, bin, dur)
			}
		})
	}
}

// parseCases reads MAYFLY_CHAOS_CASES: "" is every case.
func parseCases(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return allCases, nil
	}
	var out []string
	for c := range strings.SplitSeq(s, ",") {
		c = strings.TrimSpace(c)
		if !slices.Contains(allCases, c) {
			return nil, fmt.Errorf("MAYFLY_CHAOS_CASES: unknown case %q (want some of %s)", c, strings.Join(allCases, ","))
		}
		out = append(out, c)
	}
	return out, nil
}

// scenario is one case's hooks around the common run: the register
// clients, the kills and the final register checks. base has them all do
// nothing: the plain kill case.
type scenario interface {
	// setup runs once every node serves, before any load.
	setup(ctx context.Context, r *run) error
	// load starts the case's own clients beside the register clients;
	// they end when ctx does, each calling wg.Done.
	load(ctx context.Context, r *run, wg *sync.WaitGroup)
	// victim is the node the k-th kill (from 0) ends.
	victim(ctx context.Context, r *run, k int) (*node, error)
	// killed runs right after the kill of w.node, before its restart;
	// measurements that go on start goroutines counted in wg.
	killed(ctx context.Context, r *run, w *killWindow, wg *sync.WaitGroup)
	// tick runs about every second on the chaos loop's goroutine, so
	// never while a node is being killed.
	tick(ctx context.Context, r *run)
	// check runs at the end, after the register checks, with every node
	// up and nothing lagging.
	check(ctx context.Context, r *run)
}

// base is a scenario whose hooks do nothing but rotate the victims.
type base struct{}

func (base) setup(context.Context, *run) error                          { return nil }
func (base) load(context.Context, *run, *sync.WaitGroup)                {}
func (base) tick(context.Context, *run)                                 {}
func (base) check(context.Context, *run)                                {}
func (base) killed(context.Context, *run, *killWindow, *sync.WaitGroup) {}
func (base) victim(_ context.Context, r *run, k int) (*node, error) {
	return r.nodes[k%len(r.nodes)], nil
}

// run is one cluster (or one single node) under the harness's load.
type run struct {
	t       *testing.T
	nodes   []*node
	peers   []string // nil for a single node
	cl      *http.Client
	t0      time.Time
	hist    history
	refused atomic.Int64
	windows []*killWindow
}

// now is the time since the run's start, the history's time base.
func (r *run) now() int64 { return time.Since(r.t0).Nanoseconds() }

// upNodes are the nodes serving now.
func (r *run) upNodes() []*node {
	var out []*node
	for _, n := range r.nodes {
		if n.serving.Load() {
			out = append(out, n)
		}
	}
	return out
}

// startNodes starts nodes, waits until each serves HTTP and takes a write
// (its partitions elected leaders), and returns the run. The nodes are
// killed and their logs removed (kept when the test failed, or when
// MAYFLY_CHAOS_KEEP_LOGS is set) at its end.
func startNodes(t *testing.T, nodes []*node, peers []string, logDir string) *run {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() {
		for _, n := range nodes {
			n.kill()
		}
		if t.Failed() || os.Getenv("MAYFLY_CHAOS_KEEP_LOGS") != "" {
			t.Logf("the nodes' logs are kept in %s", logDir)
		} else {
			os.RemoveAll(logDir)
		}
	})
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
		n.serving.Store(true)
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
	return &run{t: t, nodes: nodes, peers: peers, cl: cl, t0: time.Now()} // wall clock: the history's time base (monotonic)
}

// newLogDir is a directory for the nodes' logs, outside the test's
// temporary directories so that it can be kept.
func newLogDir(t *testing.T) string {
	t.Helper()
	logDir, err := os.MkdirTemp("", "mayfly-chaos-logs-")
	if err != nil {
		t.Fatal(err)
	}
	return logDir
}

// startRegisterClients starts the register clients, each counted in wg,
// until ctx ends, and returns the channel their failures come on
// (buffered for every client; the caller closes it after wg.Wait).
func (r *run) startRegisterClients(ctx context.Context, wg *sync.WaitGroup) chan error {
	failures := make(chan error, clients)
	for c := range clients {
		wg.Go(func() { r.registerClient(ctx, c, failures) })
	}
	return failures
}

// registerClient is client c of the register load until ctx ends: random
// operations on random keys of the key space through random nodes, each
// recorded in the history. An error the harness does not expect is sent
// on failures, and ends the client.
func (r *run) registerClient(ctx context.Context, c int, failures chan<- error) {
	rng := rand.New(rand.NewPCG(uint64(c), uint64(r.t0.UnixNano())))
	read := map[string]struct {
		value string
		cas   uint64
	}{}
	seq := 0
	for ctx.Err() == nil {
		n := r.nodes[rng.IntN(len(r.nodes))]
		key := fmt.Sprintf("k%d", rng.IntN(keySpace))
		in := input{key: key}
		switch x := rng.IntN(100); {
		case x < 40:
			in.kind = opGet
		case x < 65:
			seq++
			in.kind, in.value = opSet, valueOf(c, seq, false)
		case x < 75:
			seq++
			in.kind, in.value = opSet, valueOf(c, seq, true)
		case x < 90:
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
		call := r.now()
		if c < mcClients {
			door = "memcached"
			out, cas, err = doMemcached(ctx, n, in)
		} else {
			out, cas, err = doHTTP(ctx, r.cl, n, in)
		}
		ret := r.now()
		in.via = n.name + " " + door
		switch {
		case errors.Is(err, errRefused):
			r.refused.Add(1)
			time.Sleep(20 * time.Millisecond) // the node is down, or electing
			continue
		case err != nil:
			failures <- err
			return
		case out.kind == outUnknown && ctx.Err() != nil && in.kind == opGet:
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
		r.hist.add(porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
	}
}

// runScenario runs one case on a cluster of three nodes: the register
// clients and the case's own load for dur, a node killed every killEvery
// (the case picks which) and restarted downFor later; then every node up,
// nothing lagging, the register checks and the case's.
func runScenario(t *testing.T, bin string, dur time.Duration, sc scenario) {
	logDir := newLogDir(t)
	nodes, peers := newCluster(t, bin, logDir)
	r := startNodes(t, nodes, peers, logDir)
	ctx := context.Background()
	if err := sc.setup(ctx, r); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	failures := r.startRegisterClients(runCtx, &wg)
	sc.load(runCtx, r, &wg)

	// The chaos: kill a node killEvery after the last one serves again,
	// restart it downFor later; each restart's catch-up is timed. The
	// case's tick runs about every second in between (and while a node
	// is down or starting), never during a kill.
	var measureWG sync.WaitGroup
	endAt := time.Now().Add(dur)          // wall clock: the load's length
	nextKill := time.Now().Add(killEvery) // wall clock: the kills' schedule
	fail := func(err error) {
		stop()
		t.Fatal(err)
	}
	// wait ticks until d passed or done is closed.
	wait := func(d time.Duration, done <-chan struct{}) {
		until := time.Now().Add(d) // wall clock: the chaos loop's schedule
		for {
			left := time.Until(until)
			if left <= 0 {
				return
			}
			select {
			case <-done:
				return
			case err := <-failures:
				fail(err)
			case <-time.After(min(left, time.Second)):
			}
			sc.tick(ctx, r)
		}
	}
	for k := 0; ; k++ {
		wait(min(time.Until(endAt), time.Until(nextKill)), nil)
		if !time.Now().Before(endAt) { // wall clock: the load's length
			break
		}
		n, err := sc.victim(ctx, r, k)
		if err != nil {
			fail(err)
		}
		w := &killWindow{node: n.name, killed: r.now()}
		r.windows = append(r.windows, w)
		n.serving.Store(false)
		n.kill()
		t.Logf("%.1fs: killed %s", float64(w.killed)/1e9, n.name)
		sc.killed(ctx, r, w, &measureWG)
		wait(downFor, nil)
		if err := n.start(); err != nil {
			fail(err)
		}
		started := make(chan error, 1)
		go func() {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			started <- n.started(sctx)
		}()
		done := make(chan struct{})
		var serr error
		go func() { serr = <-started; close(done) }()
		wait(3*time.Minute, done)
		<-done
		if serr != nil {
			fail(serr)
		}
		n.serving.Store(true)
		w.resumed = r.now()
		t.Logf("%.1fs: %s serves again", float64(w.resumed)/1e9, n.name)
		measureWG.Add(1)
		go func() {
			defer measureWG.Done()
			for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) { // wall clock: a hang guard
				lags, err := lagging(ctx, peers)
				if err == nil && !slices.ContainsFunc(lags, func(l cluster.Lagging) bool { return l.Follower == n.name }) {
					w.caughtUp = time.Duration(r.now() - w.resumed)
					return
				}
			}
			w.caughtUp = -1
		}()
		nextKill = time.Now().Add(killEvery) // wall clock: the kills' schedule
	}
	stop()
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Fatal(err)
	}
	loadEnd := r.now()
	measureWG.Wait()

	r.registerChecks(ctx, loadEnd)
	sc.check(ctx, r)
}

// noLag waits until no replica lags.
func (r *run) noLag(ctx context.Context) error {
	deadline := time.Now().Add(3 * time.Minute) // wall clock: a hang guard
	for {
		lags, err := lagging(ctx, r.peers)
		if err == nil && len(lags) == 0 {
			return nil
		}
		if time.Now().After(deadline) { // wall clock: a hang guard
			return fmt.Errorf("still lagging after the load: %+v %v", lags, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// registerChecks checks that every node serves and nothing lags, reads
// every key of the key space through every node (all must agree, each
// read joins the history), logs the run's figures, and checks that no
// acknowledged write was lost and that the history is linearizable.
func (r *run) registerChecks(ctx context.Context, loadEnd int64) {
	t := r.t
	for _, n := range r.nodes {
		if !n.up() {
			t.Fatalf("%s is down at the end", n.name)
		}
	}
	if err := r.noLag(ctx); err != nil {
		t.Fatal(err)
	}
	final := map[string]string{}
	for k := range keySpace {
		key := fmt.Sprintf("k%d", k)
		for i, n := range r.nodes {
			var out output
			for try := 0; ; try++ {
				call := r.now()
				var err error
				out, _, err = doHTTP(ctx, r.cl, n, input{kind: opGet, key: key})
				switch {
				case errors.Is(err, errRefused):
					// A node that just served again refuses the
					// partitions whose groups are not running yet.
					out = output{kind: outUnknown}
				case err != nil:
					t.Fatalf("the final read of %s through %s: %v", key, n.name, err)
				}
				if out.kind != outUnknown {
					r.hist.add(porcupine.Operation{ClientId: clients, Input: input{kind: opGet, key: key, via: n.name + " final"}, Call: call, Output: out, Return: r.now()})
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
				t.Errorf("%s reads %q through %s, %q through %s", key, out.value, n.name, final[key], r.nodes[0].name)
			}
		}
	}
	after := r.now() + int64(time.Hour)
	ops := r.hist.ops
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
		if inKillWindow(r.windows, ops[i].Call, ops[i].Return) {
			killLat = append(killLat, lat)
		} else {
			calmLat = append(calmLat, lat)
		}
	}
	t.Logf("%d operations in %.1fs (%.0f ops/s, %d clients, %d on memcached), %d writes acknowledged, %d outcomes unknown, %d refused (not applied, left out), %d kills",
		total, float64(loadEnd)/1e9, float64(total)/(float64(loadEnd)/1e9), clients, mcClients, acked, unknown, r.refused.Load(), len(r.windows))
	t.Logf("acknowledged write latency, p50/p99/max: across a kill (killed → serving again) %s; otherwise %s", pcts(killLat), pcts(calmLat))
	for w, n := range why {
		t.Logf("unknown outcome: %d × %s", n, w)
	}
	for _, w := range r.windows {
		t.Logf("kill of %s at %.1fs: write gap per key (kill → first acknowledged write called after it), p50/max over %d keys: %s",
			w.node, float64(w.killed)/1e9, keySpace, writeGaps(ops, w.killed, nil))
	}
	for _, w := range r.windows {
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
	// First without the writes of unknown outcome whose value nothing
	// read: each may be taken as never applied, so a history linearizable
	// without them is linearizable with them, and each left in is
	// concurrent with every later operation on its key (it may take effect
	// any time), which is what makes the full search slow (~20 of them a
	// key under a busy machine: past 5 minutes). Only when that does not
	// decide is the whole history searched.
	res, info := porcupine.Unknown, porcupine.LinearizationInfo{}
	if seen := unseenUnknownWrites(ops); len(seen) < len(ops) {
		res, info = porcupine.CheckOperationsVerbose(model, seen, 2*time.Minute)
		if res == porcupine.Ok {
			t.Logf("linearizable without the %d writes of unknown outcome whose value no read saw", len(ops)-len(seen))
		}
	}
	if res != porcupine.Ok {
		res, info = porcupine.CheckOperationsVerbose(model, ops, 5*time.Minute)
	}
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

// unseenUnknownWrites is ops without the upserts and CAS replaces of
// unknown outcome whose value no operation read (a get's value, or the
// value a CAS replace expected). Every write writes a value of its own, so
// such a write, if applied, was overwritten or deleted before any read:
// leaving it out keeps every history it could explain but one in which it
// explains a CAS mismatch or a miss, so an Ok verdict without it holds
// with it, and any other verdict is decided on the whole history.
func unseenUnknownWrites(ops []porcupine.Operation) []porcupine.Operation {
	read := map[string]bool{}
	for _, op := range ops {
		in, out := op.Input.(input), op.Output.(output)
		if in.kind == opGet && out.kind == outOK {
			read[out.value] = true
		}
		if in.kind == opCAS {
			read[in.expect] = true
		}
	}
	kept := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		in, out := op.Input.(input), op.Output.(output)
		if out.kind == outUnknown && (in.kind == opSet || in.kind == opCAS) && !read[in.value] {
			continue
		}
		kept = append(kept, op)
	}
	return kept
}

// inKillWindow reports whether an operation from call to ret overlaps a
// kill window (killed → serving again).
func inKillWindow(windows []*killWindow, call, ret int64) bool {
	for _, w := range windows {
		if call < w.resumed && ret > w.killed {
			return true
		}
	}
	return false
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
// keep, when not nil, says which keys count.
func writeGaps(ops []porcupine.Operation, killed int64, keep func(key string) bool) string {
	first := firstWrites(ops, killed, keep)
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

// firstWrites is, per key that keep takes (all when nil), when the first
// acknowledged write called at or after from returned.
func firstWrites(ops []porcupine.Operation, from int64, keep func(key string) bool) map[string]int64 {
	first := map[string]int64{}
	for _, op := range ops {
		in, out := op.Input.(input), op.Output.(output)
		if in.kind == opGet || out.kind != outOK || op.Call < from || keep != nil && !keep(in.key) {
			continue
		}
		if f, ok := first[in.key]; !ok || op.Return < f {
			first[in.key] = op.Return
		}
	}
	return first
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
