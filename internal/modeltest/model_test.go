package modeltest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mayflydb/mayfly/engine"
	"github.com/mayflydb/mayfly/pager"
	"github.com/mayflydb/mayfly/views"
)

var (
	stepsFlag = flag.Int("modeltest.steps", 0, "steps of TestModelEngineAndViews (0: the default, or $MAYFLY_MODELTEST_STEPS)")
	seedFlag  = flag.Uint64("modeltest.seed", 0, "seed of TestModelEngineAndViews (0: random, or $MAYFLY_MODELTEST_SEED)")
)

const (
	// defaultSteps is the length of a default run; defaultBudget stops a
	// default run early on a slow machine (a run given -modeltest.steps
	// always runs to the end).
	defaultSteps  = 1500
	defaultBudget = 20 * time.Second
	numKeys       = 24 // keys of the default collection
	numKeys1      = 12 // keys of the second collection
	t0            = 1_700_000_000
	bucketName    = "default"
	ddocName      = "m"
	viewName      = "v"
	historyLen    = 20
)

// ddocVariant is one design document the test puts; every variant has one
// view "v" emitting one row per document, keyed by g (or [g]), valued n.
type ddocVariant struct {
	body    string
	arrayed bool // key is [g] rather than g
	count   bool // reduce is _count rather than _sum
	// more: the design document also has the views "s" (key [g%2, g],
	// _stats), "j" (key g, a JavaScript reduce giving the largest n) and
	// "t" (key the ID, value [meta.ts, meta.created] from t0).
	more bool
}

// funcs names a variant's functions: a design document put over one with
// the same functions keeps its index, else the index is rebuilt.
func (v ddocVariant) funcs() string {
	var d struct {
		Views map[string]struct{ Map, Reduce string }
	}
	json.Unmarshal([]byte(v.body), &d)
	return fmt.Sprint(d.Views)
}

var variants = []ddocVariant{
	{body: `{"views":{"v":{"map":"function (doc, meta) { emit(doc.g, doc.n); }","reduce":"_sum"}}}`},
	{body: `{"views":{"v":{"map":"function (doc, meta) { emit([doc.g], doc.n); }","reduce":"_count"}}}`, arrayed: true, count: true},
	{body: `{"views":{"v":{"map":"function (doc, meta) { if (meta.type == 'json') { emit(doc.g, doc.n); } }","reduce":"_sum"}}}`},
	// Same functions as variant 0: putting it over variant 0 keeps the index.
	{body: `{"views":{"v":{"map":"function (doc, meta) { emit(doc.g, doc.n); }","reduce":"_sum"}},"note":"same functions"}`},
	// Exact answers by default, and two more views for them.
	{body: `{"options":{"expired":"exclude"},"views":{"v":{"map":"function (doc, meta) { emit(doc.g, doc.n); }","reduce":"_sum"},` +
		`"s":{"map":"function (doc, meta) { emit([doc.g % 2, doc.g], doc.n); }","reduce":"_stats"},` +
		`"j":{"map":"function (doc, meta) { emit(doc.g, doc.n); }","reduce":"function (keys, values, rereduce) { var m = -1e9; for (var i = 0; i < values.length; i++) { if (values[i] > m) { m = values[i]; } } return m; }"},` +
		`"t":{"map":"function (doc, meta) { emit(meta.id, [meta.ts - 1700000000, meta.created - 1700000000]); }"}}}`, more: true},
}

// entry is the model of one key.
type entry struct {
	// present: the document is live or expired but not yet purged (it
	// counts in curr_items and its rows are in the index).
	present bool
	g, n    int
	val     []byte
	exp     int64 // absolute Unix seconds, 0 none
	// pinned: a client chose exp (a write with a non-zero expiry, or a
	// touch); sliding reads and re-evaluations leave it alone.
	pinned bool
	// ts is the last write of the value, created the write that made the
	// document live (meta.ts, meta.created).
	ts, created int64
	// ttl is the document's valid top-level "ttl" (-1, n > 0), 0 for none
	// or an invalid one (accepted while defaultTTL was off).
	ttl int64
	// tomb is the tombstone a non-present key holds: 0 none (never written,
	// or metadata-purged), 1 a delete's, 2 an expiration's.
	tomb int
}

func (e *entry) expired(now int64) bool { return e.present && e.exp != 0 && e.exp <= now }
func (e *entry) live(now int64) bool    { return e.present && !e.expired(now) }

// purgeExpired records an expiration: the document leaves and its
// tombstone stays, across reopens too (an expiration is written as its
// tombstone).
func (e *entry) purgeExpired() { e.present, e.tomb = false, 2 }

type harness struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand
	dir  string
	clk  *engine.FakeClock
	eng  *engine.Engine
	b    *engine.Bucket
	svc  *views.Service
	pg   *pager.Manager
	// colls[0] is _default._default, the one views map; colls[1] another
	// collection with its own TTL settings and maxTTL.
	colls []*mcoll
	model map[string]*entry // colls[0].model
	// bucketMaxTTL is the bucket's maxTTL, fixed for the run.
	bucketMaxTTL int64
	// extends is the sliding extensions the model expects since the bucket
	// opened (Stats.SlidingExtends).
	extends int64
	ddoc    int // index into variants, -1 none
	step    int
	hist    []string
	cov     coverage
}

// coverage counts what a run exercised, logged at its end.
type coverage struct {
	queries, rows, expiredRows, reopens, exactQueries                 int
	extends, refusedTTL, reevaluated, updates, pinnedReads, ttlWrites int
	unsyncedReopens                                                   int
}

func envInt(name string) uint64 {
	v, err := strconv.ParseUint(os.Getenv(name), 10, 64)
	if err != nil {
		return 0
	}
	return v
}

func TestModelEngineAndViews(t *testing.T) {
	steps, budget := *stepsFlag, time.Duration(0)
	if steps == 0 {
		steps = int(envInt("MAYFLY_MODELTEST_STEPS"))
	}
	if steps == 0 {
		steps, budget = defaultSteps, defaultBudget
		if testing.Short() {
			steps = 200
		}
	}
	seed := *seedFlag
	if seed == 0 {
		seed = envInt("MAYFLY_MODELTEST_SEED")
	}
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d, %d steps (replay: go test ./internal/modeltest -run TestModelEngineAndViews -modeltest.seed=%d -modeltest.steps=%d)", seed, steps, seed, steps)
	h := &harness{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		dir: t.TempDir(), clk: engine.NewFakeClock(t0), ddoc: -1}
	h.setup()
	t.Cleanup(h.close)
	start := time.Now()
	for h.step = 1; h.step <= steps; h.step++ {
		if budget > 0 && time.Since(start) > budget {
			t.Logf("stopped after %d steps: time budget %v spent", h.step-1, budget)
			break
		}
		cm, k := h.doStep()
		h.check(cm, k)
	}
	t.Logf("%d steps in %v; %+v", h.step-1, time.Since(start).Round(time.Millisecond), h.cov)
}

func key(i int) string { return fmt.Sprintf("k%02d", i) }

func (h *harness) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard: a step under -race on a busy machine
}

// failf fails the test with the seed and the last steps.
func (h *harness) failf(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("step %d (seed %d): %s\nlast steps:\n\t%s", h.step, h.seed, fmt.Sprintf(format, args...), strings.Join(h.hist, "\n\t"))
}

func (h *harness) logStep(format string, args ...any) {
	s := fmt.Sprintf("%d [t=%+d] ", h.step, h.clk.Now()-t0) + fmt.Sprintf(format, args...)
	h.hist = append(h.hist, s)
	if len(h.hist) > historyLen {
		h.hist = h.hist[1:]
	}
}

func (h *harness) open(create bool) {
	var err error
	h.eng, err = engine.Open(h.dir, &engine.Options{Clock: h.clk, NumPartitions: 8, NoSync: false})
	if err != nil {
		h.failf("engine.Open: %v", err)
	}
	ctx, cancel := h.ctx()
	defer cancel()
	if create {
		bs := engine.DefaultBucketSettings(bucketName)
		bs.MaxTTL = h.bucketMaxTTL
		if _, err := h.eng.CreateBucket(ctx, bs); err != nil {
			h.failf("CreateBucket: %v", err)
		}
	}
	if h.b, err = h.eng.Bucket(bucketName); err != nil {
		h.failf("Bucket: %v", err)
	}
	if create {
		h.createCollections(ctx)
	}
	for _, cm := range h.colls {
		if cm.c, err = h.b.Collection(cm.scope, cm.name); err != nil {
			h.failf("Collection %s: %v", cm, err)
		}
	}
	h.extends = 0 // the counter starts again
	if h.svc, err = views.New(ctx, h.eng, nil); err != nil {
		h.failf("views.New: %v", err)
	}
	h.pg = pager.New(h.eng, &pager.Options{BatchSize: 3})
}

func (h *harness) close() {
	if h.eng == nil {
		return
	}
	ctx, cancel := h.ctx()
	defer cancel()
	if err := h.pg.Close(ctx); err != nil {
		h.t.Errorf("pager Close: %v", err)
	}
	if err := h.svc.Close(); err != nil {
		h.t.Errorf("views Close: %v", err)
	}
	if err := h.eng.Close(); err != nil {
		h.t.Errorf("engine Close: %v", err)
	}
	h.eng = nil
}

// expiry picks an expiry as a client gives it, mostly relative.
func (h *harness) expiry() int64 {
	switch r := h.rng.IntN(20); {
	case r < 9:
		return 0
	case r < 18:
		return 1 + h.rng.Int64N(20)
	case r < 19:
		return h.clk.Now() + 1 + h.rng.Int64N(20) // absolute
	default:
		return -1 // expired at once
	}
}

// absExpiry is what the engine stores for expiry e at now (no maxTTL).
func absExpiry(now, e int64) int64 {
	switch {
	case e == 0:
		return 0
	case e < 0:
		return 1
	case e <= engine.MaxRelativeExpiry:
		return now + e
	}
	return e
}

func value(g, n int) []byte { return fmt.Appendf(nil, `{"g":%d,"n":%d}`, g, n) }

// expectErr checks a write's error against the one the model predicts (nil
// for success).
func (h *harness) expectErr(op string, err, want error) {
	h.t.Helper()
	switch {
	case want == nil && err != nil:
		h.failf("%s: %v, the model expects success", op, err)
	case want != nil && !errors.Is(err, want):
		h.failf("%s: got %v, the model expects %v", op, err, want)
	}
}

type row struct {
	ID    string          `json:"id"`
	Key   json.RawMessage `json:"key"`
	Value json.RawMessage `json:"value"`
}

func (h *harness) query(params string) []byte {
	h.t.Helper()
	return h.queryView(viewName, params)
}

func (h *harness) queryView(view, params string) []byte {
	h.t.Helper()
	ctx, cancel := h.ctx()
	defer cancel()
	q, _ := url.ParseQuery(params)
	p, err := views.ParseParams(q, nil)
	if err != nil {
		h.failf("ParseParams(%s): %v", params, err)
	}
	prep, err := h.svc.Prepare(ctx, bucketName, ddocName, view, p)
	if err != nil {
		h.failf("Prepare(%s): %v", params, err)
	}
	var buf bytes.Buffer
	if err := prep.Run(ctx, &buf); err != nil {
		h.failf("query %s: %v\n%s", params, err, buf.Bytes())
	}
	return buf.Bytes()
}

func compact(b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}

// queryRows runs a stale=false map query over the full range and checks its
// rows against the model: every present document's row (live or expired but
// unpurged), in key then ID order. It returns the rows.
func (h *harness) queryRows() []row {
	out := h.query("stale=false&reduce=false&expired=include")
	var ans struct {
		TotalRows int   `json:"total_rows"`
		Rows      []row `json:"rows"`
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		h.failf("map query answer %q: %v", out, err)
	}
	v := variants[h.ddoc]
	rowKey := func(g int) string {
		if v.arrayed {
			return fmt.Sprintf("[%d]", g)
		}
		return strconv.Itoa(g)
	}
	type want struct {
		row
		g int
	}
	var wants []want
	for i := range numKeys {
		k := key(i)
		m := h.model[k]
		if !m.present {
			continue
		}
		wants = append(wants, want{row: row{ID: k, Key: json.RawMessage(rowKey(m.g)), Value: json.RawMessage(strconv.Itoa(m.n))}, g: m.g})
	}
	slices.SortStableFunc(wants, func(a, b want) int {
		if a.g != b.g {
			return a.g - b.g
		}
		return strings.Compare(a.ID, b.ID)
	})
	describe := func() string {
		var sb strings.Builder
		sb.WriteString("got rows:")
		for _, r := range ans.Rows {
			fmt.Fprintf(&sb, " %s:%s=%s", r.ID, compact(r.Key), compact(r.Value))
		}
		sb.WriteString("\n  model rows:")
		for _, w := range wants {
			fmt.Fprintf(&sb, " %s:%s=%s", w.ID, w.Key, w.Value)
		}
		return sb.String()
	}
	h.cov.queries++
	h.cov.rows += len(ans.Rows)
	now := h.clk.Now()
	i := 0
	for _, w := range wants {
		if i < len(ans.Rows) && ans.Rows[i].ID == w.ID {
			if h.model[w.ID].expired(now) {
				h.cov.expiredRows++
			}
			r := ans.Rows[i]
			if compact(r.Key) != string(w.Key) || compact(r.Value) != string(w.Value) {
				h.failf("view row of %s is %s=%s, the model has %s=%s\n  %s", w.ID, compact(r.Key), compact(r.Value), w.Key, w.Value, describe())
			}
			i++
			continue
		}
		h.failf("view rows disagree with the model at %s\n  %s", w.ID, describe())
	}
	if i != len(ans.Rows) {
		h.failf("view has rows the model does not (from %s)\n  %s", ans.Rows[i].ID, describe())
	}
	if ans.TotalRows != len(ans.Rows) {
		h.failf("total_rows %d, but %d rows over the full range", ans.TotalRows, len(ans.Rows))
	}
	return ans.Rows
}

// checkReduce checks the full-range reduce against the rows the map query
// returned (themselves checked against the model).
func (h *harness) checkReduce(rows []row) {
	out := h.query("stale=false&expired=include")
	var ans struct {
		Rows []struct {
			Key   json.RawMessage `json:"key"`
			Value json.RawMessage `json:"value"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		h.failf("reduce answer %q: %v", out, err)
	}
	want := 0
	for _, r := range rows {
		if variants[h.ddoc].count {
			want++
		} else {
			n, _ := strconv.Atoi(string(r.Value))
			want += n
		}
	}
	if len(rows) == 0 {
		if len(ans.Rows) != 0 {
			h.failf("reduce over no rows answers %s, want no rows", compact(out))
		}
		return
	}
	if len(ans.Rows) != 1 || compact(ans.Rows[0].Value) != strconv.Itoa(want) || compact(ans.Rows[0].Key) != "null" {
		h.failf("reduce answers %s, the rows (%d) give %d", compact(out), len(rows), want)
	}
}
