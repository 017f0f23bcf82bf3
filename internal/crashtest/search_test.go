package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// searchIndex is the full-text index the harness creates over the bucket's
// default collection; it lives through every kill.
const searchIndex = "crashfts"

// searchDef is its definition: the dynamic default mapping.
var searchDef = []byte(`{"type":"fulltext-index","sourceType":"couchbase","sourceName":"` + bucket + `"}`)

// putSearchIndex creates the full-text index (replacing it the same is a
// no-op for the service).
func putSearchIndex(ctx context.Context, srv *server) error {
	st, body, _, err := srv.do(ctx, http.MethodPut, "/api/index/"+searchIndex, searchDef, queryTimeout)
	if err != nil {
		return err
	}
	if st != http.StatusOK {
		return fmt.Errorf("PUT /api/index/%s: status %d: %s", searchIndex, st, body)
	}
	return nil
}

// checkSearch runs a match_all search at consistency at_plus and compares
// its hits with the documents checkDocs read (res.observed): every present
// document with no near expiry must be a hit, and every hit must be such a
// document, or one whose expiry is near (res.fuzzy). total_hits must count
// the hits.
func checkSearch(ctx context.Context, srv *server, m *model, res *checkResult) {
	n := len(res.observed)
	req := fmt.Sprintf(`{"query":{"match_all":{}},"size":%d,"ctl":{"timeout":%d,"consistency":{"level":"at_plus"}}}`,
		n+1, queryTimeout.Milliseconds())
	path := "/api/index/" + searchIndex + "/query"
	st, body, _, err := srv.doWarm(ctx, http.MethodPost, path, []byte(req), queryTimeout)
	switch {
	case isTimeout(err):
		res.hang = append(res.hang, fmt.Sprintf("POST %s (at_plus): %v", path, err))
		return
	case err != nil:
		res.mismatches = append(res.mismatches, fmt.Sprintf("search: POST %s: %v", path, err))
		return
	case st != http.StatusOK:
		res.mismatches = append(res.mismatches, fmt.Sprintf("search: POST %s: status %d: %s", path, st, body))
		return
	}
	var a struct {
		Hits []struct {
			ID string `json:"id"`
		} `json:"hits"`
		TotalHits int `json:"total_hits"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		res.mismatches = append(res.mismatches, fmt.Sprintf("search: unreadable answer: %v", err))
		return
	}
	if d := compareHits(a.Hits, a.TotalHits, res, m); d != "" {
		res.mismatches = append(res.mismatches, d)
	}
}

// compareHits compares a search's hit ids with the documents read; "" when
// they agree.
func compareHits(hits []struct {
	ID string `json:"id"`
}, total int, res *checkResult, m *model) string {
	var diffs []string
	add := func(format string, args ...any) {
		diffs = append(diffs, fmt.Sprintf(format, args...))
	}
	if total != len(hits) {
		add("total_hits %d but %d hits", total, len(hits))
	}
	seen := map[int]bool{}
	extra := 0
	for _, h := range hits {
		i, err := strconv.Atoi(strings.TrimPrefix(h.ID, "k"))
		if err != nil || !strings.HasPrefix(h.ID, "k") || i < 0 || i >= len(res.observed) {
			add("hit %q is no key of the key space", h.ID)
			continue
		}
		if seen[i] {
			add("document %s is two hits", h.ID)
		}
		seen[i] = true
		if res.fuzzy[i] || res.observed[i].present {
			continue
		}
		extra++
		if extra <= 5 {
			add("extra hit %s: the document is absent", h.ID)
		}
	}
	var missing []int
	for i, s := range res.observed {
		if s.present && !res.fuzzy[i] && !seen[i] {
			missing = append(missing, i)
		}
	}
	sort.Ints(missing)
	for _, i := range missing[:min(5, len(missing))] {
		s := res.observed[i]
		add("missing hit %s (g %d, n %d); the document %s", keyName(i), s.val.G, s.val.N, m.explain(i, s.val.G, s.val.N))
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("search %s (match_all, at_plus, %d hits, %d documents expected exactly): %d extra, %d missing:\n    %s",
		searchIndex, len(hits), res.expectedRow, extra, len(missing), strings.Join(diffs, "\n    "))
}

// compareHits finds missing, extra and doubled hits, and lets near-expiry
// documents be there or not.
func TestCompareHits(t *testing.T) {
	m := newModel(4)
	res := &checkResult{
		observed: []state{{present: true}, {present: true}, {}, {present: true}},
		fuzzy:    []bool{false, false, false, true},
	}
	type hit = struct {
		ID string `json:"id"`
	}
	if d := compareHits([]hit{{keyName(1)}, {keyName(0)}}, 2, res, m); d != "" {
		t.Errorf("the exact set: %s", d)
	}
	if d := compareHits([]hit{{keyName(1)}, {keyName(0)}, {keyName(3)}}, 3, res, m); d != "" {
		t.Errorf("with a near-expiry document: %s", d)
	}
	for _, c := range []struct {
		hits  []hit
		total int
		want  string
	}{
		{[]hit{{keyName(0)}}, 1, "missing hit " + keyName(1)},
		{[]hit{{keyName(0)}, {keyName(1)}, {keyName(2)}}, 3, "extra hit " + keyName(2)},
		{[]hit{{keyName(0)}, {keyName(1)}, {keyName(1)}}, 3, "two hits"},
		{[]hit{{keyName(0)}, {keyName(1)}}, 5, "total_hits 5 but 2 hits"},
		{[]hit{{keyName(0)}, {keyName(1)}, {"x"}}, 3, `"x" is no key`},
	} {
		if d := compareHits(c.hits, c.total, res, m); !strings.Contains(d, c.want) {
			t.Errorf("%v: %q, want %q", c.hits, d, c.want)
		}
	}
}
