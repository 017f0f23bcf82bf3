package chaostest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The design document every view case defines: one map emitting
// [doc.type, doc.n] → doc.n for the documents with a type (the register
// keys' values have none), reduced by _sum and by _count.
const (
	ddocPath = "/default/_design/chaos"
	ddocBody = `{"views":{` +
		`"sum":{"map":"function (doc, meta) { if (doc.type) { emit([doc.type, doc.n], doc.n); } }","reduce":"_sum"},` +
		`"count":{"map":"function (doc, meta) { if (doc.type) { emit([doc.type, doc.n], doc.n); } }","reduce":"_count"}}}`
	typedKeys = 150 // the views case's documents v000 … v149
)

// putDesignDoc defines the design document through the first node that
// takes it, and waits until every node serves it.
func (r *run) putDesignDoc(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute) // wall clock: a hang guard
	for _, n := range r.nodes {
		for {
			code, b, err := call(ctx, r.cl, n, http.MethodPut, ddocPath, "application/json", ddocBody, opTimeout)
			if err == nil && (code == http.StatusCreated || code == http.StatusOK) {
				break
			}
			if time.Now().After(deadline) { // wall clock: a hang guard
				return fmt.Errorf("defining the design document on %s: %d %s %v", n.name, code, b, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for _, n := range r.nodes {
		for {
			code, b, err := call(ctx, r.cl, n, http.MethodGet, ddocPath+"/_view/sum?stale=ok&limit=1", "", "", opTimeout)
			if err == nil && code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) { // wall clock: a hang guard
				return fmt.Errorf("%s does not serve the design document: %d %s %v", n.name, code, b, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// viewAnswer is a view query's answer as the harness compares it.
type viewAnswer struct {
	TotalRows any   `json:"total_rows,omitempty"`
	Rows      any   `json:"rows"`
	Errors    []any `json:"errors,omitempty"`
}

// queryView asks node n the view with the query string q.
func (r *run) queryView(ctx context.Context, n *node, view, q string) (viewAnswer, error) {
	code, b, err := call(ctx, r.cl, n, http.MethodGet, ddocPath+"/_view/"+view+"?"+q, "", "", 30*time.Second)
	if err != nil {
		return viewAnswer{}, err
	}
	if code == http.StatusServiceUnavailable && bytes.Contains(b, []byte("warming up")) {
		// A node just restarted serves HTTP before its view indexes are
		// open; it has another node merge a query meanwhile (its own
		// share then in "errors"), and answers "retry" itself only when
		// no other node could (README: a view answers once its index is
		// open).
		return viewAnswer{}, fmt.Errorf("%w: view %s?%s on %s: %d %s", errWarmingUp, view, q, n.name, code, b)
	}
	if code != http.StatusOK {
		return viewAnswer{}, fmt.Errorf("%w: view %s?%s on %s: %d %s", errBadAnswer, view, q, n.name, code, b)
	}
	var a viewAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return viewAnswer{}, fmt.Errorf("%w: view %s?%s on %s: %v: %s", errBadAnswer, view, q, n.name, err, b)
	}
	return a, nil
}

// typedDoc is a document the views case writes: its id, type and n.
type typedDoc struct {
	id  string
	typ string
	n   int
}

// viewRow is one map row as the model computes it.
type viewRow struct {
	ID    string `json:"id"`
	Key   []any  `json:"key"`
	Value int    `json:"value"`
}

// viewModel is the view computed from documents: what a node holding them
// must answer. Keys [type, n] of lowercase one-letter types and small
// integers collate as (type, n); ids v000 … (fixed width) collate as
// their bytes; ties on a key are ordered by id.
type viewModel struct{ rows []viewRow }

func newViewModel(docs []typedDoc) viewModel {
	rows := []viewRow{}
	for _, d := range docs {
		rows = append(rows, viewRow{ID: d.id, Key: []any{d.typ, d.n}, Value: d.n})
	}
	slices.SortFunc(rows, func(a, b viewRow) int {
		if c := strings.Compare(a.Key[0].(string), b.Key[0].(string)); c != 0 {
			return c
		}
		if c := a.Key[1].(int) - b.Key[1].(int); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return viewModel{rows: rows}
}

// groups reduces the rows by their key truncated to level (0: one group
// of all, key null), with count or sum, in key order.
func (m viewModel) groups(level int, count bool) []map[string]any {
	out := []map[string]any{}
	var last []any
	for _, row := range m.rows {
		var key any
		var k []any
		if level > 0 {
			k = row.Key[:level]
			key = k
		}
		v := row.Value
		if count {
			v = 1
		}
		if len(out) > 0 && reflect.DeepEqual(last, k) {
			out[len(out)-1]["value"] = out[len(out)-1]["value"].(int) + v
			continue
		}
		last = k
		out = append(out, map[string]any{"key": key, "value": v})
	}
	return out
}

// modelQuery is one query and the answer the model gives it.
type modelQuery struct {
	view, q string
	want    viewAnswer
}

// queries are the queries the views case compares with the model.
func (m viewModel) queries() []modelQuery {
	total := len(m.rows)
	desc := slices.Clone(m.rows)
	slices.Reverse(desc)
	skip, limit := 3, 10
	page := desc[min(skip, len(desc)):min(skip+limit, len(desc))]
	keys := [][]any{{"b", 3}, {"a", 7}, {"b", 3}, {"z", 0}, {"l", 3}, {"c", 0}}
	byKeys := []viewRow{}
	for _, k := range keys {
		for _, row := range m.rows {
			if reflect.DeepEqual(row.Key, k) {
				byKeys = append(byKeys, row)
			}
		}
	}
	kj, _ := json.Marshal(keys)
	return []modelQuery{
		{"sum", "reduce=false", viewAnswer{TotalRows: total, Rows: m.rows}},
		{"sum", "reduce=false&descending=true&skip=3&limit=10", viewAnswer{TotalRows: total, Rows: page}},
		{"sum", "reduce=false&keys=" + url.QueryEscape(string(kj)), viewAnswer{TotalRows: total, Rows: byKeys}},
		{"sum", "", viewAnswer{Rows: m.groups(0, false)}},
		{"sum", "group_level=1", viewAnswer{Rows: m.groups(1, false)}},
		{"sum", "group=true", viewAnswer{Rows: m.groups(2, false)}},
		{"count", "", viewAnswer{Rows: m.groups(0, true)}},
		{"count", "group_level=1", viewAnswer{Rows: m.groups(1, true)}},
	}
}

// normal is v as JSON decodes it (numbers as float64), for comparing a
// model's answer with a node's.
func normal(v any) any {
	b, _ := json.Marshal(v)
	var out any
	json.Unmarshal(b, &out)
	return out
}

// compareViews asks every node each of the model's queries with
// stale=false (and extra, e.g. expired=exclude) and returns the
// differences, nil when every node answers as the model.
func (r *run) compareViews(ctx context.Context, m viewModel, extra string) ([]string, error) {
	var diffs []string
	for _, mq := range m.queries() {
		q := strings.TrimPrefix(mq.q+"&stale=false"+extra, "&")
		want := normal(mq.want)
		for _, n := range r.nodes {
			got, err := r.queryView(ctx, n, mq.view, q)
			if err != nil {
				return nil, err
			}
			if g := normal(got); !reflect.DeepEqual(g, want) {
				gb, _ := json.Marshal(g)
				wb, _ := json.Marshal(want)
				diffs = append(diffs, fmt.Sprintf("%s?%s on %s:\n got  %.600s\n want %.600s", mq.view, q, n.name, gb, wb))
			}
		}
	}
	return diffs, nil
}

// viewsCase defines the design document at the start; two writers keep
// writing and deleting typed documents and a reader queries the views with
// stale=ok on random nodes through the kills (an answer may name a down
// node in "errors", counted; any other failure fails the test). At the
// end every node's answers to map, reduce, group_level, group and keys
// queries with stale=false equal the model's, computed from the documents
// read back.
type viewsCase struct {
	base
	writes, queries, withErrors, down, warming atomic.Int64
	mu                                         sync.Mutex
	reasons                                    map[string]int
	failed                                     []string
}

func (c *viewsCase) setup(ctx context.Context, r *run) error {
	c.reasons = map[string]int{}
	return r.putDesignDoc(ctx)
}

func (c *viewsCase) load(ctx context.Context, r *run, wg *sync.WaitGroup) {
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.typedWriter(ctx, w, &c.writes)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(99, uint64(r.t0.UnixNano())))
		for ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			n := r.nodes[rng.IntN(len(r.nodes))]
			q := "reduce=false&stale=ok&limit=20"
			if rng.IntN(2) == 0 {
				q = "stale=ok&group_level=1"
			}
			a, err := r.queryView(ctx, n, "sum", q)
			switch {
			case errors.Is(err, errRefused):
				c.down.Add(1)
				continue
			case errors.Is(err, errWarmingUp):
				c.warming.Add(1)
				continue
			case err != nil && ctx.Err() != nil:
				return
			case err != nil:
				c.mu.Lock()
				c.failed = append(c.failed, fmt.Sprintf("%.1fs %s: %v", float64(r.now())/1e9, n.name, err))
				c.mu.Unlock()
				continue
			}
			c.queries.Add(1)
			if len(a.Errors) > 0 {
				c.withErrors.Add(1)
				c.mu.Lock()
				for _, e := range a.Errors {
					m, _ := e.(map[string]any)
					c.reasons[fmt.Sprint(m["reason"])]++
				}
				c.mu.Unlock()
			}
		}
	}()
}

// typedWriter is writer w of the typed documents until ctx ends: upserts
// (4 in 5) and deletes of random ids through random nodes, outcomes not
// recorded (the model is computed from what the nodes hold at the end).
// It counts the writes acknowledged in acked.
func (r *run) typedWriter(ctx context.Context, w int, acked *atomic.Int64) {
	rng := rand.New(rand.NewPCG(uint64(100+w), uint64(r.t0.UnixNano())))
	types := []string{"a", "b", "c"}
	for seq := 0; ctx.Err() == nil; seq++ {
		n := r.nodes[rng.IntN(len(r.nodes))]
		path := fmt.Sprintf("/default/docs/v%03d", rng.IntN(typedKeys))
		method, body := http.MethodPut, fmt.Sprintf(`{"type":%q,"n":%d,"w":"%d-%d"}`, types[rng.IntN(len(types))], rng.IntN(10), w, seq)
		if rng.IntN(5) == 0 {
			method, body = http.MethodDelete, ""
		}
		code, _, err := call(ctx, r.cl, n, method, path, "application/json", body, opTimeout)
		switch {
		case errors.Is(err, errRefused):
			time.Sleep(20 * time.Millisecond)
		case err == nil && code < 300:
			acked.Add(1)
		}
	}
}

// readTyped reads every typed document through every node; all must
// agree.
func (r *run) readTyped(ctx context.Context) ([]typedDoc, error) {
	var docs []typedDoc
	for k := range typedKeys {
		id := fmt.Sprintf("v%03d", k)
		var first []byte
		for i, n := range r.nodes {
			code, b, err := r.getSettled(ctx, n, "/default/docs/"+id)
			if err != nil || code != http.StatusOK && code != http.StatusNotFound {
				return nil, fmt.Errorf("reading %s through %s: %d %s %v", id, n.name, code, b, err)
			}
			if code == http.StatusNotFound {
				b = nil
			}
			if i == 0 {
				first = b
			} else if string(b) != string(first) {
				return nil, fmt.Errorf("%s reads %s through %s, %s through %s", id, b, n.name, first, r.nodes[0].name)
			}
		}
		if first == nil {
			continue
		}
		var d struct {
			Type string `json:"type"`
			N    int    `json:"n"`
		}
		if err := json.Unmarshal(first, &d); err != nil {
			return nil, fmt.Errorf("%s holds %s: %v", id, first, err)
		}
		docs = append(docs, typedDoc{id: id, typ: d.Type, n: d.N})
	}
	return docs, nil
}

func (c *viewsCase) check(ctx context.Context, r *run) {
	t := r.t
	t.Logf("views: %d typed writes acknowledged; %d stale=ok queries answered, %d of them with \"errors\" entries %v; %d refused (node down), %d answered \"warming up\" (a node just restarted)",
		c.writes.Load(), c.queries.Load(), c.withErrors.Load(), c.reasons, c.down.Load(), c.warming.Load())
	for _, f := range c.failed {
		t.Errorf("a stale=ok view query failed: %s", f)
	}
	docs, err := r.readTyped(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := newViewModel(docs)
	diffs, err := r.compareViews(ctx, m, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Errorf("views: differs from the model: %s", d)
	}
	if len(diffs) == 0 {
		t.Logf("views: every node answers %d queries with stale=false as the model (%d documents, %d rows)", len(m.queries()), len(docs), len(m.rows))
	}
}
