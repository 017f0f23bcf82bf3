package index_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mayflydb/mayfly/index"
)

// rangeFixture: two documents share key 1, document c emits key 2 twice, and
// keys of other types follow.
func rangeFixture(t *testing.T) *index.Index {
	ix := openIndex(t, index.Config{Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}})
	apply(t, ix,
		index.DocUpdate{DocID: "b", Seq: 1, Rows: map[string][]index.Emit{"v": emits(`1`, `2`)}},
		index.DocUpdate{DocID: "a", Seq: 2, Rows: map[string][]index.Emit{"v": emits(`1`, `1`)}},
		index.DocUpdate{DocID: "c", Seq: 3, Rows: map[string][]index.Emit{"v": emits(`2`, `3`, `2.0`, `4`)}},
		index.DocUpdate{DocID: "d", Seq: 4, Rows: map[string][]index.Emit{"v": emits(`3`, `5`)}},
		index.DocUpdate{DocID: "e", Seq: 5, Rows: map[string][]index.Emit{"v": emits(`"x"`, `6`)}},
		index.DocUpdate{DocID: "f", Seq: 6, Rows: map[string][]index.Emit{"v": emits(`["x",1]`, `7`)}},
	)
	return ix
}

func TestQuery_Ranges(t *testing.T) {
	ix := rangeFixture(t)
	all := []string{`1 a 1`, `1 b 2`, `2 c 3`, `2.0 c 4`, `3 d 5`, `"x" e 6`, `["x",1] f 7`}
	rev := func(s []string) []string {
		out := make([]string, len(s))
		for i := range s {
			out[len(s)-1-i] = s[i]
		}
		return out
	}
	for _, tc := range []struct {
		name string
		r    index.Range
		want []string
	}{
		{"all", index.Range{}, all},
		{"all descending", index.Range{Descending: true}, rev(all)},
		{"start and end", index.Range{StartKey: js(`1`), EndKey: js(`2`), InclusiveEnd: true}, all[:4]},
		{"startkey_docid", index.Range{StartKey: js(`1`), StartDocID: "b", EndKey: js(`3`), InclusiveEnd: true}, all[1:5]},
		{"inclusive_end false", index.Range{EndKey: js(`2`)}, all[:2]},
		{"inclusive_end false with endkey_docid", index.Range{EndKey: js(`1`), EndDocID: "b"}, all[:1]},
		{"endkey_docid", index.Range{EndKey: js(`1`), EndDocID: "a", InclusiveEnd: true}, all[:1]},
		{"start after end", index.Range{StartKey: js(`3`), EndKey: js(`1`), InclusiveEnd: true}, nil},
		{"key between rows", index.Range{StartKey: js(`1.5`), EndKey: js(`1.5`), InclusiveEnd: true}, nil},
		{"types", index.Range{StartKey: js(`"a"`), EndKey: js(`[]`), InclusiveEnd: true}, all[5:6]},
		{"descending start end", index.Range{Descending: true, StartKey: js(`2`), EndKey: js(`1`), InclusiveEnd: true},
			rev(all[:4])},
		{"descending startkey_docid", index.Range{Descending: true, StartKey: js(`1`), StartDocID: "a"}, all[:1]},
		{"descending endkey_docid", index.Range{Descending: true, StartKey: js(`3`), EndKey: js(`1`), EndDocID: "b", InclusiveEnd: true},
			rev(all[1:5])},
		{"descending inclusive_end false", index.Range{Descending: true, EndKey: js(`1`)}, rev(all[2:])},
		{"descending inclusive_end false with endkey_docid", index.Range{Descending: true, EndKey: js(`1`), EndDocID: "a"},
			rev(all[1:])},
		{"keys", index.Range{Keys: [][]byte{js(`2`), js(`1`), js(`2`), js(`99`), js(`"x"`)}},
			[]string{`2 c 3`, `2.0 c 4`, `1 a 1`, `1 b 2`, `2 c 3`, `2.0 c 4`, `"x" e 6`}},
		{"keys descending", index.Range{Keys: [][]byte{js(`1`), js(`3`)}, Descending: true},
			[]string{`1 b 2`, `1 a 1`, `3 d 5`}},
		{"empty keys", index.Range{Keys: [][]byte{}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			equalStrings(t, "rows", rowsOf(t, ix, "v", tc.r), tc.want)
		})
	}
	if n, err := ix.TotalRows("v"); err != nil || n != len(all) {
		t.Errorf("TotalRows = %d, %v; want %d", n, err, len(all))
	}
}

func TestQuery_Stop(t *testing.T) {
	ix := rangeFixture(t)
	n := 0
	err := ix.Query(context.Background(), "v", index.Range{}, func(index.Row) error {
		n++
		if n == 2 {
			return index.ErrStop
		}
		return nil
	})
	if err != nil || n != 2 {
		t.Errorf("Query stopped after %d rows with %v; want 2 rows, nil", n, err)
	}
	boom := errors.New("boom")
	err = ix.Query(context.Background(), "v", index.Range{}, func(index.Row) error { return boom })
	if !errors.Is(err, boom) {
		t.Errorf("Query error = %v, want the callback's", err)
	}
	n = 0
	err = ix.Reduce(context.Background(), "v", index.Range{}, index.Grouping{Exact: true}, func(k, v []byte) error {
		n++
		return index.ErrStop
	})
	if err != nil || n != 1 {
		t.Errorf("Reduce stopped after %d rows with %v; want 1 row, nil", n, err)
	}
}

func TestApply_ReplaceAndDelete(t *testing.T) {
	ix := openIndex(t, index.Config{Views: []index.ViewConfig{{Name: "v"}, {Name: "w"}}})
	apply(t, ix,
		index.DocUpdate{DocID: "a", Partition: 1, Seq: 10, Rows: map[string][]index.Emit{"v": emits(`1`, `1`, `2`, `1`), "w": emits(`"a"`, `null`)}},
		index.DocUpdate{DocID: "b", Partition: 2, Seq: 5, Rows: map[string][]index.Emit{"v": emits(`1`, `1`)}},
	)
	// a now emits other rows in v and none in w; b is deleted; c has no rows.
	apply(t, ix,
		index.DocUpdate{DocID: "a", Partition: 1, Seq: 11, Rows: map[string][]index.Emit{"v": emits(`3`, `2`)}},
		index.DocUpdate{DocID: "b", Partition: 2, Seq: 6, Rows: nil},
		index.DocUpdate{DocID: "c", Partition: 3, Seq: 1, Rows: map[string][]index.Emit{}},
	)
	equalStrings(t, "v", rowsOf(t, ix, "v", index.Range{}), []string{`3 a 2`})
	equalStrings(t, "w", rowsOf(t, ix, "w", index.Range{}), nil)
	// The same document twice in one Apply keeps its last rows.
	apply(t, ix,
		index.DocUpdate{DocID: "d", Seq: 1, Rows: map[string][]index.Emit{"v": emits(`4`, `1`)}},
		index.DocUpdate{DocID: "d", Seq: 2, Rows: map[string][]index.Emit{"v": emits(`5`, `1`), "w": emits(`5`, `1`)}},
		index.DocUpdate{DocID: "a", Partition: 1, Seq: 9, Rows: nil}, // an older seq never lowers the vector
	)
	equalStrings(t, "v", rowsOf(t, ix, "v", index.Range{}), []string{`5 d 1`})
	equalStrings(t, "w", rowsOf(t, ix, "w", index.Range{}), []string{`5 d 1`})
	if got, want := ix.Seqs(), []uint64{2, 11, 6, 1}; !equalSeqs(got, want) {
		t.Errorf("Seqs = %v, want %v", got, want)
	}
	// A nil value is stored as null.
	apply(t, ix, index.DocUpdate{DocID: "e", Rows: map[string][]index.Emit{"w": {{Key: js(`0`)}}}})
	equalStrings(t, "w", rowsOf(t, ix, "w", index.Range{}), []string{`0 e null`, `5 d 1`})
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestApply_FailsWhole(t *testing.T) {
	ix := openIndex(t, index.Config{Path: t.TempDir() + "/ix.db", Views: []index.ViewConfig{{Name: "v"}}})
	apply(t, ix, index.DocUpdate{DocID: "a", Seq: 1, Rows: map[string][]index.Emit{"v": emits(`1`, `1`)}})
	for _, tc := range []struct {
		name    string
		updates []index.DocUpdate
		want    error
	}{
		{"invalid key", []index.DocUpdate{
			{DocID: "a", Seq: 2, Rows: nil},
			{DocID: "b", Seq: 3, Rows: map[string][]index.Emit{"v": emits(`[1,`, `1`)}},
		}, index.ErrInvalidKey},
		{"unknown view", []index.DocUpdate{
			{DocID: "a", Seq: 2, Rows: map[string][]index.Emit{"nope": emits(`1`, `1`)}},
		}, index.ErrUnknownView},
		{"partition", []index.DocUpdate{{DocID: "a", Partition: 4, Seq: 2}}, index.ErrPartition},
	} {
		if err := ix.Apply(context.Background(), tc.updates); !errors.Is(err, tc.want) {
			t.Errorf("%s: Apply error = %v, want %v", tc.name, err, tc.want)
		}
		equalStrings(t, tc.name+": rows after failed Apply", rowsOf(t, ix, "v", index.Range{}), []string{`1 a 1`})
		if s := ix.Seqs(); s[0] != 1 {
			t.Errorf("%s: Seqs after failed Apply = %v", tc.name, s)
		}
	}
	// A later Apply works on the state before the failed ones.
	apply(t, ix, index.DocUpdate{DocID: "a", Seq: 4, Rows: map[string][]index.Emit{"v": emits(`2`, `1`)}})
	equalStrings(t, "rows", rowsOf(t, ix, "v", index.Range{}), []string{`2 a 1`})
}

func TestErrors(t *testing.T) {
	ix := openIndex(t, index.Config{Views: []index.ViewConfig{{Name: "map"}}})
	ctx := context.Background()
	noop := func(index.Row) error { return nil }
	if err := ix.Query(ctx, "nope", index.Range{}, noop); !errors.Is(err, index.ErrUnknownView) {
		t.Errorf("Query of unknown view: %v", err)
	}
	if _, err := ix.TotalRows("nope"); !errors.Is(err, index.ErrUnknownView) {
		t.Errorf("TotalRows of unknown view: %v", err)
	}
	if err := ix.Reduce(ctx, "map", index.Range{}, index.Grouping{}, nil); !errors.Is(err, index.ErrNoReducer) {
		t.Errorf("Reduce of map-only view: %v", err)
	}
	if err := ix.Query(ctx, "map", index.Range{StartKey: js(`{`)}, noop); !errors.Is(err, index.ErrInvalidKey) {
		t.Errorf("Query with invalid start key: %v", err)
	}
	if err := ix.Query(ctx, "map", index.Range{Keys: [][]byte{js(`1`), js(`x`)}}, noop); !errors.Is(err, index.ErrInvalidKey) {
		t.Errorf("Query with invalid key in keys: %v", err)
	}
	for _, cfg := range []index.Config{
		{NumPartitions: 0},
		{NumPartitions: 1 << 17},
		{NumPartitions: 1, Views: []index.ViewConfig{{Name: ""}}},
		{NumPartitions: 1, Views: []index.ViewConfig{{Name: "a"}, {Name: "a"}}},
	} {
		if _, err := index.Open(ctx, cfg); !errors.Is(err, index.ErrInvalidConfig) {
			t.Errorf("Open(%+v) error = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	closeIndex(t, ix)
	if err := ix.Query(ctx, "map", index.Range{}, noop); !errors.Is(err, index.ErrClosed) {
		t.Errorf("Query after Close: %v", err)
	}
	if err := ix.Apply(ctx, nil); !errors.Is(err, index.ErrClosed) {
		t.Errorf("Apply after Close: %v", err)
	}
	if err := ix.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestReduce_Grouping(t *testing.T) {
	ix := openIndex(t, index.Config{Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}})
	keys := []string{
		`null`, `1`, `1.0`, `"a"`, `[]`, `[1]`, `[1,"a"]`, `[1,"a",true]`, `[1,"a",true]`,
		`[1,"b"]`, `[1,"b",[2,3]]`, `[1,"b",[2,3],4]`, `[2]`, `[2, "a"]`, `{"a":1}`,
	}
	var ups []index.DocUpdate
	for i, k := range keys {
		ups = append(ups, index.DocUpdate{DocID: string(rune('a' + i)), Rows: map[string][]index.Emit{"v": emits(k, "1")}})
	}
	apply(t, ix, ups...)
	all := index.Range{}
	equalStrings(t, "level 0", reduced(t, ix, "v", all, index.Grouping{}), []string{`null [15,15]`})
	equalStrings(t, "level 1", reduced(t, ix, "v", all, index.Grouping{Level: 1}), []string{
		`null [1,1]`, `1 [2,2]`, `"a" [1,1]`, `[] [1,1]`, `[1] [7,7]`, `[2] [2,2]`, `{"a":1} [1,1]`,
	})
	equalStrings(t, "level 2", reduced(t, ix, "v", all, index.Grouping{Level: 2}), []string{
		`null [1,1]`, `1 [2,2]`, `"a" [1,1]`, `[] [1,1]`, `[1] [1,1]`, `[1,"a"] [3,3]`, `[1,"b"] [3,3]`,
		`[2] [1,1]`, `[2, "a"] [1,1]`, `{"a":1} [1,1]`,
	})
	equalStrings(t, "level 3", reduced(t, ix, "v", all, index.Grouping{Level: 3}), []string{
		`null [1,1]`, `1 [2,2]`, `"a" [1,1]`, `[] [1,1]`, `[1] [1,1]`, `[1,"a"] [1,1]`, `[1,"a",true] [2,2]`,
		`[1,"b"] [1,1]`, `[1,"b",[2,3]] [2,2]`, `[2] [1,1]`, `[2, "a"] [1,1]`, `{"a":1} [1,1]`,
	})
	equalStrings(t, "exact", reduced(t, ix, "v", all, index.Grouping{Exact: true}), []string{
		`null [1,1]`, `1 [2,2]`, `"a" [1,1]`, `[] [1,1]`, `[1] [1,1]`, `[1,"a"] [1,1]`, `[1,"a",true] [2,2]`,
		`[1,"b"] [1,1]`, `[1,"b",[2,3]] [1,1]`, `[1,"b",[2,3],4] [1,1]`, `[2] [1,1]`, `[2, "a"] [1,1]`, `{"a":1} [1,1]`,
	})
	equalStrings(t, "level 1 descending, within a range", reduced(t, ix, "v",
		index.Range{Descending: true, StartKey: js(`[1,"b"]`), EndKey: js(`1`), InclusiveEnd: true}, index.Grouping{Level: 1}), []string{
		// Within a group, the key is the first row's: 1.0 sorts after 1 (by doc id).
		`[1] [5,5]`, `[] [1,1]`, `"a" [1,1]`, `1.0 [2,2]`,
	})
	equalStrings(t, "level 2 on a partial range", reduced(t, ix, "v",
		index.Range{StartKey: js(`[1,"a",true]`), StartDocID: "i", EndKey: js(`[1,"b",[2,3]]`)}, index.Grouping{Level: 2}), []string{
		`[1,"a"] [1,1]`, `[1,"b"] [1,1]`,
	})
	equalStrings(t, "keys with group=true", reduced(t, ix, "v",
		index.Range{Keys: [][]byte{js(`[1,"a",true]`), js(`7`), js(`1`), js(`[1,"a",true]`)}}, index.Grouping{Exact: true}), []string{
		`[1,"a",true] [2,2]`, `1 [2,2]`, `[1,"a",true] [2,2]`,
	})
	equalStrings(t, "empty range", reduced(t, ix, "v", index.Range{StartKey: js(`5`), EndKey: js(`6`)}, index.Grouping{}), nil)

	empty := openIndex(t, index.Config{Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}})
	equalStrings(t, "empty view", reduced(t, empty, "v", all, index.Grouping{}), nil)
}

// TestReduce_Cached checks that reductions are kept and reused: a second full
// reduce of a large view reduces no rows, and changing one document reduces
// only that document's leaf again.
func TestReduce_Cached(t *testing.T) {
	red := &countSum{}
	ix := openIndex(t, index.Config{Views: []index.ViewConfig{{Name: "v", Reducer: red}}})
	var ups []index.DocUpdate
	for i := range 10000 {
		ups = append(ups, index.DocUpdate{DocID: docID(i), Rows: map[string][]index.Emit{"v": emits(itoa(i%97), "1")}})
	}
	apply(t, ix, ups...)
	equalStrings(t, "cold", reduced(t, ix, "v", index.Range{}, index.Grouping{}), []string{`null [10000,10000]`})
	red.reduces.Store(0)
	red.rereduces.Store(0)
	equalStrings(t, "warm", reduced(t, ix, "v", index.Range{}, index.Grouping{}), []string{`null [10000,10000]`})
	if r, rr := red.reduces.Load(), red.rereduces.Load(); r != 0 || rr != 0 {
		t.Errorf("warm full reduce called Reduce %d and Rereduce %d times, want 0 and 0", r, rr)
	}
	apply(t, ix, index.DocUpdate{DocID: docID(5), Rows: map[string][]index.Emit{"v": emits(`5`, "3")}})
	equalStrings(t, "after change", reduced(t, ix, "v", index.Range{}, index.Grouping{}), []string{`null [10000,10002]`})
	if r, rr := red.reduces.Load(), red.rereduces.Load(); r != 1 || rr > 4 {
		t.Errorf("full reduce after a one-row change called Reduce %d and Rereduce %d times, want 1 and at most the tree height", r, rr)
	}
	// A group costs a few calls, not one per row: 97 groups of ~103 rows.
	red.reduces.Store(0)
	red.rereduces.Store(0)
	if got := reduced(t, ix, "v", index.Range{}, index.Grouping{Exact: true}); len(got) != 97 {
		t.Fatalf("%d groups, want 97", len(got))
	}
	if r := red.reduces.Load() + red.rereduces.Load(); r > 97*6 {
		t.Errorf("grouped reduce of 97 groups made %d Reducer calls", r)
	}
}

func docID(i int) string { return fmt.Sprintf("doc%05d", i) }

func itoa(i int) string { return strconv.Itoa(i) }

type bigReducer struct{}

func (bigReducer) Reduce(_ context.Context, keys [][]byte, ids []string, values [][]byte) ([]byte, error) {
	return []byte(`"` + strings.Repeat("x", index.MaxReductionSize) + `"`), nil
}
func (bigReducer) Rereduce(_ context.Context, values [][]byte) ([]byte, error) { return values[0], nil }

func TestReduce_TooLarge(t *testing.T) {
	ix := openIndex(t, index.Config{Views: []index.ViewConfig{{Name: "v", Reducer: bigReducer{}}}})
	apply(t, ix, index.DocUpdate{DocID: "a", Rows: map[string][]index.Emit{"v": emits(`1`, `1`)}})
	err := ix.Reduce(context.Background(), "v", index.Range{}, index.Grouping{}, func(k, v []byte) error { return nil })
	if !errors.Is(err, index.ErrReductionTooLarge) {
		t.Errorf("Reduce error = %v, want ErrReductionTooLarge", err)
	}
}

// TestSnapshots runs queries while Apply rewrites every document: each query
// must see all documents at one generation, never a mix, and Apply must not
// wait for a query that is still running.
func TestSnapshots(t *testing.T) {
	ix := openIndex(t, index.Config{Views: []index.ViewConfig{{Name: "v", Reducer: &countSum{}}}})
	const docs = 500
	gen := func(g int) []index.DocUpdate {
		ups := make([]index.DocUpdate, docs)
		for i := range ups {
			ups[i] = index.DocUpdate{DocID: docID(i), Seq: uint64(g), Rows: map[string][]index.Emit{"v": emits(itoa(i), itoa(g))}}
		}
		return ups
	}
	apply(t, ix, gen(1)...)
	ctx := context.Background()

	// A query paused inside its callback does not hold Apply back, and keeps
	// seeing its own snapshot.
	inQuery, release := make(chan struct{}), make(chan struct{})
	done := make(chan []string)
	go func() {
		var vals []string
		first := true
		_ = ix.Query(ctx, "v", index.Range{}, func(r index.Row) error {
			if first {
				close(inQuery)
				<-release
				first = false
			}
			vals = append(vals, string(r.Value))
			return nil
		})
		done <- vals
	}()
	<-inQuery
	apply(t, ix, gen(2)...)
	close(release)
	for _, v := range <-done {
		if v != "1" {
			t.Fatalf("paused query saw value %s, want only its snapshot's 1", v)
		}
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				var first string
				err := ix.Query(ctx, "v", index.Range{}, func(r index.Row) error {
					if first == "" {
						first = string(r.Value)
					} else if string(r.Value) != first {
						t.Errorf("query saw generations %s and %s", first, r.Value)
						return index.ErrStop
					}
					return nil
				})
				if err != nil {
					t.Error(err)
				}
				_ = ix.Reduce(ctx, "v", index.Range{}, index.Grouping{}, func(k, v []byte) error {
					if n, s, _ := parseCountSum(v); n != docs || s%docs != 0 {
						t.Errorf("reduce saw a mix of generations: %s", v)
					}
					return nil
				})
			}
		})
	}
	for g := 3; g < 40; g++ {
		apply(t, ix, gen(g)...)
	}
	close(stop)
	wg.Wait()
}
