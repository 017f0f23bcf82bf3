package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fuzzHorizon: a document whose expiration is within this many seconds of
// the check (or may have passed) may be present or absent, in the documents
// and in the views, so it is left out of exact comparisons.
const fuzzHorizon = 120

// checkResult is what one check after a restart found.
type checkResult struct {
	checked int // keys whose last acknowledged op was checked
	lost    []string
	// allowedLost counts the acknowledged writes a kill took back within
	// what the durability level allows (see workload.lossSince), in
	// allowedKeys keys.
	allowedLost, allowedKeys int
	readErrors               []string
	hang                     []string
	mismatches               []string // one entry per view answer that differs
	observed                 []state  // per key, as read
	fuzzy                    []bool   // per key: left out of the view comparison
	expectedRow              int
}

// checkDocs reads every key and compares it with the model, then resets the
// model to what was read.
//
// With lossSince set (durability none or majority), a key that reads as it
// was before its last acknowledged writes, all of them acknowledged at or
// after lossSince, is a loss the level allows: counted, not failed.
func checkDocs(ctx context.Context, srv *server, m *model, nkeys int, lossSince time.Time) *checkResult {
	res := &checkResult{observed: make([]state, nkeys), fuzzy: make([]bool, nkeys)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				rec := m.get(i)
				obs, err := readDoc(ctx, srv, keyName(i))
				now := time.Now().Unix()
				mu.Lock()
				if err != nil {
					if isTimeout(err) {
						res.hang = append(res.hang, fmt.Sprintf("GET %s: %v", keyName(i), err))
					} else {
						res.readErrors = append(res.readErrors, fmt.Sprintf("GET %s: %v", keyName(i), err))
					}
					mu.Unlock()
					continue
				}
				accept := []state{rec.cur}
				if rec.inflight != nil {
					accept = append(accept, rec.inflight.apply(rec.cur))
				}
				ok := false
				for _, s := range accept {
					if matches(s, obs, now) {
						ok = true
					}
					if s.present && s.exp != 0 && s.exp-s.expSlack <= now+fuzzHorizon {
						res.fuzzy[i] = true
					}
				}
				if obs.present && obs.exp != 0 && obs.exp <= now+fuzzHorizon {
					res.fuzzy[i] = true
				}
				if rec.acked {
					res.checked++
				}
				if !ok && !lossSince.IsZero() {
					if n := rec.lossWithin(obs, now, lossSince); n > 0 {
						ok = true
						res.allowedLost += n
						res.allowedKeys++
					}
				}
				if !ok {
					desc := fmt.Sprintf("%s: read %v, expected %v (last acknowledged op: %s)", keyName(i), obs, rec.cur, orNone(rec.lastOp))
					if rec.inflight != nil {
						desc += fmt.Sprintf(" or %v (in flight: %s)", accept[1], rec.inflight.kind)
					}
					res.lost = append(res.lost, desc)
				}
				res.observed[i] = obs
				mu.Unlock()
				m.reset(i, obs)
			}
		})
	}
	for i := range nkeys {
		next <- i
	}
	close(next)
	wg.Wait()
	sort.Strings(res.lost)
	return res
}

func orNone(s string) string {
	if s == "" {
		return "none since the last check"
	}
	return s
}

// matches reports whether obs, read at now, is what s allows.
func matches(s, obs state, now int64) bool {
	if !obs.present {
		return !s.present || s.mayBeExpired(now)
	}
	if !s.present || s.val != obs.val {
		return false
	}
	d := s.exp - obs.exp
	return d <= s.expSlack && -d <= s.expSlack
}

// readDoc GETs one document.
func readDoc(ctx context.Context, srv *server, key string) (state, error) {
	st, body, h, err := srv.do(ctx, http.MethodGet, "/"+bucket+"/docs/"+key, nil, queryTimeout)
	if err != nil {
		return state{}, err
	}
	switch st {
	case http.StatusNotFound:
		return state{}, nil
	case http.StatusOK:
		var v docValue
		if err := json.Unmarshal(body, &v); err != nil {
			return state{}, fmt.Errorf("unreadable value %q: %v", body, err)
		}
		exp, err := strconv.ParseInt(h.Get("X-Mayfly-Expiration"), 10, 64)
		if err != nil {
			return state{}, fmt.Errorf("bad X-Mayfly-Expiration %q", h.Get("X-Mayfly-Expiration"))
		}
		return state{present: true, val: v, exp: exp}, nil
	}
	return state{}, fmt.Errorf("status %d: %s", st, body)
}

// viewRow is one row of a reduce=false answer.
type viewRow struct {
	ID    string            `json:"id"`
	Key   []json.RawMessage `json:"key"`
	Value json.RawMessage   `json:"value"`
}

type rowsAnswer struct {
	TotalRows int       `json:"total_rows"`
	Rows      []viewRow `json:"rows"`
	Errors    []any     `json:"errors"`
}

type reduceAnswer struct {
	Rows []struct {
		Key   any     `json:"key"`
		Value float64 `json:"value"`
	} `json:"rows"`
	Errors []any `json:"errors"`
}

// query runs one stale=false view query; a timeout is reported as a hang.
func query(ctx context.Context, srv *server, view, params string, out any) (hang bool, err error) {
	path := "/" + bucket + "/_design/" + ddocName + "/_view/" + view + "?stale=false&" + params
	st, body, _, err := srv.doWarm(ctx, http.MethodGet, path, nil, queryTimeout)
	if err != nil {
		return isTimeout(err), fmt.Errorf("GET %s: %w", path, err)
	}
	if st != http.StatusOK {
		return false, fmt.Errorf("GET %s: status %d: %s", path, st, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return false, fmt.Errorf("GET %s: unreadable answer: %v", path, err)
	}
	return false, nil
}

// designDocInfo returns the design document's _info answer (its map errors
// say why a view lacks a document's rows), for a mismatch's details.
func designDocInfo(ctx context.Context, srv *server) string {
	st, body, _, err := srv.do(ctx, http.MethodGet, "/"+bucket+"/_design/"+ddocName+"/_info", nil, queryTimeout)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("status %d %s", st, body)
}

// rowKey is a row as compared: [g, id] -> n.
type rowKey struct {
	g  int
	id string
}

// checkViews queries both views with stale=false and compares them with the
// documents read by checkDocs (res.observed).
func checkViews(ctx context.Context, srv *server, m *model, res *checkResult) {
	expected := map[string]rowKey{} // id -> key
	expectedN := map[string]int{}
	for i, s := range res.observed {
		if s.present && !res.fuzzy[i] {
			expected[keyName(i)] = rowKey{s.val.G, keyName(i)}
			expectedN[keyName(i)] = s.val.N
		}
	}
	res.expectedRow = len(expected)
	fail := func(hang bool, err error) bool {
		if err == nil {
			return false
		}
		if hang {
			res.hang = append(res.hang, err.Error())
		} else {
			res.mismatches = append(res.mismatches, err.Error())
		}
		return true
	}
	var sumRows []viewRow
	for _, view := range []string{"rows", "cnt"} {
		var a rowsAnswer
		if fail(query(ctx, srv, view, "reduce=false", &a)) {
			continue
		}
		d := compareRows(view, a, expected, expectedN, res.fuzzy, m)
		if view == "rows" {
			sumRows = a.Rows
		} else if sumRows != nil && sameRows(sumRows, a.Rows) && d != "" {
			d = "view cnt (reduce=false): the same rows as view rows, so the same differences"
		} else if sumRows != nil && !sameRows(sumRows, a.Rows) {
			res.mismatches = append(res.mismatches, fmt.Sprintf("views rows and cnt (same map) answer different rows: %d and %d rows; _info: %s", len(sumRows), len(a.Rows), designDocInfo(ctx, srv)))
		}
		if d != "" {
			res.mismatches = append(res.mismatches, d)
		}
	}
	if sumRows == nil {
		return
	}
	// The reductions must reduce the rows the view has (expired but not
	// purged documents included, as the contract says).
	var wantSum float64
	for _, r := range sumRows {
		n, _ := strconv.ParseFloat(string(r.Value), 64)
		wantSum += n
	}
	wantCount := float64(len(sumRows))
	for _, q := range []struct {
		view string
		want float64
	}{{"rows", wantSum}, {"cnt", wantCount}} {
		var a reduceAnswer
		if fail(query(ctx, srv, q.view, "reduce=true", &a)) {
			continue
		}
		got := 0.0
		switch {
		case len(a.Errors) > 0:
			res.mismatches = append(res.mismatches, fmt.Sprintf("view %s reduce: errors %v", q.view, a.Errors))
			continue
		case len(a.Rows) == 1:
			got = a.Rows[0].Value
		case len(a.Rows) > 1:
			res.mismatches = append(res.mismatches, fmt.Sprintf("view %s reduce: %d rows without group", q.view, len(a.Rows)))
			continue
		}
		if got != q.want {
			res.mismatches = append(res.mismatches, fmt.Sprintf("view %s reduce: %v, but its %d rows reduce to %v", q.view, got, len(sumRows), q.want))
		}
	}
}

func sameRows(a, b []viewRow) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || string(a[i].Value) != string(b[i].Value) {
			return false
		}
	}
	return true
}

// compareRows compares a reduce=false answer with the expected rows; "" when
// they agree, else a description.
func compareRows(view string, a rowsAnswer, expected map[string]rowKey, expectedN map[string]int, fuzzy []bool, m *model) string {
	var diffs []string
	add := func(format string, args ...any) {
		diffs = append(diffs, fmt.Sprintf(format, args...))
	}
	if len(a.Errors) > 0 {
		add("errors in the answer: %v", a.Errors)
	}
	if a.TotalRows != len(a.Rows) {
		add("total_rows %d but %d rows", a.TotalRows, len(a.Rows))
	}
	seen := map[string]bool{}
	var prev *rowKey
	missing, extra, wrong := 0, 0, 0
	for _, r := range a.Rows {
		var g int
		var id string
		if len(r.Key) != 2 || json.Unmarshal(r.Key[0], &g) != nil || json.Unmarshal(r.Key[1], &id) != nil {
			add("row %s: bad key %s", r.ID, r.Key)
			continue
		}
		k := rowKey{g, id}
		if prev != nil && (k.g < prev.g || k.g == prev.g && k.id <= prev.id) {
			add("rows out of order: %v after %v", k, *prev)
		}
		prev = &k
		if seen[r.ID] {
			add("document %s has two rows", r.ID)
		}
		seen[r.ID] = true
		if id != r.ID {
			add("row of %s has key id %q", r.ID, id)
		}
		idx, err := strconv.Atoi(strings.TrimPrefix(r.ID, "k"))
		if err != nil || idx >= len(fuzzy) {
			idx = -1
		} else if fuzzy[idx] {
			continue // expiry near or past: may be there or not
		}
		why := func() string {
			n, err := strconv.Atoi(string(r.Value))
			if idx < 0 || err != nil {
				return ""
			}
			return " " + m.explain(idx, g, n)
		}
		want, ok := expected[r.ID]
		if !ok {
			extra++
			if extra <= 5 {
				add("extra row %s key %v value %s: the document is absent; the row%s", r.ID, k, r.Value, why())
			}
			continue
		}
		if want != k || string(r.Value) != strconv.Itoa(expectedN[r.ID]) {
			wrong++
			if wrong <= 5 {
				add("row %s is key %v value %s, the document says key %v value %d; the row%s", r.ID, k, r.Value, want, expectedN[r.ID], why())
			}
		}
	}
	var ids []string
	for id := range expected {
		if !seen[id] {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	missing = len(ids)
	for _, id := range ids[:min(5, len(ids))] {
		idx, _ := strconv.Atoi(strings.TrimPrefix(id, "k"))
		add("missing row %s key %v value %d; the document %s", id, expected[id], expectedN[id], m.explain(idx, expected[id].g, expectedN[id]))
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("view %s (reduce=false, %d rows, %d expected exactly): %d extra, %d missing, %d wrong:\n    %s",
		view, len(a.Rows), len(expected), extra, missing, wrong, strings.Join(diffs, "\n    "))
}
