package modeltest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// liveRow is a row the model says an exact (expired=exclude) answer holds.
type liveRow struct {
	id   string
	g, n int
}

// checkExclude compares expired=exclude answers with a recomputation over
// the documents the model has live now: the full map query and total_rows,
// a random key range (ascending or descending, inclusive end or not),
// grouped reduces of it, a keys lookup, and, for the variant with more
// views, _stats grouped by level and a JavaScript reduce. The index was
// brought up to date by queryRows (stale=false).
func (h *harness) checkExclude() {
	now := h.clk.Now()
	v := variants[h.ddoc]
	var live []liveRow
	for i := range numKeys {
		k := key(i)
		if m := h.model[k]; m.live(now) {
			live = append(live, liveRow{k, m.g, m.n})
		}
	}
	slices.SortStableFunc(live, func(a, b liveRow) int {
		if a.g != b.g {
			return a.g - b.g
		}
		return strings.Compare(a.id, b.id)
	})
	keyOf := func(g int) string {
		if v.arrayed {
			return fmt.Sprintf("[%d]", g)
		}
		return strconv.Itoa(g)
	}
	reduceOf := func(rows []liveRow) int {
		if v.count {
			return len(rows)
		}
		t := 0
		for _, r := range rows {
			t += r.n
		}
		return t
	}

	// The full range, rows and total_rows.
	var want strings.Builder
	want.WriteString(fmt.Sprintf(`{"total_rows":%d,"rows":[`, len(live)))
	for i, r := range live {
		if i > 0 {
			want.WriteString(",")
		}
		fmt.Fprintf(&want, `{"id":%q,"key":%s,"value":%d}`, r.id, keyOf(r.g), r.n)
	}
	want.WriteString("]}")
	h.expectAnswer("v", "stale=ok&reduce=false&expired=exclude", want.String())

	// A random range.
	lo, hi := h.rng.IntN(6), h.rng.IntN(6)
	lo, hi = min(lo, hi), max(lo, hi)
	desc, incl := h.rng.IntN(2) == 0, h.rng.IntN(3) > 0
	var sel []liveRow
	for _, r := range live {
		switch {
		case r.g < lo || r.g > hi:
		case !incl && !desc && r.g == hi, !incl && desc && r.g == lo:
		default:
			sel = append(sel, r)
		}
	}
	if desc {
		slices.Reverse(sel)
	}
	rng := fmt.Sprintf("startkey=%s&endkey=%s&inclusive_end=%v&descending=%v", keyOf(lo), keyOf(hi), incl, desc)
	if desc {
		rng = fmt.Sprintf("startkey=%s&endkey=%s&inclusive_end=%v&descending=%v", keyOf(hi), keyOf(lo), incl, desc)
	}
	want.Reset()
	want.WriteString(`{"rows":[`)
	if len(sel) > 0 {
		fmt.Fprintf(&want, `{"key":null,"value":%d}`, reduceOf(sel))
	}
	want.WriteString("]}")
	h.expectAnswer("v", "stale=ok&expired=exclude&"+rng, want.String())
	groups := func(rows []liveRow, key func(liveRow) string) []string {
		var out []string
		for i := 0; i < len(rows); {
			j := i
			for j < len(rows) && key(rows[j]) == key(rows[i]) {
				j++
			}
			out = append(out, fmt.Sprintf(`{"key":%s,"value":%d}`, key(rows[i]), reduceOf(rows[i:j])))
			i = j
		}
		return out
	}
	byG := func(r liveRow) string { return keyOf(r.g) }
	h.expectAnswer("v", "stale=ok&expired=exclude&group=true&"+rng, `{"rows":[`+strings.Join(groups(sel, byG), ",")+"]}")
	h.expectAnswer("v", "stale=ok&expired=exclude&group_level=1&"+rng, `{"rows":[`+strings.Join(groups(sel, byG), ",")+"]}")

	// A keys lookup, one key twice.
	a, b := h.rng.IntN(6), h.rng.IntN(6)
	var kw []string
	for _, g := range []int{a, b, a} {
		var part []liveRow
		for _, r := range live {
			if r.g == g {
				part = append(part, r)
			}
		}
		kw = append(kw, groups(part, byG)...)
	}
	h.expectAnswer("v", fmt.Sprintf("stale=ok&expired=exclude&group=true&keys=[%s,%s,%s]", keyOf(a), keyOf(b), keyOf(a)), `{"rows":[`+strings.Join(kw, ",")+"]}")

	if !v.more {
		return
	}
	// _stats by parity (group_level=1) and whole (group_level=0), from the
	// variant's default (exclude).
	stats := func(rows []liveRow) string {
		s, mn, mx, sq := 0, rows[0].n, rows[0].n, 0
		for _, r := range rows {
			s, mn, mx, sq = s+r.n, min(mn, r.n), max(mx, r.n), sq+r.n*r.n
		}
		return fmt.Sprintf(`{"sum":%d,"count":%d,"min":%d,"max":%d,"sumsqr":%d}`, s, len(rows), mn, mx, sq)
	}
	var parts []string
	for p := range 2 {
		var rows []liveRow
		for _, r := range live {
			if r.g%2 == p {
				rows = append(rows, r)
			}
		}
		if len(rows) > 0 {
			parts = append(parts, fmt.Sprintf(`{"key":[%d],"value":%s}`, p, stats(rows)))
		}
	}
	h.expectAnswer("s", "stale=ok&group_level=1", `{"rows":[`+strings.Join(parts, ",")+"]}")
	whole := ""
	if len(live) > 0 {
		whole = `{"key":null,"value":` + stats(live) + "}"
	}
	h.expectAnswer("s", "stale=ok", `{"rows":[`+whole+"]}")
	// The JavaScript reduce: the largest n per g, and overall.
	var jm []string
	for i := 0; i < len(live); {
		j, m := i, live[i].n
		for j < len(live) && live[j].g == live[i].g {
			m = max(m, live[j].n)
			j++
		}
		jm = append(jm, fmt.Sprintf(`{"key":%d,"value":%d}`, live[i].g, m))
		i = j
	}
	h.expectAnswer("j", "stale=ok&group=true", `{"rows":[`+strings.Join(jm, ",")+"]}")
	// meta.ts and meta.created, as map functions see them: touches,
	// sliding reads and re-evaluations leave both alone.
	var tm []string
	for i := range numKeys {
		k := key(i)
		if m := h.model[k]; m.live(now) {
			tm = append(tm, fmt.Sprintf(`{"id":%q,"key":%q,"value":[%d,%d]}`, k, k, m.ts-t0, m.created-t0))
		}
	}
	h.expectAnswer("t", "stale=ok", fmt.Sprintf(`{"total_rows":%d,"rows":[%s]}`, len(tm), strings.Join(tm, ",")))
}

// expectAnswer runs a query of view and compares its answer with want, as
// decoded JSON.
func (h *harness) expectAnswer(view, params, want string) {
	h.t.Helper()
	got := h.queryView(view, params)
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		h.failf("%s?%s answers %q: %v", view, params, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		h.failf("bad expected answer %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		h.failf("%s?%s (exact) answers %s, the model's live documents give %s", view, params, compact(got), want)
	}
	h.cov.exactQueries++
}
