package index_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mayflydb/mayfly/index"
	"github.com/mayflydb/mayfly/internal/racebuild"
)

// minMax reduces integer values to [min,max]: not invertible, so a live
// reduction cannot be had by subtracting the expired rows.
type minMax struct{}

func (minMax) Reduce(_ context.Context, _ [][]byte, _ []string, values [][]byte) ([]byte, error) {
	lo, hi := int64(1<<62), int64(-1<<62)
	for _, v := range values {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("minMax: value %s is not an integer", v)
		}
		lo, hi = min(lo, n), max(hi, n)
	}
	return []byte(fmt.Sprintf("[%d,%d]", lo, hi)), nil
}

func (minMax) Rereduce(_ context.Context, values [][]byte) ([]byte, error) {
	lo, hi := int64(1<<62), int64(-1<<62)
	for _, v := range values {
		a, b, err := parseCountSum(v) // same shape: two integers
		if err != nil {
			return nil, err
		}
		lo, hi = min(lo, a), max(hi, b)
	}
	return []byte(fmt.Sprintf("[%d,%d]", lo, hi)), nil
}

// liveDoc is a document of the exclude model: its rows and expiration.
type liveDoc struct {
	exp  int64
	rows map[string][]index.Emit
}

func liveConfig(path string) index.Config {
	return index.Config{Path: path, NumPartitions: 4, Views: []index.ViewConfig{
		{Name: "cs", Reducer: &countSum{}}, {Name: "mm", Reducer: minMax{}}, {Name: "map"}}}
}

// oracle builds a fresh in-memory index of the documents live at now, with
// no expirations: what an exact query at now must answer, in include mode.
func oracle(t *testing.T, docs map[string]liveDoc, now int64, keep func(liveDoc) bool) *index.Index {
	t.Helper()
	cfg := liveConfig("")
	ix, err := index.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ups []index.DocUpdate
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range docs {
			if !yield(id) {
				return
			}
		}
	}) {
		d := docs[id]
		if keep(d) {
			ups = append(ups, index.DocUpdate{DocID: id, Seq: 1, Rows: d.rows})
		}
	}
	apply(t, ix, ups...)
	return ix
}

func randLiveRange(rng *rand.Rand) (index.Range, index.Grouping) {
	var r index.Range
	key := func() []byte {
		if rng.IntN(2) == 0 {
			return []byte(strconv.Itoa(rng.IntN(6)))
		}
		return []byte(fmt.Sprintf("[%d,%d]", rng.IntN(6), rng.IntN(4)))
	}
	switch rng.IntN(4) {
	case 0:
	case 1:
		r.StartKey = key()
	case 2:
		r.StartKey, r.EndKey = key(), key()
		if index.Compare(r.StartKey, r.EndKey) > 0 {
			r.StartKey, r.EndKey = r.EndKey, r.StartKey
		}
	case 3:
		r.Keys = [][]byte{key(), key(), key()}
	}
	r.InclusiveEnd = rng.IntN(3) > 0
	if rng.IntN(3) == 0 {
		r.Descending = true
		r.StartKey, r.EndKey = r.EndKey, r.StartKey
	}
	g := index.Grouping{}
	switch rng.IntN(4) {
	case 1:
		g.Exact = true
	case 2:
		g.Level = 1
	case 3:
		g.Level = 2
	}
	if r.Keys != nil {
		g = index.Grouping{Exact: true}
	}
	return r, g
}

// TestExcludeExpired_Random applies random documents with random
// expirations, moves the clock, updates, deletes and purges, and compares
// every answer with ExcludeExpired with the include answer of an index that
// holds only the documents live at that instant: rows, total rows, and the
// reductions of every range and grouping, of an invertible reduce and a
// non-invertible one. Check verifies the cached live reductions along the way.
func TestExcludeExpired_Random(t *testing.T) {
	racebuild.Skip(t)
	seed := *modelSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (-index.seed to repeat)", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	ix := openIndex(t, liveConfig(filepath.Join(t.TempDir(), "ix")))
	index.SetCheckpointDocs(ix, 200)
	docs := map[string]liveDoc{}
	now := int64(1000)
	seq := uint64(0)
	for step := range 60 {
		// Mutations: new and updated documents, deletes, purges of expired ones.
		var ups []index.DocUpdate
		for range rng.IntN(80) + 1 {
			seq++
			id := fmt.Sprintf("d%03d", rng.IntN(400))
			switch rng.IntN(10) {
			case 0:
				delete(docs, id)
				ups = append(ups, index.DocUpdate{DocID: id, Seq: seq})
				continue
			case 1: // the pager purges an expired document
				for pid, d := range docs {
					if d.exp != 0 && d.exp <= now {
						delete(docs, pid)
						ups = append(ups, index.DocUpdate{DocID: pid, Seq: seq})
						break
					}
				}
				continue
			}
			d := liveDoc{rows: map[string][]index.Emit{}}
			if rng.IntN(4) > 0 {
				d.exp = now + int64(rng.IntN(200)) - 20 // some expired already
				d.exp = max(d.exp, 1)
			}
			for range rng.IntN(3) {
				k := strconv.Itoa(rng.IntN(6))
				if rng.IntN(2) == 0 {
					k = fmt.Sprintf("[%d,%d,%d]", rng.IntN(6), rng.IntN(4), rng.IntN(3))
				}
				v := strconv.Itoa(rng.IntN(100) - 30)
				for _, view := range []string{"cs", "mm", "map"} {
					d.rows[view] = append(d.rows[view], index.Emit{Key: []byte(k), Value: []byte(v)})
				}
			}
			docs[id] = d
			ups = append(ups, index.DocUpdate{DocID: id, Seq: seq, Expiration: d.exp, Rows: d.rows})
		}
		apply(t, ix, ups...)
		// Queries at several instants, some repeated (cached values reused).
		for range 3 {
			now += int64(rng.IntN(15))
			or := oracle(t, docs, now, func(d liveDoc) bool { return d.exp == 0 || d.exp > now })
			got, err := ix.LiveRows(ctx, "map", now)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := or.TotalRows("map")
			if got != want {
				t.Fatalf("step %d now %d: LiveRows = %d, want %d", step, now, got, want)
			}
			for range 12 {
				r, g := randLiveRange(rng)
				lr := r
				lr.ExcludeExpired, lr.Now = true, now
				for _, view := range []string{"map", "cs"} {
					equalStrings(t, fmt.Sprintf("step %d now %d: rows of %s %+v", step, now, view, r), rowsOf(t, ix, view, lr), rowsOf(t, or, view, r))
				}
				for _, view := range []string{"cs", "mm"} {
					equalStrings(t, fmt.Sprintf("step %d now %d: reduce of %s %+v %+v", step, now, view, r, g),
						reduced(t, ix, view, lr, g), reduced(t, or, view, r, g))
				}
			}
			closeIndex(t, or)
		}
		if step%10 == 9 {
			checkIndex(t, ix)
		}
		if t.Failed() {
			return
		}
	}
}

// TestExcludeExpired_CacheReuse checks that an exact reduce reuses what an
// earlier one at an instant with the same live rows computed, that one
// newly expired row costs a leaf and its path, and that the include answer
// is unchanged by any of it.
func TestExcludeExpired_CacheReuse(t *testing.T) {
	cs := &countSum{}
	ix := openIndex(t, index.Config{Views: []index.ViewConfig{{Name: "v", Reducer: cs}}})
	var ups []index.DocUpdate
	for i := range 5000 {
		ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%05d", i), Seq: uint64(i + 1), Expiration: int64(100 + i),
			Rows: map[string][]index.Emit{"v": emits(strconv.Itoa(i%1000), "1")}})
	}
	apply(t, ix, ups...)
	calls := func() int64 { return cs.reduces.Load() + cs.rereduces.Load() }
	at := func(now int64) string {
		return strings.Join(reduced(t, ix, "v", index.Range{ExcludeExpired: true, Now: now}, index.Grouping{}), ";")
	}
	if got, want := at(50), "null [5000,5000]"; got != want {
		t.Fatalf("before any expiry: %s, want %s", got, want)
	}
	// 3000 rows expire: the first exact answer descends everywhere.
	if got, want := at(3099), "null [2000,2000]"; got != want {
		t.Fatalf("at 3099: %s, want %s", got, want)
	}
	// Nothing expires from 3099 to 3099: no Reducer call at all.
	before := calls()
	if got, want := at(3099), "null [2000,2000]"; got != want {
		t.Fatalf("at 3099 again: %s, want %s", got, want)
	}
	if n := calls() - before; n != 0 {
		t.Errorf("a repeated exact reduce made %d Reducer calls, want 0", n)
	}
	// One more row expires: a leaf's rows and the rereduces on its path.
	before = calls()
	if got, want := at(3100), "null [1999,1999]"; got != want {
		t.Fatalf("at 3100: %s, want %s", got, want)
	}
	if n := calls() - before; n == 0 || n > 8 {
		t.Errorf("one newly expired row made %d Reducer calls, want a leaf and its path (1..8)", n)
	}
	// A write elsewhere invalidates only its path.
	apply(t, ix, index.DocUpdate{DocID: "d00001", Seq: 9999, Rows: map[string][]index.Emit{"v": emits("1", "5")}})
	before = calls()
	if got, want := at(3100), "null [2000,2004]"; got != want {
		t.Fatalf("after a write: %s, want %s", got, want)
	}
	if n := calls() - before; n == 0 || n > 8 {
		t.Errorf("after one write, %d Reducer calls, want its path (1..8)", n)
	}
	if got, want := strings.Join(reduced(t, ix, "v", index.Range{}, index.Grouping{}), ";"), "null [5000,5004]"; got != want {
		t.Errorf("include mode: %s, want %s", got, want)
	}
	// The clock going back is answered too.
	if got, want := at(1099), "null [4001,4005]"; got != want { // d00001 never expires now
		t.Errorf("at 1099: %s, want %s", got, want)
	}
}

// TestForecast_Random compares Forecast with the include answers of an
// index holding only the documents that expire in each interval.
func TestForecast_Random(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (-index.seed to repeat)", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	ctx := context.Background()
	ix := openIndex(t, liveConfig(""))
	docs := map[string]liveDoc{}
	var ups []index.DocUpdate
	now := int64(10_000)
	for i := range 3000 {
		id := fmt.Sprintf("d%04d", i)
		d := liveDoc{rows: map[string][]index.Emit{}}
		if rng.IntN(5) > 0 {
			d.exp = now + int64(rng.IntN(4000)) - 300
		}
		for range rng.IntN(3) {
			k, v := strconv.Itoa(rng.IntN(50)), strconv.Itoa(rng.IntN(100))
			for _, view := range []string{"cs", "mm", "map"} {
				d.rows[view] = append(d.rows[view], index.Emit{Key: []byte(k), Value: []byte(v)})
			}
		}
		docs[id] = d
		ups = append(ups, index.DocUpdate{DocID: id, Seq: uint64(i + 1), Expiration: d.exp, Rows: d.rows})
	}
	apply(t, ix, ups...)
	// The whole view (answered from the expiry tree), the same through a
	// range that holds every key (answered by a walk), and narrower ranges.
	// Descending ranges bound the rows from StartKey down to EndKey, as a
	// query's: the forecast counts the rows the query would answer.
	for _, r := range []index.Range{{}, {StartKey: js("null")}, {StartKey: js("10"), EndKey: js("30"), InclusiveEnd: true}, {Keys: [][]byte{js("3"), js("40")}},
		{StartKey: js("30"), EndKey: js("10"), InclusiveEnd: true, Descending: true}, {StartKey: js("30"), Descending: true},
		{StartKey: js("30"), EndKey: js("10"), Descending: true, StartDocID: "d1000", EndDocID: "d2000"}} {
		const interval, horizon = 500, 2600
		f, err := ix.Forecast(ctx, "cs", r, now, interval, horizon, true)
		if err != nil {
			t.Fatal(err)
		}
		fm, err := ix.Forecast(ctx, "mm", r, now, interval, horizon, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Intervals) != 6 || f.Intervals[5].End != now+horizon || f.Intervals[0].Start != now {
			t.Fatalf("intervals %+v", f.Intervals)
		}
		check := func(what string, got, gotMM index.ExpiryRows, keep func(liveDoc) bool) {
			or := oracle(t, docs, now, keep)
			defer closeIndex(t, or)
			rows := len(rowsOf(t, or, "cs", r))
			want := reduced(t, or, "cs", r, index.Grouping{})
			wantMM := reduced(t, or, "mm", r, index.Grouping{})
			if r.Keys != nil { // one reduction over every key's rows
				want, wantMM = nil, nil
				if rows > 0 {
					want = []string{"null " + string(sumOf(t, reduced(t, or, "cs", r, index.Grouping{Exact: true})))}
					wantMM = []string{"null " + string(mmOf(t, reduced(t, or, "mm", r, index.Grouping{Exact: true})))}
				}
			}
			if int(got.Rows) != rows || int(gotMM.Rows) != rows {
				t.Errorf("%+v %s: %d rows (%d), want %d", r, what, got.Rows, gotMM.Rows, rows)
			}
			var g, gm []string
			if got.Value != nil {
				g = []string{"null " + string(got.Value)}
				gm = []string{"null " + string(gotMM.Value)}
			}
			equalStrings(t, fmt.Sprintf("%+v %s", r, what), g, want)
			equalStrings(t, fmt.Sprintf("%+v %s (min/max)", r, what), gm, wantMM)
		}
		check("expired", f.Expired, fm.Expired, func(d liveDoc) bool { return d.exp != 0 && d.exp <= now })
		for i, iv := range f.Intervals {
			check(fmt.Sprintf("interval %d", i), iv, fm.Intervals[i], func(d liveDoc) bool { return d.exp > iv.Start && d.exp <= iv.End })
		}
	}
	for _, bad := range [][2]int64{{0, 10}, {10, 0}, {-1, 10}, {1, index.MaxForecastIntervals + 1}} {
		if _, err := ix.Forecast(ctx, "cs", index.Range{}, now, bad[0], bad[1], true); err == nil {
			t.Errorf("Forecast(interval %d, horizon %d) = nil error", bad[0], bad[1])
		}
	}
}

// sumOf rereduces the countSum groups "key [n,s]" into one [n,s].
func sumOf(t *testing.T, groups []string) []byte {
	var vals [][]byte
	for _, g := range groups {
		vals = append(vals, []byte(g[strings.LastIndexByte(g, ' ')+1:]))
	}
	v, err := (&countSum{}).Rereduce(context.Background(), vals)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mmOf(t *testing.T, groups []string) []byte {
	var vals [][]byte
	for _, g := range groups {
		vals = append(vals, []byte(g[strings.LastIndexByte(g, ' ')+1:]))
	}
	v, err := minMax{}.Rereduce(context.Background(), vals)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestExcludeExpired_Reopen checks that expirations survive a restart, from
// the log and from a checkpoint: exact answers after reopening equal those
// before.
func TestExcludeExpired_Reopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ix")
	ctx := context.Background()
	answers := func(ix *index.Index) string {
		r := index.Range{ExcludeExpired: true, Now: 150}
		n, err := ix.LiveRows(ctx, "map", 150)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(n, rowsOf(t, ix, "map", r), reduced(t, ix, "cs", r, index.Grouping{Exact: true}), reduced(t, ix, "mm", r, index.Grouping{}))
	}
	for _, checkpoint := range []bool{false, true} {
		ix, err := index.Open(ctx, liveConfig(path))
		if err != nil {
			t.Fatal(err)
		}
		var ups []index.DocUpdate
		for i := range 300 {
			rows := emits(strconv.Itoa(i%17), strconv.Itoa(i))
			ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%03d", i), Seq: uint64(i + 1), Expiration: int64(i),
				Rows: map[string][]index.Emit{"cs": rows, "mm": rows, "map": rows}})
		}
		if checkpoint {
			index.SetCheckpointDocs(ix, 10)
		}
		apply(t, ix, ups[:150]...)
		apply(t, ix, ups[150:]...)
		before := answers(ix)
		if !strings.HasPrefix(before, "150 ") { // d000 never expires, d151… live
			t.Fatalf("before reopening: %s", before)
		}
		closeIndex(t, ix)
		ix = openIndex(t, liveConfig(path))
		if after := answers(ix); after != before {
			t.Errorf("checkpoint %v: after reopening:\n%s\nbefore:\n%s", checkpoint, after, before)
		}
		closeIndex(t, ix)
	}
}

// TestCheck_DetectsExpiryTampering damages the expiration kept in a node,
// a cached live count, a leaf's cached expirations and reductions by
// expiration, and the caches of rows that never expire, and expects Check
// to name each.
func TestCheck_DetectsExpiryTampering(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(ix *index.Index) bool
		want    string
	}{
		{"earliest expiration", func(ix *index.Index) bool { index.CorruptMinExp(ix, "cs"); return true }, "keeps earliest expiration 101, its rows' is 100"},
		{"live count", func(ix *index.Index) bool { return index.CorruptLiveCount(ix, "cs") }, "caches 258 live rows"},
		{"expiry tree", func(ix *index.Index) bool { index.CorruptExpiryRow(ix, "mm"); return true }, `expiry tree of view "mm": row 0 is`},
		{"reduction by expiration", func(ix *index.Index) bool { return index.CorruptSuffixReduction(ix, "cs", []byte(`[1,2]`)) },
			"caches reduction [1,2] of its rows expiring after"},
		{"expirations of a leaf", func(ix *index.Index) bool { return index.CorruptSuffixExp(ix, "cs") }, "caches expirations ["},
		{"never-expiring count", func(ix *index.Index) bool { return index.CorruptNeverCount(ix, "cs") }, "caches 44 rows that never expire, 43 are"},
		{"never-expiring reduction", func(ix *index.Index) bool { return index.CorruptNeverReduction(ix, "cs", []byte(`[1,2]`)) },
			"caches reduction [1,2] of rows that never expire, recomputed [43,43]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix, err := index.Open(context.Background(), liveConfig(""))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ix.Close() })
			var ups []index.DocUpdate
			for i := range 300 {
				rows := emits(strconv.Itoa(i%10), "1")
				exp := int64(100 + i)
				if i%7 == 3 {
					exp = 0 // 43 documents never expire
				}
				ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%03d", i), Seq: uint64(i + 1), Expiration: exp,
					Rows: map[string][]index.Emit{"cs": rows, "mm": rows}})
			}
			apply(t, ix, ups...)
			// A whole-view reduce caches the live rows and the rows that
			// never expire in the root; a grouped one, live rows below it.
			reduced(t, ix, "cs", index.Range{ExcludeExpired: true, Now: 149}, index.Grouping{})
			reduced(t, ix, "cs", index.Range{ExcludeExpired: true, Now: 149}, index.Grouping{Exact: true})
			// A key range holding whole leaves: their reductions by
			// expiration.
			reduced(t, ix, "cs", index.Range{ExcludeExpired: true, Now: 149, EndKey: []byte("9")}, index.Grouping{})
			checkIndex(t, ix)
			if !tc.corrupt(ix) {
				t.Fatal("nothing to corrupt")
			}
			err = ix.Check(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check after corruption = %v, want a message containing %q", err, tc.want)
			}
		})
	}
}

// TestExcludeExpired_WholeView checks whole-view exact reduces and live row
// counts, which come from the rows that never expire and the expiry tree's
// rows after the instant, against an index of the live documents: with a
// mix of documents that never expire and documents that do, a reduce that
// can be subtracted and one that cannot (min/max), the clock moving on and
// back, writes in between, and the cases where either part or both are
// empty. It also checks that the cost does not follow what expired since.
func TestExcludeExpired_WholeView(t *testing.T) {
	racebuild.Skip(t)
	seed := *modelSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (-index.seed to repeat)", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	ctx := context.Background()
	cs := &countSum{}
	cfg := liveConfig("")
	cfg.Views[0].Reducer = cs
	ix := openIndex(t, cfg)
	docs := map[string]liveDoc{}
	seq := uint64(0)
	// write gives n documents: never expiring with probability pNever, else
	// expiring in [from, to).
	write := func(n int, pNever float64, from, to int64) {
		var ups []index.DocUpdate
		for range n {
			seq++
			id := fmt.Sprintf("d%05d", rng.IntN(6000))
			d := liveDoc{rows: map[string][]index.Emit{}}
			if rng.Float64() >= pNever {
				d.exp = from + rng.Int64N(to-from)
			}
			for range 1 + rng.IntN(2) {
				k := fmt.Sprintf("[%d,%d]", rng.IntN(20), rng.IntN(5))
				v := strconv.Itoa(rng.IntN(1000) - 300)
				for _, view := range []string{"cs", "mm", "map"} {
					d.rows[view] = append(d.rows[view], index.Emit{Key: []byte(k), Value: []byte(v)})
				}
			}
			docs[id] = d
			ups = append(ups, index.DocUpdate{DocID: id, Seq: seq, Expiration: d.exp, Rows: d.rows})
		}
		apply(t, ix, ups...)
	}
	check := func(what string, now int64) {
		t.Helper()
		or := oracle(t, docs, now, func(d liveDoc) bool { return d.exp == 0 || d.exp > now })
		defer closeIndex(t, or)
		r := index.Range{ExcludeExpired: true, Now: now}
		for _, view := range []string{"cs", "mm"} {
			equalStrings(t, fmt.Sprintf("%s: now %d: whole reduce of %s", what, now, view),
				reduced(t, ix, view, r, index.Grouping{}), reduced(t, or, view, index.Range{}, index.Grouping{}))
			// The same through a descending query and document id bounds,
			// which select every row too.
			rd := r
			rd.Descending, rd.StartDocID = true, "d"
			equalStrings(t, fmt.Sprintf("%s: now %d: whole descending reduce of %s", what, now, view),
				reduced(t, ix, view, rd, index.Grouping{}), reduced(t, or, view, index.Range{}, index.Grouping{}))
		}
		got, err := ix.LiveRows(ctx, "map", now)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := or.TotalRows("map"); got != want {
			t.Errorf("%s: now %d: LiveRows = %d, want %d", what, now, got, want)
		}
	}
	calls := func() int64 { return cs.reduces.Load() + cs.rereduces.Load() }

	// Every document expires: no row never expires.
	write(3000, 0, 1000, 2000)
	for _, now := range []int64{500, 1000, 1300, 1600, 1999, 2500} {
		check("all expiring", now)
	}
	// A mix, written in several batches.
	for range 4 {
		write(800, 0.3, 1000, 3000)
	}
	var now int64
	for _, now = range []int64{999, 1500, 1200, 2200, 2999, 3000, 1100} {
		check("mix", now)
	}
	// The cost of an exact whole reduce does not follow what expired since:
	// with 1/20 of the rows newly expired, a few paths of Reducer calls.
	for now = 1200; now < 2900; now += 100 {
		reduced(t, ix, "cs", index.Range{ExcludeExpired: true, Now: now}, index.Grouping{})
		before := calls()
		reduced(t, ix, "cs", index.Range{ExcludeExpired: true, Now: now + 100}, index.Grouping{})
		if n := calls() - before; n > 12 {
			t.Errorf("whole reduce at %d after one at %d: %d Reducer calls, want a few paths' (<= 12)", now+100, now, n)
		}
	}
	// A write changes a path of each tree, and only that is reduced again.
	write(1, 0.5, 1000, 3000)
	check("after one write", 2000)
	// Every expiring row expired: only the rows that never expire are live.
	check("only never-expiring", 5000)
	// Only documents that expire, every one expired: no row at all.
	for id := range docs {
		if docs[id].exp == 0 {
			delete(docs, id)
			seq++
			apply(t, ix, index.DocUpdate{DocID: id, Seq: seq})
		}
	}
	check("nothing live", 5000)
	if got := reduced(t, ix, "mm", index.Range{ExcludeExpired: true, Now: 5000}, index.Grouping{}); len(got) != 0 {
		t.Errorf("nothing live: whole reduce gave %q, want no row", got)
	}
	check("clock back", 1500)
}

// TestExcludeExpired_FloatSums checks exact reduces of fractional values
// with a float sum, whose cached live reductions add in another order than
// a recomputation does: the answers are the live rows' sum up to rounding,
// and Check accepts the caches (it compares them with a relative 1e-9).
func TestExcludeExpired_FloatSums(t *testing.T) {
	ix := openIndex(t, index.Config{Views: []index.ViewConfig{{Name: "v", Reducer: sumReducer{}}}})
	var ups []index.DocUpdate
	exps := make([]int64, 5000)
	for i := range exps {
		if i%3 > 0 { // a third never expire
			exps[i] = int64(100 + i%1000)
		}
		ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%05d", i), Seq: uint64(i + 1), Expiration: exps[i],
			Rows: map[string][]index.Emit{"v": emits(fmt.Sprintf("[%d,%d]", i%97, i), fmt.Sprintf("0.%d", i%10+1))}})
	}
	apply(t, ix, ups...)
	for _, now := range []int64{300, 600, 900} {
		want := 0.0
		for i, e := range exps {
			if e == 0 || e > now {
				f, _ := strconv.ParseFloat(fmt.Sprintf("0.%d", i%10+1), 64)
				want += f
			}
		}
		r := index.Range{ExcludeExpired: true, Now: now}
		got := reduced(t, ix, "v", r, index.Grouping{})
		var v float64
		if len(got) != 1 || func() error { _, err := fmt.Sscanf(got[0], "null %g", &v); return err }() != nil || math.Abs(v-want) > 1e-9*want {
			t.Errorf("now %d: whole reduce %q, want null %g", now, got, want)
		}
		if g := reduced(t, ix, "v", r, index.Grouping{Level: 1}); len(g) != 97 {
			t.Errorf("now %d: %d groups, want 97", now, len(g))
		}
		checkIndex(t, ix)
	}
}

// TestExcludeExpired_LeafReductionsByExpiration checks exact answers that
// come from leaves' cached reductions by expiration (key ranges holding
// whole leaves, and groups) against an index of the live documents: at
// every instant across the expirations, with many documents expiring at
// the same instant (ties inside a leaf), documents that never expire,
// leaves whose every row has expired, the clock moving back, a reduce that
// cannot be subtracted (min/max), and, at an instant too large for the
// expiry tree, live rows counted first (caching expirations without
// reductions) and reduced after.
func TestExcludeExpired_LeafReductionsByExpiration(t *testing.T) {
	ix := openIndex(t, liveConfig(""))
	docs := map[string]liveDoc{}
	var ups []index.DocUpdate
	for i := range 400 {
		d := liveDoc{exp: 100 + int64(i%13), rows: map[string][]index.Emit{}}
		switch {
		case i%11 == 0:
			d.exp = 0
		case i >= 200 && i < 280:
			d.exp = 100 // a run of keys all expiring at once: whole leaves
		}
		k := fmt.Sprintf("[%d,%d]", i/20, i%20)
		if i >= 200 && i < 280 {
			k = fmt.Sprintf("[10,%d]", i)
		}
		for _, view := range []string{"cs", "mm", "map"} {
			d.rows[view] = emits(k, strconv.Itoa(i%17-5))
		}
		id := fmt.Sprintf("d%03d", i)
		docs[id] = d
		ups = append(ups, index.DocUpdate{DocID: id, Seq: uint64(i + 1), Expiration: d.exp, Rows: d.rows})
	}
	apply(t, ix, ups...)
	ranges := []index.Range{
		{EndKey: js("[19]")},
		{StartKey: js("[1]"), EndKey: js("[15]")},
		{StartKey: js("[0,3]"), Descending: false},
	}
	check := func(now int64) {
		t.Helper()
		or := oracle(t, docs, now, func(d liveDoc) bool { return d.exp == 0 || d.exp > now })
		defer closeIndex(t, or)
		for _, view := range []string{"cs", "mm"} {
			for _, r := range ranges {
				for _, g := range []index.Grouping{{}, {Level: 1}} {
					er := r
					er.ExcludeExpired, er.Now = true, now
					equalStrings(t, fmt.Sprintf("now %d: %s %+v %+v", now, view, r, g),
						reduced(t, ix, view, er, g), reduced(t, or, view, r, g))
				}
			}
		}
		checkIndex(t, ix)
	}
	// First, far in the future: live rows are counted by descending (the
	// expiry tree cannot be split there), without a Reducer, which caches
	// the leaves' expirations without reductions; reducing after must add
	// them.
	far := int64(1) << 60
	n, err := ix.LiveRows(context.Background(), "cs", far)
	if want := 400/11 + 1; err != nil || n != want {
		t.Fatalf("LiveRows at %d = %d, %v; want %d", far, n, err, want)
	}
	for _, now := range []int64{99, 100, 101, 105, 104, 112, 113, 200, far, 100, 99} {
		check(now)
	}
}

// padReducer reduces rows to a JSON string of 10 bytes per row: a result
// that grows with its rows, so that a leaf's reductions by expiration would
// take quadratic room and are not kept.
type padReducer struct{}

func (padReducer) Reduce(_ context.Context, _ [][]byte, _ []string, values [][]byte) ([]byte, error) {
	return []byte(`"` + strings.Repeat("x", 10*len(values)) + `"`), nil
}

func (padReducer) Rereduce(_ context.Context, values [][]byte) ([]byte, error) {
	n := 0
	for _, v := range values {
		n += len(v) - 2
	}
	return []byte(`"` + strings.Repeat("x", n) + `"`), nil
}

// TestExcludeExpired_GrowingReduction checks exact grouped and key-range
// reduces with a reduce whose result grows with its rows (the leaves do
// not keep their reductions by expiration, and reduce their live rows at
// each query) against include-mode answers over the live documents.
func TestExcludeExpired_GrowingReduction(t *testing.T) {
	cfg := index.Config{NumPartitions: 4, Views: []index.ViewConfig{{Name: "p", Reducer: padReducer{}}}}
	ix := openIndex(t, cfg)
	var ups []index.DocUpdate
	for i := range 500 {
		exp := 100 + int64(i*7%50)
		if i%9 == 0 {
			exp = 0
		}
		ups = append(ups, index.DocUpdate{DocID: fmt.Sprintf("d%03d", i), Seq: uint64(i + 1), Expiration: exp,
			Rows: map[string][]index.Emit{"p": emits(fmt.Sprintf("[%d,%d]", i/50, i), "1")}})
	}
	apply(t, ix, ups...)
	for _, now := range []int64{99, 110, 111, 130, 120, 149, 150} {
		live := openIndex(t, cfg)
		var lu []index.DocUpdate
		for _, u := range ups {
			if u.Expiration == 0 || u.Expiration > now {
				u.Expiration = 0
				lu = append(lu, u)
			}
		}
		apply(t, live, lu...)
		for _, r := range []index.Range{{EndKey: js("[9]")}, {StartKey: js("[2]"), EndKey: js("[8,450]")}} {
			for _, g := range []index.Grouping{{}, {Level: 1}} {
				er := r
				er.ExcludeExpired, er.Now = true, now
				equalStrings(t, fmt.Sprintf("now %d: %+v %+v", now, r, g), reduced(t, ix, "p", er, g), reduced(t, live, "p", r, g))
			}
		}
		checkIndex(t, ix)
		closeIndex(t, live)
	}
}
