package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const (
	bucket   = "default"
	ddocName = "crash"
	// lanes partitions the key space: key i belongs to lane i%lanes, and a
	// lane to one writer goroutine, so a key never has two ops in flight.
	lanes = 32
	// opTimeout bounds one document operation.
	opTimeout = 10 * time.Second
	// queryTimeout bounds a stale=false query or a design document PUT:
	// past it the request counts as a hang.
	queryTimeout = 30 * time.Second
)

// ddocBody is version v of the design document: two views, "rows" (_sum) and
// "cnt" (_count), over equivalent maps of [doc.g, meta.id] to doc.n. Each
// version's functions differ, so replacing one forces a rebuild.
func ddocBody(v int) []byte {
	maps := []string{
		`function(doc, meta){ /* v%d */ if (doc.g !== undefined) emit([doc.g, meta.id], doc.n); }`,
		`function (doc, meta) { // v%d
  if (doc.g === undefined) { return; }
  emit([doc.g, meta.id], doc.n);
}`,
		`function(d, m) { var v = %d; if (typeof d === "object" && d !== null && "g" in d) emit([d.g, m.id], d.n); }`,
	}
	m := fmt.Sprintf(maps[v%len(maps)], v)
	b, _ := json.Marshal(map[string]any{"views": map[string]any{
		"rows": map[string]string{"map": m, "reduce": "_sum"},
		"cnt":  map[string]string{"map": m, "reduce": "_count"},
	}})
	return b
}

// mutationResult is the answer to a write.
type mutationResult struct {
	Expiration int64 `json:"expiration"`
}

// roundStats are one round's counts.
type roundStats struct {
	ops, acked, inflightAtKill, errorsBeforeKill, pagerRuns, ddocPuts atomic.Int64
	queries                                                           atomic.Int64
	liveAnomalies                                                     atomic.Int64
	mu                                                                sync.Mutex
	notes, hangs                                                      []string
}

func (rs *roundStats) hang(format string, args ...any) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.hangs = append(rs.hangs, fmt.Sprintf(format, args...))
}

func (rs *roundStats) note(format string, args ...any) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.notes) < 20 {
		rs.notes = append(rs.notes, fmt.Sprintf(format, args...))
	}
}

// workload is one round's traffic against a server.
type workload struct {
	srv     *server
	m       *model
	nkeys   int
	round   int
	writers int
	seq     *atomic.Int64 // write sequence, unique over the run
	stop    atomic.Bool   // set just before the kill: start no new op
	stats   *roundStats
	// side traffic
	pager     bool
	replaceAt time.Duration // >0: replace the design document then
	ddocVer   *atomic.Int64
	// queries runs stale=false queries during the round; probe delays the
	// kill until the design document replacement and the query in flight
	// have answered (or timed out: a hang).
	queries  bool
	probe    bool
	replaced atomic.Bool
	// pollCommits polls the bucket's ep_commit_num and ep_commit_time
	// during the round (durability none or majority): see lossSince.
	pollCommits bool
	commitMu    sync.Mutex
	commits     []commitSample
	killedAt    time.Time // when the kill was sent
}

// commitSample is one poll of the bucket's commit statistics.
type commitSample struct {
	sent time.Time // when the poll was sent: the server counted after it
	num  int64     // ep_commit_num
	ms   int64     // ep_commit_time: the last commit's duration, whole ms
}

// lossSince returns the moment from which writes acknowledged from memory
// may be lost to the kill: the start of the last commit the polls saw
// complete. That commit ended after the poll before it was sent, and took
// its ep_commit_time (rounded down to the ms), so it started after that
// send less its duration and 1 ms; every write acknowledged before it
// started was in it or in an earlier commit, and so is on disk. With no
// commit seen, every write of the round may be lost (since roundStart).
func (w *workload) lossSince(roundStart time.Time) time.Time {
	w.commitMu.Lock()
	defer w.commitMu.Unlock()
	for i := len(w.commits) - 1; i > 0; i-- {
		if c := w.commits[i]; c.num > w.commits[i-1].num {
			return w.commits[i-1].sent.Add(-time.Duration(c.ms+1) * time.Millisecond)
		}
	}
	return roundStart
}

// run starts the writers and the side goroutines, kills the server after
// killAfter and returns once every goroutine has finished.
func (w *workload) run(rng *rand.Rand, killAfter time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for g := range w.writers {
		var own []int
		for l := g; l < lanes; l += w.writers {
			own = append(own, l)
		}
		r := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		wg.Go(func() { w.writer(ctx, r, own) })
	}
	if w.pager {
		r := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		wg.Go(func() {
			for !w.stop.Load() {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Duration(50+r.IntN(400)) * time.Millisecond):
				}
				if w.stop.Load() {
					return
				}
				st, _, _, err := w.srv.do(ctx, http.MethodPost, "/pools/default/buckets/"+bucket+"/controller/runExpiryPager", nil, queryTimeout)
				if err == nil && st == http.StatusOK {
					w.stats.pagerRuns.Add(1)
				} else if !w.stop.Load() {
					w.stats.note("runExpiryPager before the kill: status %d err %v", st, err)
				}
			}
		})
	}
	if w.pollCommits {
		wg.Go(func() {
			for !w.stop.Load() {
				sent := time.Now()
				st, body, _, err := w.srv.do(ctx, http.MethodGet, "/pools/default/buckets/"+bucket+"/stats", nil, opTimeout)
				var stats map[string]int64
				if err == nil && st == http.StatusOK && json.Unmarshal(body, &stats) == nil && !w.stop.Load() {
					w.commitMu.Lock()
					w.commits = append(w.commits, commitSample{sent: sent, num: stats["ep_commit_num"], ms: stats["ep_commit_time"]})
					w.commitMu.Unlock()
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
	var probeWG sync.WaitGroup
	if w.queries {
		r := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		probeWG.Go(func() {
			for !w.stop.Load() {
				view := []string{"rows", "cnt"}[r.IntN(2)]
				path := "/" + bucket + "/_design/" + ddocName + "/_view/" + view + "?stale=false"
				t0 := time.Now()
				st, body, _, err := w.srv.do(ctx, http.MethodGet, path, nil, queryTimeout)
				switch {
				case w.stop.Load():
				case isTimeout(err):
					w.stats.hang("GET %s during the round did not answer in %v", path, queryTimeout)
					return
				case err != nil || st != http.StatusOK:
					w.stats.note("GET %s during the round: status %d %s err %v", path, st, body, err)
				default:
					w.stats.queries.Add(1)
					if d := time.Since(t0); d > 5*time.Second {
						w.stats.note("GET %s during the round took %v", path, d.Round(time.Millisecond))
					}
				}
				if !w.probe || w.replaceAt == 0 {
					time.Sleep(time.Duration(20+r.IntN(200)) * time.Millisecond)
				} else if w.replaced.Load() {
					return // the probe is over
				}
			}
		})
	}
	if w.replaceAt > 0 {
		probeWG.Go(func() {
			defer w.replaced.Store(true)
			select {
			case <-ctx.Done():
				return
			case <-time.After(w.replaceAt):
			}
			if w.stop.Load() {
				return
			}
			v := int(w.ddocVer.Add(1))
			st, body, _, err := w.srv.do(ctx, http.MethodPut, "/"+bucket+"/_design/"+ddocName, ddocBody(v), queryTimeout)
			switch {
			case err == nil && st/100 == 2:
				w.stats.ddocPuts.Add(1)
			case isTimeout(err) && !w.stop.Load():
				w.stats.hang("design document PUT (version %d) during the round did not answer in %v", v, queryTimeout)
			case !w.stop.Load():
				w.stats.note("design document PUT during the round: status %d %s err %v", st, body, err)
			}
		})
	}
	timer := time.NewTimer(killAfter)
	<-timer.C
	if w.probe {
		probeWG.Wait()
	}
	w.stop.Store(true)
	w.killedAt = time.Now()
	w.stats.mu.Lock()
	hung := len(w.stats.hangs) > 0
	w.stats.mu.Unlock()
	if hung {
		w.srv.dumpAndKill() // the stacks show where it hangs
	} else {
		w.srv.kill()
	}
	cancel()
	wg.Wait()
	probeWG.Wait()
}

// writer does random operations on the keys of its lanes until stopped.
func (w *workload) writer(ctx context.Context, r *rand.Rand, own []int) {
	perLane := (w.nkeys + lanes - 1) / lanes
	for !w.stop.Load() {
		lane := own[r.IntN(len(own))]
		i := lane + lanes*r.IntN(perLane)
		if i >= w.nkeys {
			continue
		}
		if !w.one(ctx, r, i) {
			return
		}
	}
}

// one does one operation on key i and records its outcome; false means an
// unexpected outcome, after which the writer stops (its op stays in flight).
func (w *workload) one(ctx context.Context, r *rand.Rand, i int) bool {
	o := op{sent: time.Now().Unix()}
	x := r.Float64()
	switch {
	case x < 0.60:
		o.kind = opUpsert
	case x < 0.67:
		o.kind, o.expiry = opUpsert, int64(1+r.IntN(2))
	case x < 0.72:
		o.kind, o.expiry = opUpsert, 3600
	case x < 0.87:
		o.kind = opDelete
	default:
		o.kind = opTouch
		o.expiry = []int64{0, 2, 3600}[r.IntN(3)]
	}
	key := keyName(i)
	path := "/" + bucket + "/docs/" + key
	var method string
	var body []byte
	switch o.kind {
	case opUpsert:
		o.val = docValue{G: r.IntN(10), N: r.IntN(1000) - 100, W: w.seq.Add(1), Pad: crashPad}
		body, _ = json.Marshal(o.val)
		method = http.MethodPut
		if o.expiry != 0 {
			path += "?expiry=" + strconv.FormatInt(o.expiry, 10)
		}
	case opDelete:
		method = http.MethodDelete
	case opTouch:
		method = http.MethodPost
		path += "/touch?expiry=" + strconv.FormatInt(o.expiry, 10)
	}
	before := w.m.get(i).cur
	w.m.begin(i, o, w.round)
	w.stats.ops.Add(1)
	st, resp, _, err := w.srv.do(ctx, method, path, body, opTimeout)
	if err != nil {
		if w.stop.Load() {
			w.stats.inflightAtKill.Add(1)
		} else {
			w.stats.errorsBeforeKill.Add(1)
			w.stats.note("%s %s before the kill: %v", method, path, err)
		}
		return false
	}
	switch {
	case st/100 == 2:
		var mr mutationResult
		if jerr := json.Unmarshal(resp, &mr); jerr != nil {
			w.stats.note("%s %s: %d with an unreadable answer %q", method, path, st, resp)
			return false
		}
		var s state
		switch o.kind {
		case opUpsert:
			s = state{present: true, val: o.val, exp: mr.Expiration}
		case opDelete:
			s = state{}
		case opTouch:
			s = before
			s.exp, s.expSlack = mr.Expiration, 0
			if !before.present {
				w.stats.liveAnomalies.Add(1)
				w.stats.note("touch %s succeeded on a key the harness holds absent", key)
				return false
			}
		}
		w.m.ack(i, o, s)
		w.stats.acked.Add(1)
		return true
	case st == http.StatusNotFound && o.kind != opUpsert:
		// Delete or touch of a missing document: no effect.
		if before.present && !before.mayBeExpired(time.Now().Unix()) {
			w.stats.liveAnomalies.Add(1)
			w.stats.note("%s %s answered 404 but the harness holds %v", method, key, before)
		}
		w.m.observe(i, state{})
		return true
	default:
		if !w.stop.Load() {
			w.stats.errorsBeforeKill.Add(1)
			w.stats.note("%s %s: unexpected status %d %s", method, path, st, resp)
		}
		return false
	}
}
