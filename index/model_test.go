package index_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/internal/racebuild"
)

var modelSeed = flag.Uint64("index.seed", 0, "seed of TestModel (0: random)")

// modelRow is a row of the brute-force model.
type modelRow struct {
	key, id string
	ord     int
	value   int
}

func (r modelRow) String() string { return fmt.Sprintf("%s %s %d", r.key, r.id, r.value) }

// modelOrder orders rows as the index must: key collation, document id, emit order.
func modelOrder(a, b modelRow) int {
	if c := index.Compare([]byte(a.key), []byte(b.key)); c != 0 {
		return c
	}
	if c := strings.Compare(a.id, b.id); c != 0 {
		return c
	}
	return cmp.Compare(a.ord, b.ord)
}

func randKey(rng *rand.Rand, depth int) string {
	strs := []string{`"a"`, `"A"`, `"b"`, `"aa"`, `"á"`, `""`, `"B"`}
	switch n := rng.IntN(10); {
	case n == 0:
		return []string{`null`, `true`, `false`}[rng.IntN(3)]
	case n <= 2:
		return strconv.Itoa(rng.IntN(7) - 3)
	case n == 3:
		return []string{`1.0`, `0.5`, `-0`, `2e0`}[rng.IntN(4)]
	case n <= 5:
		return strs[rng.IntN(len(strs))]
	case n <= 8 && depth < 2:
		parts := make([]string, rng.IntN(4))
		for i := range parts {
			parts[i] = randKey(rng, depth+1)
		}
		return "[" + strings.Join(parts, ",") + "]"
	default:
		if depth >= 2 || rng.IntN(2) == 0 {
			return strs[rng.IntN(len(strs))]
		}
		return `{"k":` + randKey(rng, depth+1) + `}`
	}
}

// groupOf returns a row's group key as the model computes it.
func groupOf(key string, g index.Grouping) string {
	if g.Exact {
		return key
	}
	if g.Level == 0 {
		return "null"
	}
	var elems []json.RawMessage
	if json.Unmarshal([]byte(key), &elems) != nil || len(elems) <= g.Level {
		return key
	}
	b, _ := json.Marshal(elems[:g.Level])
	return string(b)
}

// inRange reports whether the model row is selected by r (without Keys).
func inRange(x modelRow, r index.Range) bool {
	after := func(k []byte, id string) bool { // row at or after (k, id)
		c := index.Compare([]byte(x.key), k)
		return c > 0 || c == 0 && (id == "" || x.id >= id)
	}
	before := func(k []byte, id string) bool { // row at or before (k, id)
		c := index.Compare([]byte(x.key), k)
		return c < 0 || c == 0 && (id == "" || x.id <= id)
	}
	lower, upper := true, true
	if !r.Descending {
		if r.StartKey != nil {
			lower = after(r.StartKey, r.StartDocID)
		}
		if r.EndKey != nil {
			c := index.Compare([]byte(x.key), r.EndKey)
			if r.InclusiveEnd {
				upper = before(r.EndKey, r.EndDocID)
			} else {
				upper = c < 0 || c == 0 && r.EndDocID != "" && x.id < r.EndDocID
			}
		}
	} else {
		if r.StartKey != nil {
			upper = before(r.StartKey, r.StartDocID)
		}
		if r.EndKey != nil {
			c := index.Compare([]byte(x.key), r.EndKey)
			if r.InclusiveEnd {
				lower = after(r.EndKey, r.EndDocID)
			} else {
				lower = c > 0 || c == 0 && r.EndDocID != "" && x.id > r.EndDocID
			}
		}
	}
	return lower && upper
}

// selectRows returns the model rows r selects, in the order Query gives them.
func selectRows(sorted []modelRow, r index.Range) []modelRow {
	var out []modelRow
	if r.Keys != nil {
		for _, k := range r.Keys {
			var part []modelRow
			for _, x := range sorted {
				if index.Compare([]byte(x.key), k) == 0 {
					part = append(part, x)
				}
			}
			if r.Descending {
				slices.Reverse(part)
			}
			out = append(out, part...)
		}
		return out
	}
	for _, x := range sorted {
		if inRange(x, r) {
			out = append(out, x)
		}
	}
	if r.Descending {
		slices.Reverse(out)
	}
	return out
}

// modelReduce groups selected rows as Reduce must: consecutive rows whose group
// keys collate equal (each key of r.Keys on its own), reduced to [count,sum].
func modelReduce(sorted []modelRow, r index.Range, g index.Grouping) []string {
	var parts [][]modelRow
	if r.Keys != nil {
		for _, k := range r.Keys {
			parts = append(parts, selectRows(sorted, index.Range{Keys: [][]byte{k}, Descending: r.Descending}))
		}
	} else {
		parts = [][]modelRow{selectRows(sorted, r)}
	}
	var out []string
	for _, rows := range parts {
		for i := 0; i < len(rows); {
			gk := groupOf(rows[i].key, g)
			j, sum := i, 0
			for ; j < len(rows) && index.Compare([]byte(groupOf(rows[j].key, g)), []byte(gk)) == 0; j++ {
				sum += rows[j].value
			}
			out = append(out, fmt.Sprintf("%s [%d,%d]", gk, j-i, sum))
			i = j
		}
	}
	return out
}

func (m *model) randRange(rng *rand.Rand) index.Range {
	var r index.Range
	ids := func() string {
		if rng.IntN(3) == 0 {
			return m.ids[rng.IntN(len(m.ids))]
		}
		return ""
	}
	if rng.IntN(6) == 0 {
		for range rng.IntN(5) {
			r.Keys = append(r.Keys, []byte(randKey(rng, 0)))
		}
		if r.Keys == nil {
			r.Keys = [][]byte{}
		}
	} else {
		if rng.IntN(3) > 0 {
			r.StartKey, r.StartDocID = []byte(randKey(rng, 0)), ids()
		}
		if rng.IntN(3) > 0 {
			r.EndKey, r.EndDocID = []byte(randKey(rng, 0)), ids()
		}
		// Mostly ranges that select something.
		if r.StartKey != nil && r.EndKey != nil && rng.IntN(4) > 0 {
			c := index.Compare(r.StartKey, r.EndKey)
			if c > 0 != r.Descending && c != 0 {
				r.StartKey, r.EndKey = r.EndKey, r.StartKey
			}
		}
		r.InclusiveEnd = rng.IntN(3) > 0
	}
	r.Descending = rng.IntN(2) == 0
	return r
}

type model struct {
	docs map[string][]modelRow // per document, view "v" only
	ids  []string
}

func (m *model) sorted() []modelRow {
	var all []modelRow
	for _, rows := range m.docs {
		all = append(all, rows...)
	}
	slices.SortFunc(all, modelOrder)
	return all
}

// TestModel applies random batches of document updates and deletions and, after
// each, compares Query and Reduce over random ranges, keys and groupings with a
// brute-force computation over a sorted slice. Rerun a failure with
// -index.seed=N.
func TestModel(t *testing.T) {
	racebuild.Skip(t)
	seed := *modelSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -index.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	ix := openIndex(t, index.Config{Views: []index.ViewConfig{
		{Name: "v", Reducer: &countSum{}},
		{Name: "m"}, // a second view, so updates touch two trees
	}})
	m := &model{docs: map[string][]modelRow{}}
	for i := range 300 {
		m.ids = append(m.ids, fmt.Sprintf("d%03d", i))
	}
	for batch := range 40 {
		var ups []index.DocUpdate
		for range 1 + rng.IntN(80) {
			id := m.ids[rng.IntN(len(m.ids))]
			u := index.DocUpdate{DocID: id, Seq: uint64(batch + 1)}
			if rng.IntN(6) == 0 {
				delete(m.docs, id)
			} else {
				u.Rows = map[string][]index.Emit{}
				var rows []modelRow
				for ord := range rng.IntN(4) {
					k, v := randKey(rng, 0), rng.IntN(10)
					u.Rows["v"] = append(u.Rows["v"], index.Emit{Key: []byte(k), Value: []byte(strconv.Itoa(v))})
					rows = append(rows, modelRow{key: k, id: id, ord: ord, value: v})
				}
				u.Rows["m"] = emits(`"m"`, `1`)
				m.docs[id] = rows
			}
			ups = append(ups, u)
		}
		apply(t, ix, ups...)
		sorted := m.sorted()
		if n, _ := ix.TotalRows("v"); n != len(sorted) {
			t.Fatalf("batch %d: TotalRows %d, model %d", batch, n, len(sorted))
		}
		if n, _ := ix.TotalRows("m"); n != len(m.docs) {
			t.Fatalf("batch %d: TotalRows(m) %d, model %d", batch, n, len(m.docs))
		}
		compareQueries(t, ix, "v", sorted, m, rng, 30, fmt.Sprintf("batch %d", batch))
	}
}

// compareQueries compares n random Query and, if the view has a countSum
// Reducer, Reduce calls on view with the model's sorted rows.
func compareQueries(t *testing.T, ix *index.Index, view string, sorted []modelRow, m *model, rng *rand.Rand, n int, where string) {
	t.Helper()
	ctx := context.Background()
	for q := range n {
		r := m.randRange(rng)
		var want []string
		for _, x := range selectRows(sorted, r) {
			want = append(want, x.String())
		}
		got := rowsOf(t, ix, view, r)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s query %d: Query(%s, %s)\ngot  %q\nwant %q", where, q, view, showRange(r), got, want)
		}
		g := index.Grouping{Exact: rng.IntN(4) == 0, Level: rng.IntN(4)}
		if r.Keys != nil && rng.IntN(2) == 0 {
			g = index.Grouping{Exact: true}
		}
		want = modelReduce(sorted, r, g)
		var gotR []string
		err := ix.Reduce(ctx, view, r, g, func(k, v []byte) error {
			gotR = append(gotR, fmt.Sprintf("%s %s", k, v))
			return nil
		})
		if errors.Is(err, index.ErrNoReducer) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !sameGroups(gotR, want) {
			t.Fatalf("%s query %d: Reduce(%s, %s, %+v)\ngot  %q\nwant %q", where, q, view, showRange(r), g, gotR, want)
		}
	}
}

// sameGroups compares reduce rows "key value": keys by collation (a group key
// is cut from the row's JSON, so white space may differ), values byte-wise.
func sameGroups(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		gk, gv := splitLast(got[i])
		wk, wv := splitLast(want[i])
		if gv != wv || index.Compare([]byte(gk), []byte(wk)) != 0 {
			return false
		}
	}
	return true
}

func splitLast(s string) (string, string) {
	i := strings.LastIndexByte(s, ' ')
	return s[:i], s[i+1:]
}

func showRange(r index.Range) string {
	var b bytes.Buffer
	if r.Keys != nil {
		fmt.Fprintf(&b, "keys=%s ", bytes.Join(r.Keys, []byte(" ")))
	}
	if r.StartKey != nil {
		fmt.Fprintf(&b, "startkey=%s/%q ", r.StartKey, r.StartDocID)
	}
	if r.EndKey != nil {
		fmt.Fprintf(&b, "endkey=%s/%q inclusive_end=%v ", r.EndKey, r.EndDocID, r.InclusiveEnd)
	}
	fmt.Fprintf(&b, "descending=%v", r.Descending)
	return b.String()
}
