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
	defaultSteps  = 3000
	defaultBudget = 45 * time.Second
	numKeys       = 24
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
	// _stats) and "j" (key g, a JavaScript reduce giving the largest n).
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
		`"j":{"map":"function (doc, meta) { emit(doc.g, doc.n); }","reduce":"function (keys, values, rereduce) { var m = -1e9; for (var i = 0; i < values.length; i++) { if (values[i] > m) { m = values[i]; } } return m; }"}}}`, more: true},
}

// entry is the model of one key.
type entry struct {
	// present: the document is live or expired but not yet purged (it
	// counts in curr_items and its rows are in the index).
	present bool
	g, n    int
	exp     int64 // absolute Unix seconds, 0 none
	// tomb is the tombstone a non-present key holds: 0 none (never written,
	// or metadata-purged), 1 a delete's, 2 an expiration's.
	tomb int
	// noRows: an expiration brought back by a reopen (expirations are
	// durable lazily). The index consumed its tombstone before the reopen,
	// and the document is back under its older sequence number, so its rows
	// stay out of the index until the index is rebuilt from the feed (a
	// design document with other functions), which maps it as the expired,
	// unpurged document it is again.
	noRows bool
}

func (e *entry) expired(now int64) bool { return e.present && e.exp != 0 && e.exp <= now }
func (e *entry) live(now int64) bool    { return e.present && !e.expired(now) }

// purgeExpired records an expiration: the document leaves, its tombstone
// stays, and its value and expiration are kept, as a reopen may bring them back.
func (e *entry) purgeExpired() { e.present, e.tomb, e.noRows = false, 2, false }

type harness struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	dir   string
	clk   *engine.FakeClock
	eng   *engine.Engine
	b     *engine.Bucket
	coll  *engine.Collection
	svc   *views.Service
	pg    *pager.Manager
	model map[string]*entry
	ddoc  int // index into variants, -1 none
	step  int
	hist  []string
	cov   coverage
}

// coverage counts what a run exercised, logged at its end.
type coverage struct {
	queries, rows, expiredRows, noRows, rebuiltNoRows, reopens, exactQueries int
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
		dir: t.TempDir(), clk: engine.NewFakeClock(t0), model: map[string]*entry{}, ddoc: -1}
	for i := range numKeys {
		h.model[key(i)] = &entry{}
	}
	h.open(true)
	t.Cleanup(h.close)
	start := time.Now()
	for h.step = 1; h.step <= steps; h.step++ {
		if budget > 0 && time.Since(start) > budget {
			t.Logf("stopped after %d steps: time budget %v spent", h.step-1, budget)
			break
		}
		touched := h.doStep()
		h.check(touched)
	}
	t.Logf("%d steps in %v; %+v", h.step-1, time.Since(start).Round(time.Millisecond), h.cov)
}

func key(i int) string { return fmt.Sprintf("k%02d", i) }

func (h *harness) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
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
		if _, err := h.eng.CreateBucket(ctx, engine.DefaultBucketSettings(bucketName)); err != nil {
			h.failf("CreateBucket: %v", err)
		}
	}
	if h.b, err = h.eng.Bucket(bucketName); err != nil {
		h.failf("Bucket: %v", err)
	}
	h.coll = h.b.DefaultCollection()
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

// doStep runs one random step and returns the key it touched ("" if none).
func (h *harness) doStep() string {
	ctx, cancel := h.ctx()
	defer cancel()
	now := h.clk.Now()
	k := key(h.rng.IntN(numKeys))
	m := h.model[k]
	g, n := h.rng.IntN(6), h.rng.IntN(151)-50
	switch r := h.rng.IntN(100); {
	case r < 24: // upsert
		e := h.expiry()
		preserve := h.rng.IntN(8) == 0
		h.logStep("upsert %s g=%d n=%d expiry=%d preserve=%v", k, g, n, e, preserve)
		_, err := h.coll.Upsert(ctx, k, value(g, n), &engine.WriteOptions{Expiry: e, PreserveExpiry: preserve})
		h.expectErr("upsert "+k, err, nil)
		exp := absExpiry(now, e)
		if preserve && m.live(now) {
			exp = m.exp
		}
		*m = entry{present: true, g: g, n: n, exp: exp}
		return k
	case r < 32: // insert
		e := h.expiry()
		h.logStep("insert %s g=%d n=%d expiry=%d", k, g, n, e)
		_, err := h.coll.Insert(ctx, k, value(g, n), &engine.WriteOptions{Expiry: e})
		if m.live(now) {
			h.expectErr("insert "+k, err, engine.ErrKeyExists)
		} else {
			h.expectErr("insert "+k, err, nil)
			*m = entry{present: true, g: g, n: n, exp: absExpiry(now, e)}
		}
		return k
	case r < 40: // replace
		e := h.expiry()
		h.logStep("replace %s g=%d n=%d expiry=%d", k, g, n, e)
		_, err := h.coll.Replace(ctx, k, value(g, n), &engine.WriteOptions{Expiry: e})
		if m.live(now) {
			h.expectErr("replace "+k, err, nil)
			*m = entry{present: true, g: g, n: n, exp: absExpiry(now, e)}
		} else {
			h.expectErr("replace "+k, err, engine.ErrNotFound)
		}
		return k
	case r < 48: // delete
		h.logStep("delete %s", k)
		_, err := h.coll.Delete(ctx, k, nil)
		if m.live(now) {
			h.expectErr("delete "+k, err, nil)
			*m = entry{tomb: 1}
		} else {
			h.expectErr("delete "+k, err, engine.ErrNotFound)
		}
		return k
	case r < 56: // touch
		e := h.expiry()
		h.logStep("touch %s expiry=%d", k, e)
		_, err := h.coll.Touch(ctx, k, e)
		if m.live(now) {
			h.expectErr("touch "+k, err, nil)
			m.exp = absExpiry(now, e)
		} else {
			h.expectErr("touch "+k, err, engine.ErrNotFound)
		}
		return k
	case r < 64: // get
		h.logStep("get %s", k)
		d, err := h.coll.Get(ctx, k)
		var ee *engine.ExpiredError
		switch {
		case m.live(now):
			if err != nil {
				h.failf("get %s: %v, the model has it live", k, err)
			}
			h.checkDoc(k, d)
		case m.expired(now):
			if !errors.As(err, &ee) {
				h.failf("get %s: got %v, the model has it expired (want an *ExpiredError)", k, err)
			}
			m.purgeExpired()
		default:
			if !errors.Is(err, engine.ErrNotFound) || errors.As(err, &ee) {
				h.failf("get %s: got %v, want plain ErrNotFound", k, err)
			}
		}
		return k
	case r < 76: // clock
		sec := h.rng.Int64N(11)
		h.logStep("advance %ds", sec)
		h.clk.Advance(sec)
	case r < 83: // expiry pager
		if h.rng.IntN(2) == 0 {
			limit := 1 + h.rng.IntN(4)
			h.logStep("ExpireBatch loop, limit %d", limit)
			for {
				_, more, err := h.b.ExpireBatch(ctx, limit)
				if err != nil {
					h.failf("ExpireBatch: %v", err)
				}
				if !more {
					break
				}
			}
			if err := h.b.Sync(ctx); err != nil {
				h.failf("Sync: %v", err)
			}
		} else {
			h.logStep("pager RunNow")
			if _, err := h.pg.RunNow(ctx, bucketName); err != nil {
				h.failf("pager RunNow: %v", err)
			}
		}
		for _, m := range h.model {
			if m.expired(now) {
				m.purgeExpired()
			}
		}
	case r < 87: // metadata purge
		h.logStep("PurgeTombstones(olderThan=now)")
		if h.ddoc >= 0 {
			// Every tombstone is consumed once a stale=false query has
			// caught the index up; the purge may then remove them all.
			h.queryRows()
		}
		want := 0
		for _, m := range h.model {
			if !m.present && m.tomb != 0 {
				want++
			}
		}
		total := 0
		for {
			n, more, err := h.b.PurgeTombstones(ctx, now, 1+h.rng.IntN(5))
			if err != nil {
				h.failf("PurgeTombstones: %v", err)
			}
			total += n
			if !more || n == 0 {
				break
			}
		}
		if total != want {
			h.failf("PurgeTombstones purged %d tombstones, the model has %d", total, want)
		}
		for _, m := range h.model {
			if !m.present {
				m.tomb = 0
			}
		}
	case r < 93: // put a design document
		v := h.rng.IntN(len(variants))
		h.logStep("put ddoc variant %d (was %d)", v, h.ddoc)
		if _, err := h.svc.PutDesignDoc(ctx, bucketName, ddocName, []byte(variants[v].body)); err != nil {
			h.failf("PutDesignDoc: %v", err)
		}
		if h.ddoc < 0 || variants[h.ddoc].funcs() != variants[v].funcs() { // the index is rebuilt
			for _, m := range h.model {
				if m.noRows {
					h.cov.rebuiltNoRows++
				}
				m.noRows = false // the rebuilt index maps every document
			}
		}
		h.ddoc = v
	case r < 96: // delete the design document
		h.logStep("delete ddoc (was %d)", h.ddoc)
		err := h.svc.DeleteDesignDoc(ctx, bucketName, ddocName)
		if h.ddoc >= 0 {
			h.expectErr("DeleteDesignDoc", err, nil)
		} else {
			h.expectErr("DeleteDesignDoc", err, views.ErrNotFound)
		}
		h.ddoc = -1
	default: // close and reopen everything
		h.logStep("reopen")
		h.cov.reopens++
		h.close()
		h.open(false)
		// Expirations are durable lazily: an expiration whose tombstone
		// the metadata purge has not removed is an expired, unpurged
		// document again.
		for _, m := range h.model {
			if !m.present && m.tomb == 2 {
				m.present, m.tomb, m.noRows = true, 0, true
			}
		}
	}
	return ""
}

// checkDoc checks a document read from the engine against the model.
func (h *harness) checkDoc(k string, d *engine.Document) {
	h.t.Helper()
	m := h.model[k]
	if want := value(m.g, m.n); !bytes.Equal(d.Value, want) {
		h.failf("%s: value %s, the model has %s", k, d.Value, want)
	}
	if d.Expiration != m.exp {
		h.failf("%s: expiration %d, the model has %d", k, d.Expiration, m.exp)
	}
}

// check compares everything observable with the model.
func (h *harness) check(touched string) {
	ctx, cancel := h.ctx()
	defer cancel()
	now := h.clk.Now()
	if err := h.eng.Check(ctx); err != nil {
		h.failf("engine.Check: %v", err)
	}
	if touched != "" && h.model[touched].live(now) {
		d, err := h.coll.Get(ctx, touched)
		if err != nil {
			h.failf("get %s: %v, the model has it live", touched, err)
		}
		h.checkDoc(touched, d)
	}
	var curr, tombs, withExp int64
	for i := range numKeys {
		k := key(i)
		m := h.model[k]
		if m.present {
			curr++
			if m.exp != 0 {
				withExp++
			}
		} else if m.tomb != 0 {
			tombs++
		}
		d, err := h.coll.Peek(k)
		if m.live(now) {
			if err != nil {
				h.failf("peek %s: %v, the model has it live", k, err)
			}
			h.checkDoc(k, d)
		} else if !errors.Is(err, engine.ErrNotFound) {
			h.failf("peek %s: got %v, want ErrNotFound (model: %+v)", k, err, *m)
		}
	}
	st := h.b.Stats()
	if st.CurrItems != curr {
		h.failf("curr_items %d, the model has %d (live + expired unpurged)", st.CurrItems, curr)
	}
	if st.Tombstones != tombs {
		h.failf("tombstones %d, the model has %d", st.Tombstones, tombs)
	}
	if st.WithExpiry != withExp {
		h.failf("documents with expiry %d, the model has %d", st.WithExpiry, withExp)
	}
	if h.ddoc >= 0 {
		rows := h.queryRows()
		h.checkReduce(rows)
		h.checkExclude()
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
// unpurged, but not a reopened expiration's until a rebuild: see
// entry.noRows), in key then ID order. It returns the rows.
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
		if m.noRows {
			h.cov.noRows++
		}
		if !m.present || m.noRows {
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
